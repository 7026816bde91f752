"""CC Switch's pieces as data (bot/lint/ccmodel.py) called directly: what Claude and Codex would use from one copy
(the token CC Switch's apiKeyField names, Codex's active provider table and where its bearer token sits), a
provider entry of the wrong shape, and keys compared by fingerprint, never shown."""

from __future__ import annotations

from bot.lint.ccmodel import (
    Provider,
    Store,
    Value,
    claude_view,
    codex_view,
    fingerprint,
    host_of,
    json_object,
    provider_view,
    real_key,
)
from tests.lint_texts import CANARY, CODEX_OK, codex

CLAUDE_ENV = {
    "ANTHROPIC_BASE_URL": "https://taotoken.net/api",
    "ANTHROPIC_AUTH_TOKEN": CANARY,
    "ANTHROPIC_API_KEY": "sk-ant-other-Zq8vK2mR7xW4nP9tL3bY6",
    "ANTHROPIC_MODEL": "claude-x",
}


def test_claude_uses_the_token_cc_switch_names_and_its_line() -> None:
    text = '{\n  "env": {\n    "ANTHROPIC_AUTH_TOKEN": "a",\n    "ANTHROPIC_API_KEY": "b"\n  }\n}\n'
    _, lines = json_object(text) or ({}, {})
    view = claude_view({"env": CLAUDE_ENV}, lines)
    assert (view.key.text, view.key.label, view.key.line) == (CANARY, "env.ANTHROPIC_AUTH_TOKEN", 3)
    other = claude_view({"env": CLAUDE_ENV}, lines, key_field="ANTHROPIC_API_KEY")
    assert (other.key.label, other.key.line) == ("env.ANTHROPIC_API_KEY", 4)
    assert view.base_url.text == "https://taotoken.net/api" and view.model.text == "claude-x"
    placeholder = claude_view({"env": {"ANTHROPIC_AUTH_TOKEN": "YOUR_KEY", "ANTHROPIC_API_KEY": CANARY}})
    assert placeholder.key.text == CANARY  # a placeholder is no key: the other variable's key is the one used
    assert claude_view({"env": []}).parsed and not claude_view([]).parsed


def test_codex_reads_its_active_provider_table_and_the_auth_key() -> None:
    view = codex_view(CODEX_OK, {"OPENAI_API_KEY": CANARY})
    assert view.provider_id.text == "taotoken"
    assert (view.base_url.text, view.base_url.line) == ("https://taotoken.net/api/v1", 6)
    assert view.env_key.text == "TAOTOKEN_CODEX_API_KEY" and view.key.text == CANARY
    assert view.bearer.text is None
    other = codex_view(codex(**{'model_provider = "taotoken"': 'model_provider = "openai"'}), None)
    assert other.base_url.text is None and other.key.text is None  # no table for the active id: nothing from it
    assert not codex_view("model = [", None).parsed


def test_codex_bearer_in_the_table_wins_over_the_top_level_one() -> None:
    top = 'experimental_bearer_token = "tt-top-9fQ2xL7kM4pR8vW3nZ6"\n' + CODEX_OK
    assert codex_view(top, None).bearer.label == "experimental_bearer_token"
    both = top + 'experimental_bearer_token = "tt-table-9fQ2xL7kM4pR8vW3"\n'
    view = codex_view(both, None)
    assert view.bearer.label == "model_providers.taotoken.experimental_bearer_token"
    assert view.bearer.text == "tt-table-9fQ2xL7kM4pR8vW3"


def test_an_entry_of_the_wrong_shape_reads_as_unparsed() -> None:
    codex_entry = Provider("codex", "p1", "TaoToken", {"auth": {}, "config": CODEX_OK})
    assert codex_entry.shape_ok and provider_view(codex_entry).provider_id.text == "taotoken"
    broken = Provider("codex", "p2", "Broken", {"auth": {}, "config": {"model": "x"}})
    assert not broken.shape_ok and not provider_view(broken).parsed
    assert broken.entry == "provider Broken (codex)" and broken.label == 'Codex provider "Broken"'
    store = Store("config.json", (codex_entry, broken), {"codex": "p2", "claude": "nope"})
    assert store.current_provider("codex") is broken and store.current_provider("claude") is None


def test_keys_are_compared_by_fingerprint_and_urls_by_host() -> None:
    assert fingerprint(CANARY) == fingerprint(f" {CANARY}\n") != fingerprint(CANARY + "x")
    assert CANARY not in fingerprint(CANARY) and fingerprint(CANARY).startswith("sha256:")
    assert real_key("YOUR_TAOTOKEN_API_KEY") is None and real_key(3) is None and real_key(f" {CANARY} ") == CANARY
    assert host_of("https://TaoToken.net:8443/api/v1") == "taotoken.net:8443"
    assert host_of(None) is None and host_of("not a url") is None
    assert Value(f"https://u:{CANARY}@taotoken.net/api", "x").shown == "'https://***@taotoken.net/api'"
    assert Value(None, "x").shown == "unset"
    assert json_object("[1]") is None and json_object("{") is None and json_object(None) is None
