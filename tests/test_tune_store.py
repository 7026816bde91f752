"""Tuning in the ledger (bot/tune/store.py, migration 5) on SQLite and PostgreSQL: runs resume, trials are stored
once, tokens add up, and the weekly summary shows tuning spend apart from review spend."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from bot.commands.summary import render_token_summary
from bot.ledger import open_ledger
from bot.models.agent_report import ExpectationCheck
from bot.models.finding import Phrase
from bot.models.ledger import ExpectationRow, UsageRow
from bot.models.report import CaseReport, KernelReport
from bot.spend import tokens
from bot.tune.model import CaseResult, RoundEvent, Stop, Trial
from bot.tune.result import render_tune
from bot.tune.store import TuningStore
from bot.verdict.expectations import check_kernel
from tests.pg import pg_cluster, pg_url  # noqa: F401  (fixtures)
from tests.test_tune_github import outcome

BASE = "b2" * 20


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "l.sqlite")
    return str(request.getfixturevalue("pg_url"))


def open_run(store: TuningStore, strategy: str = "agent", rounds: int = 6):
    return store.open_run(
        kernel="deepgemm_tile", domain="deepgemm", base_sha=BASE, device_name="cpu", strategy=strategy,
        max_rounds=rounds, token_limit=20_000,
    )  # fmt: skip


def judged(key: str, run_id: str) -> Trial:
    return Trial(
        key=key, config={"tile_n": 256}, source="agent", status="judged", verdict="pass", run_id=run_id,
        cases=[CaseResult(name="square_512", verdict="pass", regression_pct=-4.0, ci95_pct=(-5.0, -3.0), p50_ms=0.9,
                          base_p50_ms=0.94)],
    )  # fmt: skip


def usage(request_id: str, total: int, purpose: str = "review", run: str | None = None, when: str = "") -> UsageRow:
    return UsageRow(
        task_id="t", model_name="m", prompt_tokens=total - 100, completion_tokens=100, total_tokens=total,
        request_id=request_id, domain="deepgemm", key_fingerprint="sha256:x", pr=None, head_sha=BASE, status="ok",
        purpose=purpose, tuning_run=run, created_at=when,  # type: ignore[arg-type]
    )  # fmt: skip


def test_an_unfinished_run_is_resumed_and_a_finished_one_is_not(url: str) -> None:
    with open_ledger(url) as ledger:
        store = TuningStore(ledger)
        run, resumed = open_run(store)
        assert not resumed and run.state == "running"
        again, resumed = open_run(store, rounds=9)
        assert resumed and again.run_id == run.run_id and again.max_rounds == 9
        other, resumed = open_run(store, strategy="exhaustive")
        assert not resumed and other.run_id != run.run_id
        store.finish(run.run_id, Stop(kind="budget", detail="spent", handover=True), None)
        done = store.run(run.run_id)
        assert (
            done.state == "done"
            and done.handover
            and TuningStore.stop_of(done) == Stop(kind="budget", detail="spent", handover=True)
        )
        fresh, resumed = open_run(store)
        assert not resumed and fresh.run_id != run.run_id


def test_a_trial_is_stored_once_with_its_cases_and_its_round(url: str) -> None:
    with open_ledger(url) as ledger:
        store = TuningStore(ledger)
        run, _ = open_run(store)
        event = RoundEvent(seq=1, round=1, source="agent", outcome="judged", key="config:a", tokens=1555)
        stored = store.record(run.run_id, event, judged("config:a", run.run_id), kernel="deepgemm_tile",
                              base_sha=BASE, device_name="cpu")  # fmt: skip
        assert stored is not None and stored.id
        again = store.record(
            run.run_id, RoundEvent(seq=2, round=2, source="agent", outcome="repeat", key="config:a"),
            judged("config:a", "another-run").model_copy(update={"verdict": "fail"}),
            kernel="deepgemm_tile", base_sha=BASE, device_name="cpu",
        )  # fmt: skip
        assert again is not None and again.id == stored.id and again.verdict == "pass"  # the first judgement stays
        back = store.trial("deepgemm_tile", BASE, "cpu", "config:a")
        assert back is not None and back.cases[0].ci95_pct == (-5.0, -3.0) and back.speedup == stored.speedup
        assert store.trial("deepgemm_tile", BASE, "a100", "config:a") is None  # another device measures again
        assert [(e.seq, e.outcome, e.tokens) for e in store.events(run.run_id)] == [
            (1, "judged", 1555),
            (2, "repeat", 0),
        ]
        verify = judged("config:a", run.run_id).model_copy(update={"verify_of": run.run_id, "source": "verify"})
        store.record(run.run_id, RoundEvent(seq=3, round=0, source="verify", outcome="judged", key="config:a"), verify,
                     kernel="deepgemm_tile", base_sha=BASE, device_name="cpu")  # fmt: skip
        assert store.trial("deepgemm_tile", BASE, "cpu", "config:a", verify_of=run.run_id) is not None


def test_a_runs_tokens_are_its_own_usage_rows(url: str) -> None:
    with open_ledger(url) as ledger:
        store = TuningStore(ledger)
        run, _ = open_run(store)
        ledger.record_usage(usage("r1", 1555, "tune", run.run_id))
        ledger.record_usage(usage("r2", 1000, "tune", "another-run"))
        ledger.record_usage(usage("r3", 9000))
        spend = store.tokens(run.run_id)
        assert (spend.requests, spend.total_tokens, spend.prompt_tokens) == (1, 1555, 1455)
        rows = {r.request_id: r for r in ledger.usage()}
        assert rows["r1"].purpose == "tune" and rows["r1"].tuning_run == run.run_id and rows["r3"].purpose == "review"


def test_the_weekly_summary_shows_tuning_spend_per_domain_apart_from_reviews(tmp_path: Path) -> None:
    now = datetime(2026, 3, 4, 12, tzinfo=UTC)
    rows = [
        usage("a", 10_000, when="2026-03-03T10:00:00+00:00"),
        usage("b", 4_000, "tune", "run-1", when="2026-03-03T11:00:00+00:00"),
        usage("c", 3_000, "tune", "run-2", when="2026-03-04T11:00:00+00:00"),
    ]
    summary = tokens.weekly_summary(rows, {"deepgemm": 500_000, "flashmla": 1, "v41_attention": 1, "ci_summary": 1},
                                    "2026-W10", now=now)  # fmt: skip
    deepgemm = next(d for d in summary.domains if d.domain == "deepgemm")
    assert (deepgemm.total, deepgemm.tuning_total, deepgemm.review_total) == (17_000, 7_000, 10_000)
    assert (deepgemm.tuning_requests, deepgemm.tuning_runs) == (2, 2)
    body = render_token_summary(summary)
    assert "### Tuning spend (`opgate tune`)" in body
    assert "| deepgemm | 2 | 2 | 7,000 | 10,000 | 41.2% |" in body


def test_a_tune_candidates_expected_metrics_are_held_against_its_trial_stored_once_and_shown(url: str) -> None:
    """The tune agent's `expected_metrics` go through the review's matcher (bot/verdict/expectations.py) against the
    trial's measurement, into `agent_expectations` under the run and the candidate (no review), back with the trial
    and into tune.md beside the measured figure."""
    measured = KernelReport(
        name="deepgemm_tile", domain="deepgemm", changed=True, verdict="pass",
        cases=[CaseReport(name="square_512", verdict="pass", tolerance=0.01, p50_ms=0.9, base_p50_ms=0.94,
                          regression_pct=-4.0, ci95_pct=[-5.0, -3.0])],
    )  # fmt: skip
    checks = check_kernel(measured, {"speedup": 1.05, "registers": 96})
    assert [(c.quantity, c.outcome) for c in checks] == [("p50 change", "inside"), ("registers", "not_measured")]
    with open_ledger(url) as ledger:
        store = TuningStore(ledger)
        run, _ = open_run(store)
        trial = judged("config:a", run.run_id).model_copy(update={"expectations": checks})
        event = RoundEvent(seq=1, round=1, source="agent", outcome="judged", key="config:a")
        store.record(run.run_id, event, trial, kernel="deepgemm_tile", base_sha=BASE, device_name="cpu",
                     domain="deepgemm")  # fmt: skip
        again = RoundEvent(seq=2, round=2, source="agent", outcome="repeat", key="config:a")
        store.record(run.run_id, again, trial, kernel="deepgemm_tile", base_sha=BASE, device_name="cpu",
                     domain="deepgemm")  # fmt: skip
        rows = ledger.expectations(domain="deepgemm")
        assert [(r.review_id, r.tuning_run, r.candidate_key, r.metric, r.outcome) for r in rows] == [
            (None, run.run_id, "config:a", "speedup", "inside"),
            (None, run.run_id, "config:a", "registers", "not_measured"),
        ]  # stored once: the repeat is answered from the stored trial
        back = store.trial("deepgemm_tile", BASE, "cpu", "config:a")
        # read back as stored: the ledger keeps each note's phrase (as JSON), tune.md renders it
        assert back is not None and back.expectations == checks
        assert [c.note.key if c.note else None for c in back.expectations] == [
            "expect.speedup_read",
            "expect.no_resources",
        ]
    text = render_tune(outcome("b" * 40, "{}\n").model_copy(update={"trials": [back]}))
    assert "**Expected by the agent, beside what the trial measured:**" in text
    assert "`speedup` on `square_512`: expected p50 change −4.8 %, measured −4.0 % (−5.0..−3.0)" in text
    assert "`registers`: expected 96, not measured" in text


def test_an_expectation_row_written_before_report_schema_3_reads_its_english_note() -> None:
    """A row of `agent_expectations` from before schema /3 holds its note in English: it reads as report /2's note
    (the catalog's message where opgate wrote it, else as written); a row since holds the phrase as JSON."""
    row = ExpectationRow(kernel="k", domain="d", metric="speedup", expected="1.05", outcome="inside",
                         note="speedup ×1.05 read as a p50 change")  # fmt: skip

    def read(r: ExpectationRow) -> ExpectationCheck:
        return ExpectationCheck.model_validate({"metric": r.metric, "expected": 1.05, "outcome": r.outcome,
                                                "note": r.said()})  # fmt: skip

    assert read(row).note == Phrase(key="expect.speedup_read", params={"speedup": "1.05"})
    assert read(row.model_copy(update={"note": "a note"})).note == Phrase.as_written("a note")
    assert read(row.model_copy(update={"note": ""})).note is None
    since = ExpectationRow(**{**row.model_dump(), "note": Phrase(key="expect.exact")})
    assert since.note == '{"key":"expect.exact","params":{},"phrases":{}}' and read(since).note == Phrase(
        key="expect.exact"
    )
