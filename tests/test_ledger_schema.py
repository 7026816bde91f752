"""The ledger's migrations (bot/ledger/schema.py): each runs once, in order; an old SQLite ledger is upgraded."""

from __future__ import annotations

import sqlite3

from bot.ledger import MIGRATIONS, Ledger, open_ledger
from bot.ledger.db import TYPES
from tests import ledger_world
from tests.pg import Cluster, pg_cluster, pg_url  # noqa: F401  (fixtures)

url = ledger_world.url  # the fixture


USERS_COLUMNS = {"task_id", "model_name", "prompt_tokens", "completion_tokens", "total_tokens", "created_at"}


AUDIT_COLUMNS = {
    "request_id",
    "call_id",
    "attempt",
    "domain",
    "key_fingerprint",
    "pr",
    "head_sha",
    "status_code",
    "error_type",
    "latency_ms",
    "cached",
    "cached_tokens",
    "reasoning_tokens",
    "usage_source",
    "estimated_prompt_tokens",
    "estimate_ratio",
}


def _columns(ledger: Ledger) -> set[str]:
    if ledger.dialect == "sqlite":
        return {r["name"] for r in ledger.db.rows("PRAGMA table_info(operator_agent_usage)")}
    rows = ledger.db.rows(
        "SELECT column_name FROM information_schema.columns WHERE table_name = 'operator_agent_usage'"
    )
    return {r["column_name"] for r in rows}


def test_migrations_run_once_in_order_and_every_column_exists(url):
    open_ledger(url).close()
    with open_ledger(url) as ledger:  # reopening does not migrate twice
        versions = [r["version"] for r in ledger.db.rows("SELECT version FROM schema_migrations ORDER BY version")]
        assert versions == [v for v, _ in MIGRATIONS]
        assert _columns(ledger) >= USERS_COLUMNS | AUDIT_COLUMNS


def test_a_sqlite_ledger_from_before_migration_2_is_upgraded_in_place(tmp_path):
    path = tmp_path / "old.sqlite"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, applied_at TEXT)")
    for statement in filter(str.strip, MIGRATIONS[0][1].format(**TYPES["sqlite"]).split(";")):
        db.execute(statement)
    db.execute("INSERT INTO schema_migrations VALUES (1, 'then')")
    db.execute(
        "INSERT INTO operator_agent_usage (task_id, model_name, prompt_tokens, completion_tokens, total_tokens,"
        " created_at, request_id, domain, key_fingerprint, pr, head_sha, status, usage_source)"
        " VALUES ('t', 'm', 1, 2, 3, '2026-01-01T00:00:00+00:00', 'old-1', 'deepgemm', 'sha256:x', NULL, 'h', 'ok',"
        " 'reported')"
    )
    db.commit()
    db.close()
    with Ledger(path) as ledger:
        (row,) = ledger.usage()
        assert (row.request_id, row.attempt, row.cached, row.total_tokens) == ("old-1", 1, False, 3)
