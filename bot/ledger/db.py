"""One small database interface over SQLite (sqlite3) and PostgreSQL (psycopg 3), with migrations."""

from __future__ import annotations

import contextlib
import logging
import sqlite3
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from bot.errors import InputError, ServiceError
from bot.text.redact import redact

log = logging.getLogger(__name__)

Dialect = Literal["sqlite", "postgresql"]
Params = Sequence[Any]

# Column types that differ between the two dialects; migrations are written with these names.
TYPES: dict[Dialect, dict[str, str]] = {
    "sqlite": {"pk": "INTEGER PRIMARY KEY AUTOINCREMENT", "real": "REAL", "bigint": "INTEGER"},
    "postgresql": {"pk": "BIGSERIAL PRIMARY KEY", "real": "DOUBLE PRECISION", "bigint": "BIGINT"},
}
PG_MIGRATION_LOCK = 72_617_001  # pg_advisory_xact_lock key: one migrator at a time


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def redact_url(url: str) -> str:
    """A database URL safe to print: the password (if any) replaced."""
    head, sep, tail = url.rpartition("@")
    if not sep or "://" not in head:
        return url
    scheme, _, userinfo = head.partition("://")
    user = userinfo.split(":", 1)[0]
    return f"{scheme}://{user}:***@{tail}" if ":" in userinfo else url


def _redacted(params: Params) -> tuple[Any, ...]:
    """Every text the ledger stores or looks up, through the one output redactor (a key a gateway echoed into a
    model name or an error never reaches a row; a lookup masks alike, so it still finds the row)."""
    return tuple(redact(p) if isinstance(p, str) else p for p in params)


class Database:
    """A connection in autocommit mode; `transaction()` opens an explicit one.

    SQL is written once with `?` placeholders and `{pk}`-style type names; rows come back as dicts.
    """

    def __init__(self, dialect: Dialect, conn: Any, where: str) -> None:
        self.dialect = dialect
        self.conn = conn
        self.where = where
        self._depth = 0

    # -- opening ------------------------------------------------------------------------------

    @classmethod
    def open(cls, url: str, *, create: bool = False) -> Database:
        """Open the ledger at `url`; a SQLite file's folder must exist unless `create` (then it is made)."""
        if url.startswith(("postgresql://", "postgres://")):
            return cls._open_postgres(url)
        return cls._open_sqlite(sqlite_path(url), create)

    @classmethod
    def _open_sqlite(cls, path: Path, create: bool = False) -> Database:
        if create:
            path.parent.mkdir(parents=True, exist_ok=True)
        elif not path.parent.is_dir():
            raise InputError(
                f"ledger {path}: its folder {path.parent} does not exist; fix OPGATE_DATABASE_URL (or the "
                "configuration's ledger), create the folder, or pass --create-ledger"
            )
        conn = sqlite3.connect(path, timeout=60, isolation_level=None)
        conn.row_factory = sqlite3.Row
        conn.execute("PRAGMA busy_timeout=60000")
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA foreign_keys=ON")
        return cls("sqlite", conn, str(path))

    @classmethod
    def _open_postgres(cls, url: str) -> Database:
        try:
            import psycopg
            from psycopg.rows import dict_row
        except ImportError as exc:  # pragma: no cover - psycopg is a dependency
            raise InputError("OPGATE_DATABASE_URL is PostgreSQL but psycopg is not installed") from exc
        try:
            conn = psycopg.connect(url, autocommit=True, row_factory=dict_row, connect_timeout=15)
        except psycopg.Error as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise ServiceError(f"cannot connect to the ledger {redact_url(url)}: {first}") from exc
        conn.execute("SET lock_timeout = '60s'")
        return cls("postgresql", conn, redact_url(url))

    def close(self) -> None:
        self.conn.close()

    # -- statements ---------------------------------------------------------------------------

    def sql(self, text: str) -> str:
        """Dialect-specific SQL: type names filled in, `?` placeholders for psycopg."""
        text = text.format(**TYPES[self.dialect])
        return text.replace("?", "%s") if self.dialect == "postgresql" else text

    def execute(self, text: str, params: Params = ()) -> int:
        """Run one statement; returns the number of rows it changed."""
        cur = self.conn.execute(self.sql(text), _redacted(params))
        return int(cur.rowcount or 0)

    def rows(self, text: str, params: Params = ()) -> list[dict[str, Any]]:
        cur = self.conn.execute(self.sql(text), _redacted(params))
        return [dict(r) for r in cur.fetchall()]

    def one(self, text: str, params: Params = ()) -> dict[str, Any] | None:
        found = self.rows(text, params)
        return found[0] if found else None

    @contextlib.contextmanager
    def transaction(self) -> Iterator[Database]:
        """One write transaction. SQLite takes the write lock at once (`BEGIN IMMEDIATE`), so two
        writers serialise instead of failing on upgrade; PostgreSQL locks rows as statements ask."""
        if self._depth:
            raise RuntimeError("nested ledger transaction")
        self._depth += 1
        try:
            if self.dialect == "sqlite":
                self.conn.execute("BEGIN IMMEDIATE")
                try:
                    yield self
                except BaseException:
                    self.conn.execute("ROLLBACK")
                    raise
                self.conn.execute("COMMIT")
            else:
                with self.conn.transaction():
                    yield self
        finally:
            self._depth -= 1

    # -- migrations ---------------------------------------------------------------------------

    def migrate(self, migrations: list[tuple[int, str]]) -> list[int]:
        """Apply the migrations not yet recorded, in order, each in its own transaction."""
        with self.transaction():  # concurrent CREATE … IF NOT EXISTS can still collide on PostgreSQL
            self._lock_migrations()
            self.execute("CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, applied_at TEXT)")
        done = {int(r["version"]) for r in self.rows("SELECT version FROM schema_migrations")}
        applied: list[int] = []
        for version, script in migrations:
            if version in done:
                continue
            with self.transaction():
                self._lock_migrations()
                if self.one("SELECT version FROM schema_migrations WHERE version = ?", (version,)):
                    continue
                for statement in filter(str.strip, script.split(";")):
                    self.execute(statement)
                self.execute("INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)", (version, now()))
                applied.append(version)
                log.debug("ledger %s: migration %s applied", self.where, version)
        return applied

    def _lock_migrations(self) -> None:
        """One migrator at a time: SQLite's BEGIN IMMEDIATE already is; PostgreSQL takes an advisory lock."""
        if self.dialect == "postgresql":
            self.execute(f"SELECT pg_advisory_xact_lock({PG_MIGRATION_LOCK})")


def sqlite_path(url: str) -> Path:
    """The SQLite file named by OPGATE_DATABASE_URL (a plain path or sqlite:///path)."""
    if url.startswith("sqlite:///"):
        return Path(url.removeprefix("sqlite:///"))
    if "://" in url:
        scheme = url.split("://")[0]
        raise InputError(
            f"OPGATE_DATABASE_URL {scheme}:// is not supported (use a SQLite path, sqlite:///path or postgresql://…)"
        )
    return Path(url)
