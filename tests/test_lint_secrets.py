"""What `opgate lint` takes for a key (bot/lint/secrets.py): names, URLs and model ids are not keys; placeholders are
not; a key is masked."""

from __future__ import annotations

import pytest

from bot.lint import (
    find_keys,
    is_placeholder,
    looks_like_key,
    mask,
)
from tests.lint_texts import CANARY


@pytest.mark.parametrize(
    "value",
    [
        "deepgemm_tile_acceptance_001",
        "TAOTOKEN_API_KEY_V41_ATTENTION_AGENT",
        "Qwen/Qwen3-Coder-480B-A35B-Instruct",
        "claude-sonnet-4-5-20250929",
        "https://taotoken.net/api/v1",
        "~/.cache/opgate/build",
        "reports/opgate.sqlite",
        "latency_p50_regression <= 3%",
    ],
)
def test_names_urls_and_model_ids_are_not_keys(value: str) -> None:
    assert not looks_like_key(value) and find_keys(value) == []


def test_placeholders() -> None:
    assert all(map(is_placeholder, ["", "YOUR_KEY", "<key>", "changeme", "xxxx", "sk-xxxxxxxx", "${X}"]))
    assert not is_placeholder(CANARY)
    assert mask(CANARY) == "sk-…"
