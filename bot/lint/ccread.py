"""Reading CC Switch, read-only: its store (cc-switch.db, else config.json), its settings.json, the live files."""

from __future__ import annotations

import contextlib
import json
import sqlite3
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import quote

from bot.errors import InputError
from bot.lint.ccmodel import CLIENTS, Client, LiveFile, Provider, Snapshot, Store
from bot.lint.locate import json_key_lines
from bot.lint.paths import SourceFile
from bot.text.safe import one_line

# v3.8+ keeps providers in SQLite and migrates config.json into it; when both exist the database wins.
DB_NAME, JSON_NAME, LOCAL_SETTINGS = "cc-switch.db", "config.json", "settings.json"


def default_dir() -> Path:
    return Path.home() / ".cc-switch"


def _read_text(path: Path) -> str | None:
    """The file's text, None when it does not exist; any other failure is bad input."""
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else "not UTF-8 text"
        raise InputError(f"{path} cannot be read: {why}") from exc


def _json_file(path: Path, text: str) -> dict[str, Any]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{path} is not valid JSON: {exc.msg} (line {exc.lineno})") from exc
    if not isinstance(data, dict):
        raise InputError(f"{path} is not a JSON object")
    return data


def _object(raw: Any) -> Any:
    """A JSON text column parsed (left as text when it is not JSON: the entry's rules say so)."""
    if not isinstance(raw, str):
        return raw
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        return raw


def _db_providers(db: Path) -> tuple[list[Provider], dict[str, str | None]]:
    """Providers of the `providers` table (primary key id, app_type), opened read-only, and `is_current`."""
    uri = "file:" + quote(str(db.resolve())) + "?mode=ro"
    try:
        with contextlib.closing(sqlite3.connect(uri, uri=True)) as conn:
            conn.row_factory = sqlite3.Row
            rows = conn.execute("SELECT * FROM providers WHERE app_type IN ('claude', 'codex')").fetchall()
    except sqlite3.Error as exc:
        raise InputError(f"{db} cannot be read as CC Switch's database: {one_line(exc)}") from exc
    providers: list[Provider] = []
    current: dict[str, str | None] = {}
    for row in rows:
        columns = row.keys()
        if missing := [c for c in ("id", "app_type", "name", "settings_config") if c not in columns]:
            raise InputError(f"{db}: the providers table has no {', '.join(missing)} column; not CC Switch's")
        client: Client = "claude" if row["app_type"] == "claude" else "codex"
        meta = _object(row["meta"]) if "meta" in columns else {}
        providers.append(
            Provider(
                client=client,
                id=str(row["id"]),
                name=str(row["name"]),
                settings=_object(row["settings_config"]),
                meta=meta if isinstance(meta, dict) else {},
                category=row["category"] if "category" in columns else None,
            )
        )
        if "is_current" in columns and row["is_current"]:
            current[client] = str(row["id"])
    return providers, current


def _json_providers(path: Path, text: str) -> tuple[list[Provider], dict[str, str | None]]:
    """Providers of config.json v2 (`{"version": 2, "claude": {"providers": {...}, "current": id}, ...}`)."""
    data = _json_file(path, text)
    if isinstance(data.get("providers"), dict) and not any(c in data for c in CLIENTS):
        raise InputError(f"{path} is CC Switch's v1 config; open it once with CC Switch 3.2 or later to migrate it")
    lines = json_key_lines(text)
    providers: list[Provider] = []
    current: dict[str, str | None] = {}
    for client in CLIENTS:
        manager = data.get(client)
        if not isinstance(manager, dict):
            continue
        entries = manager.get("providers")
        if not isinstance(entries, dict):
            raise InputError(f"{path}: {client}.providers is not an object")
        for pid, entry in entries.items():
            entry = entry if isinstance(entry, dict) else {}
            meta = entry.get("meta")
            providers.append(
                Provider(
                    client=client,
                    id=pid,
                    name=str(entry.get("name") or pid),
                    settings=entry.get("settingsConfig"),
                    meta=meta if isinstance(meta, dict) else {},
                    category=entry.get("category") if isinstance(entry.get("category"), str) else None,
                    line=lines.get((client, "providers", pid), 1),
                )
            )
        if isinstance(manager.get("current"), str):
            current[client] = manager["current"]
    return providers, current


def read_store(folder: Path, local: Mapping[str, Any]) -> Store:
    """The store in `folder`; the current provider of each client as CC Switch picks it.

    `currentProviderClaude`/`currentProviderCodex` of settings.json win when they name a stored provider,
    else the store's own mark (`is_current`, or `current` in config.json).
    """
    db, js = folder / DB_NAME, folder / JSON_NAME
    if folder.is_file():
        raise InputError(f"{folder} is a file; --cc-switch takes CC Switch's folder (default ~/.cc-switch)")
    if not folder.is_dir():
        raise InputError(f"no CC Switch store at {folder}: the folder does not exist")
    if db.is_file():
        providers, marked = _db_providers(db)
        path, has_lines = db, False
    elif (text := _read_text(js)) is not None:
        providers, marked = _json_providers(js, text)
        path, has_lines = js, True
    else:
        raise InputError(f"no CC Switch store in {folder}: neither {DB_NAME} (v3.8+) nor {JSON_NAME} (v3.2–3.7)")
    current: dict[str, str | None] = {}
    for client in CLIENTS:
        local_id = local.get(f"currentProvider{client.capitalize()}")
        ids = {p.id for p in providers if p.client == client}
        current[client] = local_id if local_id in ids else marked.get(client)
    providers.sort(key=lambda p: (p.client, p.line or 0, p.name, p.id))
    return Store(str(path), tuple(providers), current, has_lines)


def _override(raw: Any) -> Path | None:
    """A live-file folder CC Switch was told to use (claudeConfigDir, codexConfigDir), `~` expanded."""
    return Path(raw.strip()).expanduser() if isinstance(raw, str) and raw.strip() else None


def read_snapshot(
    folder: Path | None = None,
    claude_settings: Path | None = None,
    codex_config: Path | None = None,
    codex_auth: Path | None = None,
) -> Snapshot:
    """The store and the live files: each path as given, else where CC Switch writes it."""
    folder = (folder or default_dir()).expanduser()
    local_text = _read_text(folder / LOCAL_SETTINGS) if folder.is_dir() else None
    local = _json_file(folder / LOCAL_SETTINGS, local_text) if local_text is not None else {}
    store = read_store(folder, local)
    claude_dir = _override(local.get("claudeConfigDir")) or Path.home() / ".claude"
    codex_dir = _override(local.get("codexConfigDir")) or Path.home() / ".codex"
    if claude_settings is None:
        legacy = claude_dir / "claude.json"  # CC Switch keeps writing the old name where it exists
        use_legacy = not (claude_dir / "settings.json").exists() and legacy.is_file()
        claude_settings = legacy if use_legacy else claude_dir / "settings.json"
    claude_settings = claude_settings.expanduser()
    codex_config = (codex_config or codex_dir / "config.toml").expanduser()
    codex_auth = (codex_auth or codex_dir / "auth.json").expanduser()
    return Snapshot(
        store,
        LiveFile(str(claude_settings), _read_text(claude_settings)),
        LiveFile(str(codex_config), _read_text(codex_config)),
        LiveFile(str(codex_auth), _read_text(codex_auth)),
    )


def live_sources(snapshot: Snapshot) -> list[SourceFile]:
    """The live settings.json and config.toml that exist, for their own kind's rules (as files CC Switch writes)."""
    files = [(snapshot.claude_settings, "claude"), (snapshot.codex_config, "codex")]
    return [
        SourceFile(live.path, live.text, "claude" if kind == "claude" else "codex", managed=True)
        for live, kind in files
        if live.text is not None
    ]
