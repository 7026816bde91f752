"""The ledger: agent usage, reviews and verdicts in SQLite, with ordered migrations."""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime
from pathlib import Path

from pydantic import BaseModel

from bot.errors import InputError
from bot.report import Report

# Ordered; each runs once, inside a transaction, and is recorded in schema_migrations.
MIGRATIONS: list[tuple[int, str]] = [
    (
        1,
        """
        CREATE TABLE operator_agent_usage (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            task_id TEXT NOT NULL,
            model_name TEXT NOT NULL,
            prompt_tokens INTEGER NOT NULL,
            completion_tokens INTEGER NOT NULL,
            total_tokens INTEGER NOT NULL,
            created_at TEXT NOT NULL,
            request_id TEXT NOT NULL UNIQUE,
            domain TEXT NOT NULL,
            key_fingerprint TEXT NOT NULL,
            pr INTEGER,
            head_sha TEXT NOT NULL,
            status TEXT NOT NULL,
            status_code INTEGER,
            latency_ms REAL,
            usage_source TEXT NOT NULL
        );
        CREATE INDEX operator_agent_usage_domain ON operator_agent_usage (domain, created_at);
        CREATE TABLE reviews (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            created_at TEXT NOT NULL,
            base_sha TEXT NOT NULL,
            head_sha TEXT NOT NULL,
            pr INTEGER,
            verdict TEXT NOT NULL,
            report_json TEXT NOT NULL
        );
        CREATE INDEX reviews_head ON reviews (head_sha);
        CREATE TABLE acceptances (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            created_at TEXT NOT NULL,
            pr INTEGER NOT NULL,
            head_sha TEXT NOT NULL,
            login TEXT NOT NULL,
            role TEXT NOT NULL,
            kernels_json TEXT NOT NULL,
            override INTEGER NOT NULL,
            reason TEXT NOT NULL,
            comment_id INTEGER NOT NULL UNIQUE
        );
        CREATE INDEX acceptances_pr ON acceptances (pr, head_sha);
        CREATE TABLE verdicts (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            review_id INTEGER NOT NULL REFERENCES reviews (id),
            kernel TEXT NOT NULL,
            domain TEXT NOT NULL,
            changed INTEGER NOT NULL,
            verdict TEXT NOT NULL,
            reasons_json TEXT NOT NULL
        );
        """,
    ),
]


class UsageRow(BaseModel):
    task_id: str
    model_name: str
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    request_id: str
    domain: str
    key_fingerprint: str
    pr: int | None
    head_sha: str
    status: str
    status_code: int | None = None
    latency_ms: float | None = None
    usage_source: str = "reported"
    created_at: str = ""


class AcceptanceRow(BaseModel):
    """One `/accept` that was granted, bound to the head SHA it was given for."""

    pr: int
    head_sha: str
    login: str
    role: str
    kernels: list[str]
    override: bool = False
    reason: str = ""
    comment_id: int
    created_at: str = ""


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def sqlite_path(url: str) -> Path:
    if url.startswith("sqlite:///"):
        return Path(url.removeprefix("sqlite:///"))
    if "://" in url:
        raise InputError(f"OPGATE_DATABASE_URL {url.split('://')[0]}:// is not supported (use a SQLite path)")
    return Path(url)


def open_ledger(url: str) -> Ledger:
    """The ledger named by OPGATE_DATABASE_URL (a SQLite path or sqlite:///path)."""
    return Ledger(sqlite_path(url))


class Ledger:
    """One SQLite file; every write is its own transaction."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.db = sqlite3.connect(path, timeout=30, isolation_level=None)
        self.db.row_factory = sqlite3.Row
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA busy_timeout=30000")
        self.db.execute("PRAGMA foreign_keys=ON")
        self._migrate()

    def _migrate(self) -> None:
        self.db.execute("CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, applied_at TEXT)")
        done = {row[0] for row in self.db.execute("SELECT version FROM schema_migrations")}
        for version, sql in MIGRATIONS:
            if version in done:
                continue
            self.db.execute("BEGIN IMMEDIATE")
            try:
                for statement in filter(str.strip, sql.split(";")):
                    self.db.execute(statement)
                self.db.execute("INSERT INTO schema_migrations VALUES (?, ?)", (version, now()))
                self.db.execute("COMMIT")
            except BaseException:
                self.db.execute("ROLLBACK")
                raise

    def close(self) -> None:
        self.db.close()

    def record_usage(self, row: UsageRow) -> bool:
        """Insert one usage row; a repeated request id is ignored (returns False)."""
        data = row.model_dump()
        data["created_at"] = data["created_at"] or now()
        cols = ", ".join(data)
        marks = ", ".join(f":{c}" for c in data)
        cur = self.db.execute(
            f"INSERT INTO operator_agent_usage ({cols}) VALUES ({marks}) ON CONFLICT (request_id) DO NOTHING",
            data,
        )
        return cur.rowcount == 1

    def usage(self) -> list[UsageRow]:
        rows = self.db.execute("SELECT * FROM operator_agent_usage ORDER BY id").fetchall()
        return [UsageRow.model_validate({k: v for k, v in dict(r).items() if k != "id"}) for r in rows]

    def record_review(self, report: Report) -> int:
        self.db.execute("BEGIN IMMEDIATE")
        try:
            cur = self.db.execute(
                "INSERT INTO reviews (created_at, base_sha, head_sha, pr, verdict, report_json)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (now(), report.base_sha, report.head_sha, report.pr, report.verdict, report.to_json()),
            )
            review_id = int(cur.lastrowid or 0)
            for k in report.kernels:
                self.db.execute(
                    "INSERT INTO verdicts (review_id, kernel, domain, changed, verdict, reasons_json)"
                    " VALUES (?, ?, ?, ?, ?, ?)",
                    (review_id, k.name, k.domain, int(k.changed), k.verdict, json.dumps(k.reasons)),
                )
            self.db.execute("COMMIT")
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        return review_id

    def record_acceptance(self, row: AcceptanceRow) -> bool:
        """Insert one acceptance; the same comment id twice is ignored (returns False)."""
        cur = self.db.execute(
            "INSERT INTO acceptances (created_at, pr, head_sha, login, role, kernels_json, override, reason,"
            " comment_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (comment_id) DO NOTHING",
            (
                row.created_at or now(),
                row.pr,
                row.head_sha,
                row.login,
                row.role,
                json.dumps(row.kernels),
                int(row.override),
                row.reason,
                row.comment_id,
            ),
        )
        return cur.rowcount == 1

    def acceptances(self, pr: int) -> list[AcceptanceRow]:
        rows = self.db.execute("SELECT * FROM acceptances WHERE pr = ? ORDER BY id", (pr,)).fetchall()
        return [
            AcceptanceRow(
                pr=r["pr"],
                head_sha=r["head_sha"],
                login=r["login"],
                role=r["role"],
                kernels=json.loads(r["kernels_json"]),
                override=bool(r["override"]),
                reason=r["reason"],
                comment_id=r["comment_id"],
                created_at=r["created_at"],
            )
            for r in rows
        ]

    def latest_review(self, head_sha: str) -> Report | None:
        row = self.db.execute(
            "SELECT report_json FROM reviews WHERE head_sha = ? ORDER BY id DESC LIMIT 1", (head_sha,)
        ).fetchone()
        return Report.model_validate_json(row[0]) if row else None
