"""`opgate lint` on .env files (bot/lint/env.py): a real key, a duplicate, a malformed line, a bad base URL, each at
its line."""

from __future__ import annotations

import pytest

from bot.lint import (
    format_text,
    lint_env,
    mask,
)
from tests.lint_texts import CANARY, CANARY_HEX, CANARY_TT, one


@pytest.mark.parametrize(
    "value", [CANARY, CANARY_TT, CANARY_HEX, "sk-proj-" + "a1B2c3D4e5F6g7H8i9J0", "abcd1234efgh5678"]
)
def test_env_real_key_is_an_error(value: str) -> None:
    text = f"# keys\nTAOTOKEN_BASE_URL=https://taotoken.net/api\nTAOTOKEN_API_KEY_FLASHMLA_AGENT={value}\n"
    f = one(lint_env(".env.example", text), "ENV001")
    assert (f.line, f.severity) == (3, "error")
    assert "TAOTOKEN_API_KEY_FLASHMLA_AGENT" in f.message
    assert value not in f.message and mask(value) in f.message


def test_env_key_in_a_variable_with_an_innocent_name_is_an_error() -> None:
    f = one(lint_env(".env", f"OPGATE_BUILD_DIR=/tmp/x\nNOTES={CANARY}\n"), "ENV001")
    assert f.line == 2 and "NOTES" in f.message


@pytest.mark.parametrize(
    "value",
    ["", "YOUR_TAOTOKEN_API_KEY", "<your key>", "changeme", "xxxxxxxxxxxxxxxxxxxxxxxx", "sk-xxxxxxxx", "${KEY}"],
)
def test_env_placeholders_pass(value: str) -> None:
    assert lint_env(".env.example", f"TAOTOKEN_API_KEY_DEEPGEMM_AGENT={value}\n") == []


def test_env_short_non_placeholder_secret_is_a_warning() -> None:
    f = one(lint_env(".env.example", "OPGATE_AGENT_TIMEOUT_S=120\nANTHROPIC_AUTH_TOKEN=abc\n"), "ENV002")
    assert (f.line, f.severity) == (2, "warning") and "ANTHROPIC_AUTH_TOKEN" in f.message


def test_env_duplicate_assignment() -> None:
    text = "TAOTOKEN_API_KEY_CI_SUMMARY=\nOPGATE_BUILD_DIR=/x\nTAOTOKEN_API_KEY_CI_SUMMARY=YOUR_KEY\n"
    f = one(lint_env(".env.example", text), "ENV003")
    assert f.line == 3 and "TAOTOKEN_API_KEY_CI_SUMMARY" in f.message and "line 1" in f.message


def test_env_bare_key_line_and_malformed_line() -> None:
    findings = lint_env(".env", f"A=1\n{CANARY}\nthis is not an assignment\n")
    assert one(findings, "ENV001").line == 2
    assert one(findings, "ENV004").line == 3
    assert CANARY[3:] not in format_text(findings)


def test_env_base_url_with_tracking_parameters() -> None:
    text = "# gateway\nTAOTOKEN_BASE_URL=https://taotoken.net/api?utm_source=chat\n"
    f = one(lint_env(".env.example", text), "URL001")
    assert (f.line, f.severity) == (2, "error") and "TAOTOKEN_BASE_URL" in f.message and "utm_source" in f.message


def test_env_anthropic_base_url_with_v1_suffix() -> None:
    f = one(lint_env(".env.example", "ANTHROPIC_BASE_URL=https://taotoken.net/api/v1\n"), "URL005")
    assert f.line == 1 and "ANTHROPIC_BASE_URL" in f.message


def test_env_placeholder_base_url_is_not_judged() -> None:
    assert lint_env(".env.example", "ANTHROPIC_BASE_URL=YOUR_BASE_URL\nTAOTOKEN_BASE_URL=\n") == []
