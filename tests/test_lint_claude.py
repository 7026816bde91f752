"""`opgate lint` on Claude Code settings (bot/lint/claude.py): provider settings outside env, literal keys, the token
and base URL."""

from __future__ import annotations

from bot.lint import (
    format_text,
    lint_claude,
)
from tests.lint_texts import CANARY, CANARY_TT, CLAUDE_OK, one


def test_claude_provider_setting_outside_env() -> None:
    text = '{\n  "env": {"ANTHROPIC_AUTH_TOKEN": ""},\n  "ANTHROPIC_BASE_URL": "https://taotoken.net/api"\n}\n'
    f = one(lint_claude(".claude/settings.json", text), "CLAUDE002")
    assert f.line == 3 and "ANTHROPIC_BASE_URL" in f.message


def test_claude_both_token_variables() -> None:
    text = CLAUDE_OK.replace('"ANTHROPIC_MODEL"', '"ANTHROPIC_API_KEY": "",\n    "ANTHROPIC_MODEL"')
    f = one(lint_claude(".claude/settings.json", text), "CLAUDE003")
    assert f.line == 5 and "ANTHROPIC_API_KEY" in f.message and "ANTHROPIC_AUTH_TOKEN" in f.message


def test_claude_literal_key_in_project_settings_is_an_error() -> None:
    findings = lint_claude(".claude/settings.json", CLAUDE_OK.replace("YOUR_TAOTOKEN_API_KEY", CANARY))
    f = one(findings, "CLAUDE004")
    assert (f.line, f.severity) == (4, "error") and "ANTHROPIC_AUTH_TOKEN" in f.message
    assert CANARY[3:] not in format_text(findings)


def test_claude_literal_key_in_personal_settings_is_a_warning() -> None:
    text = CLAUDE_OK.replace("YOUR_TAOTOKEN_API_KEY", CANARY_TT)
    f = one(lint_claude(".claude/settings.local.json", text), "CLAUDE004")
    assert (f.line, f.severity) == (4, "warning") and "ANTHROPIC_AUTH_TOKEN" in f.message


def test_claude_key_inside_a_hook_command() -> None:
    text = CLAUDE_OK.rstrip()[:-1] + f',\n  "apiKeyHelper": "echo {CANARY}"\n}}\n'
    findings = lint_claude(".claude/settings.json", text)
    f = one(findings, "CLAUDE004")
    assert f.line == 8 and "apiKeyHelper" in f.message and CANARY[3:] not in f.message


def test_claude_codex_variable() -> None:
    text = CLAUDE_OK.replace('"ANTHROPIC_MODEL"', '"TAOTOKEN_CODEX_API_KEY": "",\n    "ANTHROPIC_MODEL"')
    f = one(lint_claude(".claude/settings.json", text), "CLAUDE005")
    assert f.line == 5 and "TAOTOKEN_CODEX_API_KEY" in f.message


def test_claude_token_without_base_url() -> None:
    text = CLAUDE_OK.replace('    "ANTHROPIC_BASE_URL": "https://taotoken.net/api",\n', "")
    f = one(lint_claude(".claude/settings.json", text), "CLAUDE006")
    assert (f.line, f.severity) == (3, "warning") and "ANTHROPIC_AUTH_TOKEN" in f.message


def test_claude_base_url_with_query_string() -> None:
    text = CLAUDE_OK.replace("https://taotoken.net/api", "https://taotoken.net/api?utm_medium=docs")
    f = one(lint_claude(".claude/settings.json", text), "URL001")
    assert f.line == 3 and "ANTHROPIC_BASE_URL" in f.message


def test_claude_env_not_an_object() -> None:
    f = one(lint_claude("settings.json", '{\n  "env": ["ANTHROPIC_BASE_URL"]\n}\n'), "CLAUDE001")
    assert f.line == 2 and "env" in f.message
