"""CC Switch sync (bot/lint/ccsync.py): the live client files against the current provider's copy (CCS005-CCS007),
every key with one owner (CCS008-CCS010), no current provider (CCS001); each sync failure users meet, on both store
formats."""

from __future__ import annotations

import json

from bot.lint import fingerprint
from tests import ccswitch_world
from tests.ccswitch_world import (
    CODEX_CONFIG,
    K_CLAUDE,
    K_CLAUDE_OLD,
    K_CODEX,
    K_OTHER,
    OTHER_CONFIG,
    Entry,
    World,
    claude_copy,
    codex_copy,
    one,
    rules,
    write,
)

world = ccswitch_world.world  # the fixture: each test on both store formats


def test_auth_json_keeps_the_previous_providers_key(world: World) -> None:
    """cc-switch #4944: config.toml switched, auth.json still holds the other provider's OPENAI_API_KEY."""
    write(world.codex_auth, json.dumps({"OPENAI_API_KEY": K_OTHER}, indent=2))
    f = one(world.lint(), "CCS007")
    assert (f.path, f.line, f.severity) == (str(world.codex_auth), 2, "error")
    assert 'Codex provider "Other"' in f.message and 'current Codex provider "TaoToken Codex"' in f.message
    assert fingerprint(K_OTHER) in f.message


def test_bearer_in_config_and_key_in_auth_json_of_different_providers(world: World) -> None:
    """preserveCodexOfficialAuthOnSwitch puts the key into config.toml; auth.json must not hold another's."""
    bearer = CODEX_CONFIG + f'experimental_bearer_token = "{K_CODEX}"\n'
    write(world.codex_config, bearer)
    write(world.codex_auth, json.dumps({"OPENAI_API_KEY": K_OTHER}, indent=2))
    f = one(world.lint(), "CCS007")
    assert f.path == str(world.codex_auth)
    assert 'Codex provider "Other"' in f.message and "experimental_bearer_token" in f.message


def test_bearer_with_the_official_login_kept_in_auth_json_is_clean(world: World) -> None:
    official = Entry("codex", "x-off", "OpenAI Official", codex_copy("sk-off-7Hq2mW9xK4pL8vN3bR6t", ""))
    official.category = "official"
    world.entries.append(official)
    world.write_store()
    write(world.codex_config, CODEX_CONFIG + f'experimental_bearer_token = "{K_CODEX}"\n')
    write(world.codex_auth, json.dumps({"OPENAI_API_KEY": "sk-off-7Hq2mW9xK4pL8vN3bR6t"}))
    assert world.lint() == []


def test_live_settings_json_edited_by_hand(world: World) -> None:
    """cc-switch #1884: a hand edit of settings.json is not in the store (and is copied back on the next switch)."""
    edited = claude_copy("https://old-gw.example.com/api", "sk-hand-3Kq8mW2xR7pL4vN9bZ5t")
    write(world.claude, json.dumps(edited, indent=2))
    findings = world.lint()
    assert rules(findings) == ["CCS005", "CCS007"]
    url, key = findings
    assert (url.line, url.severity) == (3, "error") and "env.ANTHROPIC_BASE_URL" in url.message
    assert "old-gw.example.com" in url.message and 'current Claude provider "TaoToken"' in url.message
    assert key.line == 4 and "a key no CC Switch provider stores" in key.message


def test_live_model_edited_by_hand_is_a_warning(world: World) -> None:
    write(world.claude, json.dumps(claude_copy(model="claude-opus-4-1"), indent=2))
    f = one(world.lint(), "CCS005")
    assert (f.line, f.severity) == (5, "warning") and "ANTHROPIC_MODEL" in f.message


def test_live_config_toml_of_another_provider(world: World) -> None:
    write(world.codex_config, OTHER_CONFIG)
    findings = world.lint()
    assert [(f.rule, f.line, f.severity) for f in findings] == [("CCS006", 1, "error"), ("CCS006", 6, "error")]
    assert "model_provider is 'other'" in findings[0].message and "api.other.example" in findings[1].message


def test_one_key_for_both_clients(world: World) -> None:
    x = world.entry("TaoToken Codex")
    x.settings["auth"]["OPENAI_API_KEY"] = K_CLAUDE
    world.write_store()
    world.switch()
    f = one(world.lint(), "CCS008")
    assert f.path == str(world.codex_auth) and fingerprint(K_CLAUDE) in f.message
    assert 'Claude provider "TaoToken"' in f.message and 'Codex provider "TaoToken Codex"' in f.message


def test_a_task_domain_key_in_cc_switch(world: World) -> None:
    f = one(world.lint({"TAOTOKEN_API_KEY_FLASHMLA_AGENT": K_CLAUDE_OLD}), "CCS009")
    assert f.entry == "provider Old Env (claude)" and "TAOTOKEN_API_KEY_FLASHMLA_AGENT" in f.message


def test_codex_env_key_whose_value_is_the_claude_key(world: World) -> None:
    config = CODEX_CONFIG.replace("requires_openai_auth = true", 'env_key = "TAOTOKEN_CODEX_API_KEY"')
    world.entry("TaoToken Codex").settings = {"auth": {}, "config": config}
    world.write_store()
    world.switch()
    assert world.lint({"TAOTOKEN_CODEX_API_KEY": K_CODEX}) == []
    f = one(world.lint({"TAOTOKEN_CODEX_API_KEY": K_CLAUDE}), "CCS008")
    assert (f.path, f.line) == (str(world.codex_config), 8) and "$TAOTOKEN_CODEX_API_KEY" in f.message


def test_missing_live_files(world: World) -> None:
    world.claude.unlink()
    world.codex_config.unlink()
    world.codex_auth.unlink()
    findings = world.lint()
    assert [(f.path, f.rule, f.severity) for f in findings] == [
        (str(world.claude), "CCS005", "warning"),
        (str(world.codex_auth), "CCS007", "error"),  # Codex would run without a key
        (str(world.codex_config), "CCS006", "warning"),
    ]
    assert all("does not exist" in f.message for f in findings)


def test_no_current_provider_is_info(world: World) -> None:
    for e in world.entries:
        e.current = e.current and e.client == "claude"
    world.write_store()
    f = one(world.lint(), "CCS001")
    assert f.severity == "info" and "Codex" in f.message


def test_a_key_leaked_to_a_provider_on_another_host(world: World) -> None:
    """cc-switch #4849: a key saved into another provider's entry is then sent to a gateway that never issued it."""
    world.entry("Other").settings["auth"]["OPENAI_API_KEY"] = K_CODEX
    world.write_store()
    f = one(world.lint(), "CCS010")
    assert f.entry in ("provider TaoToken Codex (codex)", "provider Other (codex)")
    assert "api.other.example" in f.message and "taotoken.net" in f.message and fingerprint(K_CODEX) in f.message


def test_one_key_for_two_providers_on_the_same_gateway_is_fine(world: World) -> None:
    world.entries.append(Entry("codex", "x-tt2", "TaoToken Codex 2", codex_copy()))
    world.write_store()
    assert world.lint() == []
