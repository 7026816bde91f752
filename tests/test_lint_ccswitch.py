"""`opgate lint --cc-switch` (bot/lint/ccswitch.py): the entries' own rules (CCS002-CCS004, their base URLs), the CLI's
flags and JSON output, and keys never printed. Reading the store is tested in tests/test_lint_ccread.py, the sync
rules in tests/test_lint_ccsync.py."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from bot.lint import format_text
from tests import ccswitch_world
from tests.ccswitch_world import (
    CODEX_CONFIG,
    GATEWAY,
    K_OTHER,
    OTHER_CONFIG,
    Entry,
    World,
    claude_copy,
    codex_copy,
    one,
    opgate_lint,
    rules,
    write,
)

world = ccswitch_world.world  # the fixture: each test on both store formats


def test_store_in_sync_with_the_live_files_is_clean(world: World, capsys: pytest.CaptureFixture[str]) -> None:
    assert world.lint() == []
    code, out, err = opgate_lint("--repo", str(world.home), "--cc-switch", capsys=capsys)
    assert (code, out, err.strip()) == (0, "", "opgate lint: 0 error(s), 0 warning(s), 0 info")


def test_anthropic_variables_in_the_codex_entry(world: World) -> None:
    x = world.entry("TaoToken Codex")
    x.settings["config"] += 'env_key = "ANTHROPIC_AUTH_TOKEN"\n'
    x.settings["auth"]["ANTHROPIC_BASE_URL"] = GATEWAY
    world.write_store()
    world.switch()
    findings = world.lint()
    stored = one(findings, "CODEX004")
    assert stored.entry == "provider TaoToken Codex (codex) config.toml:9" and stored.path.endswith(
        "cc-switch.db" if world.kind == "db" else "config.json"
    )
    assert {(f.rule, f.path) for f in findings if f.rule == "CCS004"} == {
        ("CCS004", stored.path),
        ("CCS004", str(world.codex_auth)),
    }


def test_utm_in_a_stored_base_url(world: World) -> None:
    world.entry("TaoToken").settings["env"]["ANTHROPIC_BASE_URL"] = GATEWAY + "?utm_source=guide"
    world.write_store()
    f = one(world.lint(), "URL001")
    assert f.entry == "provider TaoToken (claude)" and "utm_source" in f.message
    if world.kind == "db":
        assert f.line is None
        assert format_text([f]).startswith(f"{world.store / 'cc-switch.db'}: provider TaoToken (claude): URL001 ")
    else:
        text = (world.store / "config.json").read_text()
        line = text.splitlines().index('      "c-tt": {') + 1  # the entry's line in config.json
        assert f.line == line
        assert format_text([f]).startswith(f"{world.store / 'config.json'}:{line}: provider TaoToken (claude): URL001 ")


def test_taotoken_provider_pointing_at_an_old_environment(world: World) -> None:
    world.entry("Old Env").name = "TaoToken staging"
    world.write_store()
    f = one(world.lint(), "CCS003")
    assert f.entry == "provider TaoToken staging (claude)" and "old-gw.example.com" in f.message
    assert "https://taotoken.net/api" in f.message


def test_entry_that_is_not_what_cc_switch_writes(world: World) -> None:
    world.entry("Other").settings = {"auth": {"OPENAI_API_KEY": K_OTHER}}  # no config
    world.entry("Old Env").settings = "not json at all" if world.kind == "db" else ["a", "list"]
    world.write_store()
    findings = world.lint()
    assert rules(findings) == ["CCS002", "CCS002"]
    assert {f.entry for f in findings} == {"provider Other (codex)", "provider Old Env (claude)"}


def test_live_auth_json_not_json(world: World) -> None:
    write(world.codex_auth, '{"OPENAI_API_KEY": ')
    f = one(world.lint(), "CCS002")
    assert f.path == str(world.codex_auth)


def test_live_file_flags_need_cc_switch(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = opgate_lint("--repo", str(tmp_path), "--codex-auth", str(tmp_path / "a.json"), capsys=capsys)
    assert code == 2 and "--codex-auth needs --cc-switch" in err


def test_json_output_names_the_entry_and_has_no_line_for_a_database_row(
    world: World, capsys: pytest.CaptureFixture[str]
) -> None:
    world.entry("TaoToken").settings["env"]["ANTHROPIC_BASE_URL"] = GATEWAY + "?utm_source=guide"
    world.write_store()
    code, out, _ = opgate_lint("--repo", str(world.home / "repo"), "--format", "json", "--cc-switch", capsys=capsys)
    body = json.loads(out)
    assert code == 1 and body["counts"] == {"error": 2, "warning": 0, "info": 0}
    stored, live = body["findings"]  # the entry, then the live file that no longer matches it
    assert (stored["rule"], stored["entry"]) == ("URL001", "provider TaoToken (claude)")
    assert (stored["line"] is None) == (world.kind == "db")
    assert (live["rule"], live["path"], live["line"], live["entry"]) == ("CCS005", str(world.claude), 3, None)


def test_guides_codex_base_url_warns_without_failing_unless_strict(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The users' guide writes base_url = ".../api"; Codex then requests /api/responses: a warning, exit 0."""
    config = tmp_path / ".codex" / "config.toml"
    write(config, CODEX_CONFIG.replace("/api/v1", "/api").replace("requires_openai_auth = true", 'env_key = "X_KEY"'))
    code, out, _ = opgate_lint(str(config), capsys=capsys)
    assert code == 0 and " URL006 " in out
    assert "Codex will request https://taotoken.net/api/responses" in out
    assert "works only if the gateway serves /api/responses" in out
    code, _, _ = opgate_lint(str(config), "--strict", capsys=capsys)
    assert code == 1


def test_canary_keys_never_appear_in_any_output(
    world: World, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Canaries in every store entry and live file (many findings about them): text, JSON and stderr stay clean."""
    canaries = [f"sk-canary{n}-{hashlib.sha256(str(n).encode()).hexdigest()[:24]}" for n in range(8)]
    bearer = f'experimental_bearer_token = "{canaries[3]}"\n'
    world.entries = [
        Entry("claude", "c-tt", "TaoToken", claude_copy(key=canaries[0]), current=True),
        Entry("claude", "c-2", "TaoToken 2", claude_copy(GATEWAY + "?k=" + canaries[1], canaries[1])),
        Entry("codex", "x-tt", "TaoToken Codex", codex_copy(canaries[0]), current=True),
        Entry("codex", "x-2", "Other", codex_copy(canaries[2], OTHER_CONFIG + bearer)),
    ]
    world.write_store()
    write(world.claude, json.dumps(claude_copy(key=canaries[4]) | {"apiKey": canaries[5]}))
    write(world.codex_config, CODEX_CONFIG + f'experimental_bearer_token = "{canaries[6]}"\n')
    write(world.codex_auth, json.dumps({"OPENAI_API_KEY": canaries[7], "ANTHROPIC_AUTH_TOKEN": canaries[7]}))
    env = {"TAOTOKEN_API_KEY_DEEPGEMM_AGENT": canaries[2], "TAOTOKEN_CODEX_API_KEY": canaries[3]}
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    runs = [
        opgate_lint("--repo", str(world.home), "--cc-switch", capsys=capsys),
        opgate_lint("--repo", str(world.home), "--format", "json", "--cc-switch", capsys=capsys),
    ]
    findings = world.lint(env)
    reported = {f["rule"] for f in json.loads(runs[1][1])["findings"]}
    assert {"CCS004", "CCS007", "CCS008", "CCS009", "URL001", "CLAUDE002"} <= reported
    output = "".join(out + err for _, out, err in runs) + format_text(findings) + repr(findings)
    for key in canaries:
        for i in range(3, len(key) - 8):
            assert key[i : i + 8] not in output, f"a fragment of a key leaked: {key[i : i + 8]!r}"
