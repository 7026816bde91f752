"""The weekly token summary and the spend-anomaly scores (pure functions over ledger rows)."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import pytest

from bot.models.ledger import UsageRow, VerdictRow
from bot.spend.tokens import DAILY_FLOOR, WEEKLY_FLOOR, modified_z, score, weekly_summary

WEEK = "2026-W10"  # Monday 2026-03-02
MONDAY = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
AFTER = MONDAY + timedelta(days=8)  # the week is over
BUDGETS = {"deepgemm": 500_000, "flashmla": 800_000, "v41_attention": 520_000, "ci_summary": 200_000}
LABELS = {"deepgemm": "DeepGEMM", "flashmla": "FlashMLA", "v41_attention": "V4.1 attention", "ci_summary": "CI summary"}


def row(n: int, domain: str, when: datetime, prompt: int, completion: int, status: str = "ok") -> UsageRow:
    return UsageRow(
        task_id="t",
        model_name="m",
        prompt_tokens=prompt,
        completion_tokens=completion,
        total_tokens=prompt + completion,
        request_id=f"{domain}-{n}",
        domain=domain,
        key_fingerprint="sha256:x",
        pr=None,
        head_sha="h",
        status=status,
        created_at=when.isoformat(timespec="seconds"),
    )


def weeks_of(domain: str, weekly: list[int], last: int, per_day: int = 1) -> list[UsageRow]:
    """Rows for the weeks before WEEK (oldest first, spread over the days) and `last` in WEEK."""
    rows, n = [], 0
    for back, total in enumerate([*weekly, last][::-1]):
        for day in range(7):
            for _ in range(per_day):
                n += 1
                share = total // (7 * per_day)
                rows.append(row(n, domain, MONDAY - timedelta(weeks=back) + timedelta(days=day), share, 0))
    return rows


def test_the_modified_z_score_uses_the_median_and_mad():
    history = [10.0, 12, 11, 13, 9, 10, 12, 11]  # median 11, MAD 1
    assert modified_z(21, history) == pytest.approx(0.6745 * 10)
    assert modified_z(11, history) == 0


def test_mad_zero_falls_back_to_the_mean_absolute_deviation_and_then_to_infinity():
    mostly_flat = [100.0] * 6 + [130.0]  # MAD = 0, mean absolute deviation = 30/7
    assert modified_z(160, mostly_flat) == pytest.approx(60 / (1.253314 * 30 / 7))
    flat = [100.0] * 8
    assert modified_z(100, flat) == 0 and modified_z(101, flat) == math.inf and modified_z(99, flat) == -math.inf


def test_under_seven_points_there_is_not_enough_history():
    assert modified_z(1e9, [1.0] * 6) is None
    s = score("2026-W10", 10**6, [1] * 6, WEEKLY_FLOOR)
    assert s.status == "not enough history" and "6 of 7" in s.line()


def test_a_flag_needs_both_the_score_and_the_absolute_floor():
    history = [1000, 1100, 900, 1000, 1050, 950, 1000]
    assert score("d", 9000, history, DAILY_FLOOR).status == "normal"  # |M| huge, but only 8,000 tokens off
    assert score("d", 20_000, history, DAILY_FLOOR).status == "flagged"
    assert score("w", 0, [200_000] * 7, WEEKLY_FLOOR).status == "flagged"  # a collapse is flagged too…
    assert score("w", 0, [200_000] * 7, WEEKLY_FLOOR, partial=True).status == "normal"  # …unless still running


def test_the_summary_has_the_users_columns_per_domain():
    rows = [
        row(1, "deepgemm", MONDAY, 2500, 800),
        row(2, "deepgemm", MONDAY + timedelta(hours=1), 2700, 600),
        row(3, "deepgemm", MONDAY + timedelta(hours=2), 0, 0, status="error"),  # a failed attempt
        row(4, "deepgemm", MONDAY + timedelta(hours=3), 0, 0, status="over_budget"),
        row(5, "flashmla", MONDAY - timedelta(days=1), 3000, 1000),  # the week before
        row(6, "ci_summary", MONDAY + timedelta(days=6, hours=14), 6000, 1500),
    ]
    verdicts = [
        VerdictRow(review_id=1, kernel="deepgemm_tile", domain="deepgemm", changed=True, verdict="pass",
                   created_at=MONDAY.isoformat()),
        VerdictRow(review_id=2, kernel="deepgemm_tile", domain="deepgemm", changed=True, verdict="fail",
                   created_at=MONDAY.isoformat()),
    ]  # fmt: skip
    s = weekly_summary(rows, BUDGETS, WEEK, verdicts=verdicts, now=AFTER, labels=LABELS)
    assert (s.start.isoformat(), s.end.isoformat()) == ("2026-03-02", "2026-03-08")
    by = {d.domain: d for d in s.domains}
    assert [d.label for d in s.domains] == ["DeepGEMM", "FlashMLA", "V4.1 attention", "CI summary"]
    gemm = by["deepgemm"]
    assert (gemm.requests, gemm.avg_input, gemm.avg_output, gemm.total) == (2, 2600, 700, 6600)
    assert (gemm.budget, gemm.pct_used) == (500_000, 1.3)
    assert "2 kernel change(s) gated locally (1 fail, 1 pass)" in gemm.local_action
    assert "agent not asked 1× (over budget)" in gemm.local_action
    assert by["flashmla"].total == 0 and by["ci_summary"].total == 7500
    assert gemm.anomaly_text == "not enough history (0 of 7 weeks)"
    assert s.weeks[-1] == WEEK and len(s.weeks) == 8 and s.weeks[0] == "2026-W03"
    assert s.history["flashmla"][-2:] == [4000, 0]


def test_a_week_that_leaves_its_history_is_flagged_and_a_normal_one_is_not():
    steady = [70_000, 66_000, 68_000, 71_000, 69_000, 67_000, 70_000, 68_000]
    rows = weeks_of("flashmla", steady, 260_000) + weeks_of("deepgemm", steady, 69_000)
    s = weekly_summary(rows, BUDGETS, WEEK, now=AFTER)
    by = {d.domain: d for d in s.domains}
    assert by["flashmla"].anomaly and by["flashmla"].weekly.status == "flagged"
    assert "2026-W10: 259," in by["flashmla"].anomaly_text and "rotation signal" in by["flashmla"].local_action
    assert not by["deepgemm"].anomaly and by["deepgemm"].anomaly_text == "none"
    assert [d.domain for d in s.anomalies] == ["flashmla"]


def test_a_runaway_day_is_flagged_from_daily_history_before_weeks_of_history_exist():
    rows = weeks_of("v41_attention", [70_000] * 6, 70_000)
    rows += [row(10_000 + i, "v41_attention", MONDAY + timedelta(days=2, minutes=i), 1000, 0) for i in range(40)]
    s = weekly_summary(rows, BUDGETS, WEEK, now=AFTER)
    v41 = next(d for d in s.domains if d.domain == "v41_attention")
    assert v41.weekly.status == "not enough history"  # 6 weeks; but 28 days of daily history
    assert any(d.status == "flagged" and d.period == "2026-03-04" for d in v41.daily)
    assert v41.anomaly and "2026-03-04" in v41.anomaly_text
