"""The SQLite ledger: migrations, idempotent inserts, acceptances bound to a SHA."""

from __future__ import annotations

import sqlite3

from bot.ledger import AcceptanceRow, Ledger, UsageRow


def _usage(request_id: str) -> UsageRow:
    return UsageRow(
        task_id="t",
        model_name="m",
        prompt_tokens=10,
        completion_tokens=5,
        total_tokens=15,
        request_id=request_id,
        domain="deepgemm",
        key_fingerprint="sha256:abc",
        pr=7,
        head_sha="h" * 40,
        status="ok",
    )


def test_migrations_run_once_and_the_users_columns_exist(tmp_path):
    path = tmp_path / "l.sqlite"
    Ledger(path).close()
    Ledger(path).close()  # reopening does not migrate twice
    db = sqlite3.connect(path)
    assert db.execute("SELECT COUNT(*) FROM schema_migrations").fetchone()[0] == 1
    cols = {r[1] for r in db.execute("PRAGMA table_info(operator_agent_usage)")}
    assert {"task_id", "model_name", "prompt_tokens", "completion_tokens", "total_tokens", "created_at"} <= cols
    assert {"request_id", "domain", "key_fingerprint"} <= cols
    db.close()


def test_a_repeated_request_id_is_not_counted_twice(tmp_path):
    ledger = Ledger(tmp_path / "l.sqlite")
    assert ledger.record_usage(_usage("req-1")) is True
    assert ledger.record_usage(_usage("req-1")) is False
    assert [r.request_id for r in ledger.usage()] == ["req-1"]
    ledger.close()


def test_acceptances_are_kept_per_pr_and_comment(tmp_path):
    ledger = Ledger(tmp_path / "l.sqlite")
    row = AcceptanceRow(
        pr=7, head_sha="a" * 40, login="alice", role="maintain", kernels=["deepgemm_tile"], comment_id=99
    )
    assert ledger.record_acceptance(row) and not ledger.record_acceptance(row)
    assert [(a.login, a.kernels, a.head_sha) for a in ledger.acceptances(7)] == [("alice", ["deepgemm_tile"], "a" * 40)]
    assert ledger.acceptances(8) == []
    ledger.close()
