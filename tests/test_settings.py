"""Settings from the environment (bot/config/settings.py): a bad number names its variable, keys are read but never
shown."""

from __future__ import annotations

import pytest

from bot.config.settings import load_settings
from bot.errors import InputError
from tests.conftest import REPO_CONFIG


def test_settings_reject_bad_numbers_with_the_setting_name():
    with pytest.raises(InputError, match="OPGATE_MEASURE_MAX_SECONDS"):
        load_settings({"OPGATE_MEASURE_MAX_SECONDS": "soon"})
    env = {"TAOTOKEN_API_KEY_DEEPGEMM_AGENT": "sk-123456789", "OPGATE_CASE_TIMEOUT_S": "5"}
    settings = load_settings(env, REPO_CONFIG)
    assert settings.case_timeout_s == 5 and settings.key_for("TAOTOKEN_API_KEY_DEEPGEMM_AGENT") == "sk-123456789"
    assert "sk-123456789" not in repr(settings)
