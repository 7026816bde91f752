"""Reading CC Switch (bot/lint/ccread.py): the database over an old config.json, the current provider settings.json
names, a corrupt or missing store as one line and exit 2, the store only read, the live paths CC Switch's settings
and the flags give."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path

import pytest

from bot.lint import read_snapshot
from tests import ccswitch_world
from tests.ccswitch_world import (
    K_CLAUDE_OLD,
    World,
    claude_copy,
    default_entries,
    opgate_lint,
    rules,
    write,
    write_config_json,
)

world = ccswitch_world.world  # the fixture: each test on both store formats


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


def test_the_store_is_only_read(world: World, capsys: pytest.CaptureFixture[str]) -> None:
    def state() -> dict[str, str]:
        return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in world.store.iterdir()}

    before = state()
    write(world.claude, json.dumps(claude_copy(key=K_CLAUDE_OLD)))
    code, _, _ = opgate_lint("--repo", str(world.home), "--cc-switch", capsys=capsys)
    assert code == 1
    assert state() == before  # no byte changed, no journal or WAL file left behind


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


def test_cc_switch_given_a_file_instead_of_its_folder(world: World, capsys: pytest.CaptureFixture[str]) -> None:
    store_file = world.store / ("cc-switch.db" if world.kind == "db" else "config.json")
    code, out, err = opgate_lint("--repo", str(world.home / "repo"), f"--cc-switch={store_file}", capsys=capsys)
    assert (code, out) == (2, "") and "is a file" in err and err.count("\n") == 1
