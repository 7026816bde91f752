"""`opgate lint --cc-switch`: CC Switch's store (SQLite and JSON, built here from its documented shapes), the
live client files and the keys, each sync failure the users meet reproduced; keys never printed."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from bot.cli import main
from bot.lint import Finding, fingerprint, format_text, lint_ccswitch, read_snapshot

# Keys as CC Switch stores them: in plain text. None may ever appear in any output.
K_CLAUDE = "sk-tt-claude-7Qm2vX9kR4pL8wN3zB6t"
K_CLAUDE_OLD = "sk-old-claude-2Hb7nK4xQ9mV3pT8wZ5r"
K_CODEX = "sk-tt-codex-5Rn8qW2mK7xB4vL9pZ3c"
K_OTHER = "sk-other-codex-9Lp3wX7nQ2mK8vB5tR4h"
GATEWAY = "https://taotoken.net/api"

CODEX_CONFIG = """model_provider = "taotoken"
model = "gpt-5-codex"

[model_providers.taotoken]
name = "TaoToken"
base_url = "https://taotoken.net/api/v1"
wire_api = "responses"
requires_openai_auth = true
"""
OTHER_CONFIG = (
    CODEX_CONFIG.replace("taotoken", "other")
    .replace("TaoToken", "Other")
    .replace("https://other.net/api/v1", "https://api.other.example/v1")
)


def claude_copy(base_url: str = GATEWAY, key: str = K_CLAUDE, model: str = "claude-sonnet-4-5") -> dict[str, Any]:
    return {"env": {"ANTHROPIC_BASE_URL": base_url, "ANTHROPIC_AUTH_TOKEN": key, "ANTHROPIC_MODEL": model}}


def codex_copy(key: str = K_CODEX, config: str = CODEX_CONFIG) -> dict[str, Any]:
    return {"auth": {"OPENAI_API_KEY": key}, "config": config}


@dataclass
class Entry:
    client: str
    id: str
    name: str
    settings: Any
    current: bool = False
    category: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass
class World:
    """A home folder with CC Switch's store (`kind` "db" or "json") and the live files a switch writes."""

    home: Path
    kind: str
    entries: list[Entry]
    local: dict[str, Any] = field(default_factory=dict)  # ~/.cc-switch/settings.json

    @property
    def store(self) -> Path:
        return self.home / ".cc-switch"

    @property
    def claude(self) -> Path:
        return self.home / ".claude" / "settings.json"

    @property
    def codex_config(self) -> Path:
        return self.home / ".codex" / "config.toml"

    @property
    def codex_auth(self) -> Path:
        return self.home / ".codex" / "auth.json"

    def entry(self, name: str) -> Entry:
        return next(e for e in self.entries if e.name == name)

    def write_store(self) -> None:
        self.store.mkdir(parents=True, exist_ok=True)
        if self.local:
            (self.store / "settings.json").write_text(json.dumps(self.local, indent=2))
        if self.kind == "db":
            write_db(self.store / "cc-switch.db", self.entries)
        else:
            write_config_json(self.store / "config.json", self.entries)

    def switch(self) -> None:
        """What a switch does: the current providers' copies overwrite the live files."""
        for e in self.entries:
            if not e.current:
                continue
            if e.client == "claude":
                write(self.claude, json.dumps(e.settings, indent=2))
            else:
                write(self.codex_auth, json.dumps(e.settings["auth"], indent=2))
                write(self.codex_config, e.settings["config"])

    def lint(self, env: dict[str, str] | None = None) -> list[Finding]:
        return lint_ccswitch(read_snapshot(self.store), env or {}, GATEWAY)


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def write_db(path: Path, entries: list[Entry]) -> None:
    """The v3.8+ `providers` table: primary key (id, app_type), settings_config and meta as JSON text."""
    path.unlink(missing_ok=True)
    with sqlite3.connect(path) as db:
        db.execute(
            "CREATE TABLE providers (id TEXT NOT NULL, app_type TEXT NOT NULL, name TEXT NOT NULL, "
            "settings_config TEXT NOT NULL, website_url TEXT, category TEXT, created_at INTEGER, sort_index INTEGER, "
            "notes TEXT, icon TEXT, icon_color TEXT, meta TEXT NOT NULL DEFAULT '{}', "
            "is_current BOOLEAN NOT NULL DEFAULT 0, in_failover_queue BOOLEAN NOT NULL DEFAULT 0, "
            "PRIMARY KEY (id, app_type))"
        )
        db.execute("INSERT INTO providers (id, app_type, name, settings_config) VALUES ('g1', 'gemini', 'G', '{}')")
        for e in entries:
            settings = e.settings if isinstance(e.settings, str) else json.dumps(e.settings)
            db.execute(
                "INSERT INTO providers (id, app_type, name, settings_config, category, meta, is_current) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                (e.id, e.client, e.name, settings, e.category, json.dumps(e.meta), int(e.current)),
            )
    db.close()


def write_config_json(path: Path, entries: list[Entry]) -> None:
    """The v3.2–3.7 `config.json`: `{"version": 2, "claude": {"providers": {id: Provider}, "current": id}, ...}`."""
    data: dict[str, Any] = {"version": 2, "mcp": {}}
    for client in ("claude", "codex", "gemini"):
        mine = [e for e in entries if e.client == client]
        data[client] = {
            "providers": {
                e.id: {"id": e.id, "name": e.name, "settingsConfig": e.settings, "category": e.category, "meta": e.meta}
                for e in mine
            },
            "current": next((e.id for e in mine if e.current), ""),
        }
    path.write_text(json.dumps(data, indent=2))


def default_entries() -> list[Entry]:
    return [
        Entry("claude", "c-tt", "TaoToken", claude_copy(), current=True),
        Entry("claude", "c-old", "Old Env", claude_copy("https://old-gw.example.com/api", K_CLAUDE_OLD)),
        Entry("claude", "c-off", "Claude Official", {"env": {}}, category="official"),
        Entry("codex", "x-tt", "TaoToken Codex", codex_copy(), current=True),
        Entry("codex", "x-other", "Other", codex_copy(K_OTHER, OTHER_CONFIG)),
    ]


@pytest.fixture(params=["db", "json"])
def world(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[World]:
    """An in-sync home in a tmp folder (HOME points there: no real home is read)."""
    monkeypatch.setenv("HOME", str(tmp_path))
    w = World(tmp_path, request.param, default_entries())
    w.write_store()
    w.switch()
    yield w


def rules(findings: list[Finding]) -> list[str]:
    return [f.rule for f in findings]


def one(findings: list[Finding], rule: str) -> Finding:
    hits = [f for f in findings if f.rule == rule]
    assert len(hits) == 1, f"expected one {rule}, got {[f.model_dump() for f in findings]}"
    return hits[0]


def opgate_lint(*args: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["lint", *args])
    out, err = capsys.readouterr()
    return code, out, err


# --- in sync ------------------------------------------------------------------------------------


def test_store_in_sync_with_the_live_files_is_clean(world: World, capsys: pytest.CaptureFixture[str]) -> None:
    assert world.lint() == []
    code, out, err = opgate_lint("--repo", str(world.home), "--cc-switch", capsys=capsys)
    assert (code, out, err.strip()) == (0, "", "opgate lint: 0 error(s), 0 warning(s), 0 info")


def test_database_wins_over_an_old_config_json(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """v3.8+ migrates config.json into cc-switch.db and reads only the database from then on."""
    monkeypatch.setenv("HOME", str(tmp_path))
    w = World(tmp_path, "db", default_entries())
    w.write_store()
    w.switch()
    stale = default_entries()
    stale[0].settings = claude_copy("https://old-gw.example.com/api")
    write_config_json(w.store / "config.json", stale)
    snapshot = read_snapshot(w.store)
    assert snapshot.store.path.endswith("cc-switch.db")
    assert w.lint() == []


def test_current_provider_of_settings_json_wins_over_the_stores_mark(world: World) -> None:
    """CC Switch reads currentProviderClaude of ~/.cc-switch/settings.json first, then is_current / current."""
    world.local = {"currentProviderClaude": "c-old", "currentProviderCodex": "gone"}
    world.write_store()
    assert rules(world.lint()) == ["CCS005", "CCS007"]  # the live file still holds TaoToken's copy
    world.entry("TaoToken").current, world.entry("Old Env").current = False, True
    world.switch()
    assert world.lint() == []  # "gone" names no provider: the store's mark for Codex stands


# --- the issue classes --------------------------------------------------------------------------


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


# --- missing and broken pieces ------------------------------------------------------------------


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


@pytest.mark.parametrize("damage", ["garbage database", "database without providers", "config.json not JSON"])
def test_corrupt_store_is_one_line_and_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], damage: str
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    db = tmp_path / ".cc-switch" / ("config.json" if "config.json" in damage else "cc-switch.db")
    db.parent.mkdir()
    if damage == "garbage database":
        db.write_bytes(b"this is not a database, it only has the name of one\n" * 20)
    elif damage == "database without providers":
        with sqlite3.connect(db) as conn:
            conn.execute("CREATE TABLE settings (key TEXT)")
        conn.close()
    else:
        db.write_text('{"version": 2, "claude": {"providers": {')
    code, out, err = opgate_lint("--repo", str(tmp_path), "--cc-switch", capsys=capsys)
    assert (code, out) == (2, "")
    assert err.count("\n") == 1 and err.startswith("opgate: error: ") and str(db) in err
    assert "Traceback" not in err


@pytest.mark.parametrize("layout", ["no folder", "empty folder"])
def test_missing_store_is_one_line_and_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], layout: str
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    if layout == "empty folder":
        (tmp_path / ".cc-switch").mkdir()
    code, out, err = opgate_lint("--repo", str(tmp_path), "--cc-switch", capsys=capsys)
    assert (code, out) == (2, "")
    assert err.count("\n") == 1 and "no CC Switch store" in err


def test_live_file_flags_need_cc_switch(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = opgate_lint("--repo", str(tmp_path), "--codex-auth", str(tmp_path / "a.json"), capsys=capsys)
    assert code == 2 and "--codex-auth needs --cc-switch" in err


def test_the_store_is_only_read(world: World, capsys: pytest.CaptureFixture[str]) -> None:
    def state() -> dict[str, str]:
        return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in world.store.iterdir()}

    before = state()
    write(world.claude, json.dumps(claude_copy(key=K_CLAUDE_OLD)))
    code, _, _ = opgate_lint("--repo", str(world.home), "--cc-switch", capsys=capsys)
    assert code == 1
    assert state() == before  # no byte changed, no journal or WAL file left behind


# --- output and exit codes ----------------------------------------------------------------------


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


def test_live_paths_follow_cc_switch_settings_and_flags(world: World, capsys: pytest.CaptureFixture[str]) -> None:
    """claudeConfigDir / codexConfigDir of CC Switch's settings.json move the live files; flags override both."""
    moved = world.home / "elsewhere"
    world.local = {"claudeConfigDir": str(moved / "claude"), "codexConfigDir": "~/elsewhere/codex"}
    world.write_store()
    snapshot = read_snapshot(world.store)
    assert snapshot.claude_settings.path == str(moved / "claude" / "settings.json")
    assert snapshot.codex_auth.path == str(moved / "codex" / "auth.json")
    assert rules(world.lint()) == ["CCS005", "CCS007", "CCS006"]  # nothing there yet
    code, _, err = opgate_lint(
        "--repo",
        str(world.home / "repo"),
        "--cc-switch",
        str(world.store),
        "--claude-settings",
        str(world.claude),
        "--codex-config",
        str(world.codex_config),
        "--codex-auth",
        str(world.codex_auth),
        capsys=capsys,
    )
    assert (code, err.strip()) == (0, "opgate lint: 0 error(s), 0 warning(s), 0 info")


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


def test_cc_switch_given_a_file_instead_of_its_folder(world: World, capsys: pytest.CaptureFixture[str]) -> None:
    store_file = world.store / ("cc-switch.db" if world.kind == "db" else "config.json")
    code, out, err = opgate_lint("--repo", str(world.home / "repo"), f"--cc-switch={store_file}", capsys=capsys)
    assert (code, out) == (2, "") and "is a file" in err and err.count("\n") == 1


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
