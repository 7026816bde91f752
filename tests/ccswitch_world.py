"""A CC Switch world for the lint tests: its store (SQLite and JSON, built from CC Switch's documented shapes), the
live client files and the keys; the `world` fixture gives each test both store formats."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from bot.cli import main
from bot.lint import LintFinding, lint_ccswitch, read_snapshot

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

    def lint(self, env: dict[str, str] | None = None) -> list[LintFinding]:
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


def rules(findings: list[LintFinding]) -> list[str]:
    return [f.rule for f in findings]


def one(findings: list[LintFinding], rule: str) -> LintFinding:
    hits = [f for f in findings if f.rule == rule]
    assert len(hits) == 1, f"expected one {rule}, got {[f.model_dump() for f in findings]}"
    return hits[0]


def opgate_lint(*args: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["lint", *args])
    out, err = capsys.readouterr()
    return code, out, err
