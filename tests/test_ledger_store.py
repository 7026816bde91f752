"""The ledger (bot/ledger/store.py) on SQLite and on a real PostgreSQL server: idempotent inserts, acceptances,
cache (the migrations are in test_ledger_schema.py, the connections in test_ledger_db.py)."""

from __future__ import annotations

import pytest

from bot.ledger import open_ledger
from bot.models.ledger import AcceptanceRow, CachedReply, UsageRow
from tests import ledger_world
from tests.pg import Cluster, pg_cluster, pg_url  # noqa: F401  (fixtures)

url = ledger_world.url  # the fixture


def _usage(request_id: str, **overrides: object) -> UsageRow:
    data: dict[str, object] = {
        "task_id": "t",
        "model_name": "m",
        "prompt_tokens": 10,
        "completion_tokens": 5,
        "total_tokens": 15,
        "request_id": request_id,
        "domain": "deepgemm",
        "key_fingerprint": "sha256:abc",
        "pr": 7,
        "head_sha": "h" * 40,
        "status": "ok",
    }
    data.update(overrides)
    return UsageRow.model_validate(data)


def test_a_repeated_request_id_is_not_counted_twice(url):
    with open_ledger(url) as ledger:
        assert ledger.record_usage(_usage("req-1")) is True
        assert ledger.record_usage(_usage("req-1", total_tokens=999)) is False
        assert [(r.request_id, r.total_tokens) for r in ledger.usage()] == [("req-1", 15)]


def test_usage_rows_keep_every_audit_field_and_filter_by_domain_and_time(url):
    with open_ledger(url) as ledger:
        ledger.record_usage(
            _usage(
                "a",
                call_id="c1",
                attempt=2,
                status="error",
                status_code=503,
                error_type="server_error",
                cached_tokens=4,
                reasoning_tokens=3,
                estimated_prompt_tokens=9,
                estimate_ratio=1.11,
                wire="anthropic",
                latency_ms=12.5,
                created_at="2026-03-02T10:00:00+00:00",
            )
        )
        ledger.record_usage(_usage("b", domain="flashmla", cached=True, created_at="2026-03-09T10:00:00+00:00"))
        (a,) = ledger.usage(domain="deepgemm")
        assert (a.call_id, a.attempt, a.status_code, a.error_type) == ("c1", 2, 503, "server_error")
        assert a.wire == "anthropic"
        assert (a.cached_tokens, a.reasoning_tokens, a.estimated_prompt_tokens) == (4, 3, 9)
        assert a.estimate_ratio == pytest.approx(1.11) and a.latency_ms == pytest.approx(12.5)
        assert [r.request_id for r in ledger.usage(since="2026-03-05")] == ["b"]
        assert ledger.usage(domain="flashmla")[0].cached is True
        assert ledger.estimate_ratios("deepgemm") == [pytest.approx(1.11)]


def test_acceptances_are_kept_per_pr_and_comment(url):
    with open_ledger(url) as ledger:
        row = AcceptanceRow(
            pr=7, head_sha="a" * 40, login="alice", role="maintain", kernels=["deepgemm_tile"], comment_id=3_000_000_001
        )
        assert ledger.record_acceptance(row) and not ledger.record_acceptance(row)
        got = [(a.login, a.kernels, a.head_sha, a.comment_id) for a in ledger.acceptances(7)]
        assert got == [("alice", ["deepgemm_tile"], "a" * 40, 3_000_000_001)]
        assert ledger.acceptances(8) == []


def test_a_cached_reply_is_stored_once_and_read_back(url):
    reply = CachedReply(
        cache_key="k1", model="m", wire="openai", content="{}", prompt_tokens=3, completion_tokens=2, created_at="t"
    )
    with open_ledger(url) as ledger:
        assert ledger.cached_reply("k1") is None
        ledger.store_reply(reply)
        ledger.store_reply(reply.model_copy(update={"content": "other"}))
        assert ledger.cached_reply("k1") == reply


def test_the_first_base_measurement_under_a_key_is_the_reference(url):
    from bot.models.ledger import BaselineRow

    first = BaselineRow(
        cache_key="b1",
        base_sha="a" * 40,
        kernel="k",
        case_name="c",
        device_name="EPYC",
        p50_ms=8.0,
        samples=40,
        created_at="2026-11-30T00:00:00+00:00",
    )
    with open_ledger(url) as ledger:
        assert ledger.baseline("b1") is None
        ledger.record_baseline(first)
        ledger.record_baseline(first.model_copy(update={"p50_ms": 9.0, "created_at": "2026-11-30T01:00:00+00:00"}))
        assert ledger.baseline("b1") == first
        assert ledger.baseline("other") is None


def test_a_failed_transaction_leaves_nothing_behind(url):
    with open_ledger(url) as ledger:
        with pytest.raises(RuntimeError), ledger.db.transaction() as tx:
            tx.execute("INSERT INTO agent_budgets (domain, week, limit_tokens, updated_at) VALUES ('d', 'w', 1, 't')")
            raise RuntimeError("boom")
        assert ledger.db.rows("SELECT * FROM agent_budgets") == []


def test_the_postgresql_cluster_fixture_serves_databases(pg_cluster: Cluster):  # noqa: F811
    assert pg_cluster.create_database().startswith("postgresql://postgres@127.0.0.1:")


def test_a_review_and_its_verdicts_round_trip(url):
    from bot.models.agent_report import AgentReport
    from bot.models.report import KernelReport, Machine, Report

    report = Report(
        base_sha="b" * 40,
        head_sha="c" * 40,
        pr=5,
        verdict="fail",
        kernels=[KernelReport(name="deepgemm_tile", domain="deepgemm", changed=True, verdict="fail", reasons=["x"])],
        agent=AgentReport(status="offline"),
        environment=Machine(device="cpu", python="3.11"),
        created_at="2026-03-02T10:00:00+00:00",
        opgate_version="0.1.0",
    )
    with open_ledger(url) as ledger:
        first, second = ledger.record_review(report), ledger.record_review(report)
        assert second > first > 0
        assert ledger.latest_review("c" * 40) == report and ledger.latest_review("d" * 40) is None
        verdicts = ledger.verdicts()
        assert [(v.review_id, v.kernel, v.verdict, v.changed) for v in verdicts] == [
            (first, "deepgemm_tile", "fail", True),
            (second, "deepgemm_tile", "fail", True),
        ]
        assert ledger.verdicts(since="2999-01-01") == []
