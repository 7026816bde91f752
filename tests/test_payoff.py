"""Is the spend buying anything (bot/spend/payoff.py): over a synthetic two-week ledger, each domain's share of
expectations inside the measured interval, the local pass rate of what the agent proposed week over week, and the
users' rule — over budget while the pass rate does not improve: stop the agent. Pure, then `opgate summary`."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bot.ledger import Ledger
from bot.models.agent_report import AgentReport, ExpectationCheck
from bot.models.ledger import ExpectationRow, ProposalRow, UsageRow
from bot.spend.budget import iso_week, week_start
from bot.spend.payoff import STOP_TEXT, Rate, improving, payoff
from bot.tune.model import RoundEvent, Trial
from bot.tune.store import TuningStore
from tests import comment_reports as cr
from tests import ledger_world
from tests.pg import Cluster, pg_cluster, pg_url  # noqa: F401  (fixtures)

url = ledger_world.url  # the fixture: SQLite and PostgreSQL

NOW = datetime.now(UTC)
WEEK = iso_week(NOW)
START = week_start(WEEK)
PREVIOUS = iso_week(START - timedelta(days=7))
THIS = START.isoformat(timespec="seconds")  # Monday 00:00 of the current week
BEFORE = (START - timedelta(days=5)).isoformat(timespec="seconds")  # the week before


def _exp(domain: str, outcome: str, at: str) -> ExpectationRow:
    return ExpectationRow(kernel="k", domain=domain, metric="p50", expected="-8", outcome=outcome, created_at=at)  # type: ignore[arg-type]


def _prop(domain: str, kind: str, passed: bool, at: str) -> ProposalRow:
    return ProposalRow(
        created_at=at, domain=domain, kernel="k", kind=kind, verdict="pass" if passed else "fail", passed=passed
    )  # type: ignore[arg-type]


def test_hit_rate_pass_rate_and_the_stop_rule_per_domain_week_over_week():
    expectations = [
        _exp("deepgemm", "inside", THIS),
        _exp("deepgemm", "inside", THIS),
        _exp("deepgemm", "outside", THIS),
        _exp("deepgemm", "not_measured", THIS),  # not counted in the rate, counted beside it
        _exp("deepgemm", "outside", BEFORE),
    ]
    proposals = [
        _prop("deepgemm", "candidate", True, BEFORE),
        _prop("deepgemm", "candidate", False, BEFORE),  # the week before: 50 %
        _prop("deepgemm", "candidate", False, THIS),
        _prop("deepgemm", "tune", True, THIS),
        _prop("deepgemm", "tune", False, THIS),  # this week: 33 %, worse
        _prop("flashmla", "candidate", False, BEFORE),
        _prop("flashmla", "agent_case", True, THIS),  # 0 % -> 100 %: improving
    ]
    totals = {"deepgemm": 12_000, "flashmla": 40_000, "v41_attention": 500}
    budgets = {"deepgemm": 10_000, "flashmla": 30_000, "v41_attention": 10_000}
    got = {p.domain: p for p in payoff(expectations, proposals, totals, budgets, WEEK, PREVIOUS)}
    d = got["deepgemm"]
    assert (d.expectations.hits, d.expectations.judged, d.not_measured) == (2, 3, 1)
    assert (d.expectations_before.hits, d.expectations_before.judged) == (0, 1)
    assert (d.passes.hits, d.passes.judged, d.passes_before.hits, d.passes_before.judged) == (1, 3, 1, 2)
    assert {k: (r.hits, r.judged) for k, r in d.by_kind.items()} == {"candidate": (0, 1), "tune": (1, 2)}
    assert d.over_budget and not d.improving and d.stop and d.stop_text == STOP_TEXT
    f = got["flashmla"]
    assert f.over_budget and f.improving and not f.stop  # over its budget, but the spend is buying passes
    v = got["v41_attention"]
    assert not v.over_budget and not v.stop and v.passes.rate is None  # nothing proposed, within budget


def test_a_week_that_judged_nothing_does_not_improve():
    assert not improving(Rate(), Rate(hits=1, judged=2))
    assert not improving(Rate(), Rate())
    assert improving(Rate(hits=1, judged=4), Rate())  # the week before judged nothing: 0 %
    assert not improving(Rate(hits=1, judged=2), Rate(hits=2, judged=4))  # the same rate is no improvement


def _usage(n: int, domain: str, tokens: int, at: str) -> UsageRow:
    return UsageRow(
        task_id="t",
        model_name="deepseek-v4",
        prompt_tokens=tokens - 100,
        completion_tokens=100,
        total_tokens=tokens,
        request_id=f"r{n}",
        domain=domain,
        key_fingerprint="sha256:x",
        pr=3,
        head_sha="h" * 40,
        status="ok",
        created_at=at,
    )


def _review(ledger: Ledger, at: str, outcomes: list[str], candidate: str | None) -> None:
    """One recorded review of deepgemm_tile on `at`: the agent's expectations with these outcomes, and (when given)
    its candidate patch judged with that verdict."""
    r = cr.with_candidate_and_agent() if candidate else cr.fail_latency()
    if candidate:
        r.kernels[0].candidate = r.kernels[0].candidate.model_copy(update={"verdict": candidate})  # type: ignore[union-attr]
    checks = [
        ExpectationCheck(metric=f"m{i}", expected=1.0, outcome=o)  # type: ignore[arg-type]
        for i, o in enumerate(outcomes)
    ]
    agent = AgentReport(status="ok", domain="deepgemm", kernel="deepgemm_tile", expectations=checks)
    ledger.record_review(r.model_copy(update={"agents": [agent], "agent": agent, "created_at": at}))


def _tune_run(ledger: Ledger, n: int, verified: str, at: str, source: str = "agent") -> None:
    """A tuning run whose `source` proposed a losing candidate (failed) and a winner, re-verified with `verified`."""
    store = TuningStore(ledger)
    base = f"{n:040d}"
    run, _ = store.open_run(
        kernel="deepgemm_tile", domain="deepgemm", base_sha=base, device_name="cpu", strategy="agent",
        max_rounds=4, token_limit=10_000,
    )  # fmt: skip
    steps = [(f"tile_n={n}-lost", source, "fail", ""), (f"tile_n={n}", source, "pass", ""),
             (f"tile_n={n}", "verify", verified, run.run_id)]  # fmt: skip
    for seq, (key, src, verdict, verify_of) in enumerate(steps, 1):
        trial = Trial(key=key, source=src, status="judged", verdict=verdict, run_id=run.run_id, verify_of=verify_of)  # type: ignore[arg-type]
        event = RoundEvent(seq=seq, round=0 if verify_of else seq, source=src, outcome="judged", key=key)  # type: ignore[arg-type]
        store.record(run.run_id, event, trial, kernel="deepgemm_tile", base_sha=base, device_name="cpu")
    # the store dates a trial when it is written; this synthetic ledger places it in its week
    ledger.db.execute("UPDATE tuning_trials SET created_at = ? WHERE run_id = ?", (at, run.run_id))


def seed(path: Path | str) -> None:
    """Two weeks of deepgemm: the week before under budget with candidates passing half the time; this week over
    its 10,000 tokens with fewer passes (a failed candidate; two tune runs whose agent's winner failed and passed its
    re-verification, each beside a losing candidate that does not count; a run of the policy, which does not count)."""
    with Ledger(path) as ledger:
        ledger.record_usage(_usage(1, "deepgemm", 6_000, BEFORE))
        ledger.record_usage(_usage(2, "deepgemm", 11_000, THIS))
        _review(ledger, BEFORE, ["inside", "outside"], "pass")
        _review(ledger, BEFORE, [], "fail")
        _review(ledger, THIS, ["inside", "inside", "outside", "not_measured"], "fail")
        _tune_run(ledger, 1, "fail", THIS)
        _tune_run(ledger, 2, "pass", THIS)
        _tune_run(ledger, 3, "pass", THIS, source="policy")


def test_the_ledger_gives_the_proposals_of_reviews_and_of_tune(url):
    seed(url)
    with Ledger(url) as ledger:
        got = [(p.kind, p.verdict, p.passed, p.created_at) for p in ledger.proposals()]
        assert got == [
            ("candidate", "pass", True, BEFORE),
            ("candidate", "fail", False, BEFORE),
            ("candidate", "fail", False, THIS),
            ("tune", "fail", False, THIS),
            ("tune", "pass", True, THIS),
        ]
        assert [p.kind for p in ledger.proposals(since=THIS)] == ["candidate", "tune", "tune"]


def test_the_weekly_summary_reports_the_rates_and_flags_stop_the_agent(opgate, tmp_path):
    seed(tmp_path / "ledger.sqlite")
    env = {"OPGATE_BUDGET_WEEKLY_DEEPGEMM": "10000"}
    run = opgate("summary", "--out-dir", str(tmp_path / "reports"), env=env)
    assert run.code == 0, run.stderr
    assert f"opgate: deepgemm: over budget, pass rate not improving: {STOP_TEXT}" in run.stdout
    text = (tmp_path / "reports" / f"summary-{WEEK}.md").read_text()
    assert "### Is the spend buying anything" in text
    row = next(line for line in text.splitlines() if line.startswith("| DeepGEMM | 11,000 | 10,000 |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[3:8] == ["67% (2/3)", "50% (1/2)", "1", "33% (1/3) (candidate 0% (0/1), tune 50% (1/2))", "50% (1/2)"]
    assert cells[8] == f"⛔ {STOP_TEXT}"
    assert "- ⛔ **DeepGEMM** spent 11,000 tokens of a 10,000 budget while its pass rate did not improve" in text
    flash = next(line for line in text.splitlines() if line.startswith("| FlashMLA |"))
    assert "⛔" not in flash
    data = json.loads(opgate("--json", "summary", "--out-dir", str(tmp_path / "reports"), env=env).stdout)
    deepgemm = next(p for p in data["payoff"] if p["domain"] == "deepgemm")
    assert deepgemm["stop"] is True and round(deepgemm["pass_rate"], 3) == 0.333


def test_in_chinese_the_payoff_section_and_the_stop_rule_speak_the_locale(opgate, tmp_path):
    from bot.text.i18n import english_runs

    seed(tmp_path / "ledger.sqlite")
    env = {"OPGATE_BUDGET_WEEKLY_DEEPGEMM": "10000", "OPGATE_LOCALE": "zh-CN"}
    run = opgate("summary", "--out-dir", str(tmp_path / "reports"), env=env)
    assert run.code == 0, run.stderr
    text = (tmp_path / "reports" / f"summary-{WEEK}.md").read_text()
    section = text.split("### 花费是否带来了收益", 1)[1].split("\n### ", 1)[0]
    row = next(line for line in section.splitlines() if line.startswith("| DeepGEMM | 11,000 | 10,000 |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[3:8] == ["67% (2/3)", "50% (1/2)", "1", "33% (1/3) (candidate 0% (0/1), tune 50% (1/2))", "50% (1/2)"]
    assert cells[8] == "⛔ 停用 agent，由人来检查搜索空间"
    assert "- ⛔ **DeepGEMM** 在 10,000 的预算中花费了 11,000 个 token" in section
    assert english_runs(section) == []


def test_a_reviews_agent_cases_are_ledger_rows_and_fill_the_summarys_agent_case_rate(url, opgate, tmp_path):
    """The agent's test matrix as a recorded review judged it (tests/comment_reports.agent_cases: head broke tail_15
    where base is right, base broke tail_31 too, rows_1 passed; two entries refused): one agent_case row per case
    judged, passed only where it found head's own bug; refused entries were never judged and make no row."""
    report = cr.agent_cases().model_copy(update={"created_at": THIS})
    with Ledger(url) as ledger:
        ledger.record_usage(_usage(1, "deepgemm", 2_000, THIS))  # the week's spend: the summary's row of the domain
        ledger.record_review(report)
        got = [(p.kind, p.kernel, p.name, p.verdict, p.passed) for p in ledger.proposals()]
    assert got == [
        ("agent_case", "deepgemm_tile", "tail_15", "fail", True),
        ("agent_case", "deepgemm_tile", "tail_31", "base_fails", False),
        ("agent_case", "deepgemm_tile", "rows_1", "pass", False),
    ]
    with Ledger(url) as ledger:
        [d] = [p for p in payoff([], ledger.proposals(), {"deepgemm": 0}, {}, WEEK, PREVIOUS) if p.domain == "deepgemm"]
    assert {k: (r.hits, r.judged) for k, r in d.by_kind.items()} == {"agent_case": (1, 3)}
    if not url.startswith("postgresql"):  # the command over the same ledger (SQLite: the file opgate reads)
        run = opgate("summary", "--out-dir", str(tmp_path / "reports"), env={"OPGATE_DATABASE_URL": str(url)})
        assert run.code == 0, run.stderr
        text = (tmp_path / "reports" / f"summary-{WEEK}.md").read_text()
        section = text.split("### Is the spend buying anything", 1)[1].split("\n### ", 1)[0]
        row = next(line for line in section.splitlines() if line.startswith("| DeepGEMM |"))
        assert "33% (1/3) (agent_case 33% (1/3))" in row, row
