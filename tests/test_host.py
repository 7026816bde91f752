"""Where a review runs (bot/review/host.py): what a review without the runner extra says, and what --agent-only
needs of it."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from bot.config.settings import load_settings
from bot.errors import InputError
from bot.ledger import open_ledger
from bot.review import host
from bot.review.flow import Reviewer
from bot.review.host import here, missing_runner
from bot.review.request import ReviewRequest
from tests.conftest import REPO_CONFIG

REAL_FIND_SPEC = importlib.util.find_spec


def hide(monkeypatch: pytest.MonkeyPatch, *modules: str) -> None:
    """torch and ninja look installed except `modules`; every other module is looked up for real."""

    def find_spec(name: str, *args: object) -> object:
        if name in ("torch", "ninja"):
            return None if name in modules else REAL_FIND_SPEC("json")
        return REAL_FIND_SPEC(name, *args)

    monkeypatch.setattr(host.importlib.util, "find_spec", find_spec)


def test_a_review_without_the_runner_extra_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    hide(monkeypatch, "torch", "ninja")
    assert missing_runner() == "torch and ninja"
    hide(monkeypatch)
    assert missing_runner() is None
    hide(monkeypatch, "ninja")
    assert missing_runner() == "ninja"
    settings = load_settings({"OPGATE_DATABASE_URL": str(tmp_path / "ledger.sqlite")}, REPO_CONFIG)
    ledger = open_ledger(settings.database_url)
    try:
        with pytest.raises(InputError, match=r"needs ninja: pip install 'opgate\[runner\]'"):
            here(settings)
        agent_only = ReviewRequest(repo=tmp_path, base="main", head="HEAD", out=tmp_path / "out", agent_only=True)
        Reviewer(agent_only, settings, ledger, here(settings, agent_only=True))
    finally:
        ledger.close()
