"""Weekly token summary and spend anomalies per domain (pure: ledger rows in, models out)."""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from datetime import UTC, date, datetime, timedelta
from typing import Literal

from pydantic import BaseModel, ConfigDict

from bot.config.repo import CI_SUMMARY_DOMAIN
from bot.models.ledger import UsageRow, VerdictRow
from bot.spend.budget import iso_week, week_start

THRESHOLD = 3.5  # |M| above this is unusual (Iglewicz and Hoaglin)
MIN_HISTORY = 7  # points of history needed before a score means anything
WEEKLY_FLOOR = 50_000  # and the spend must differ from the median by at least this many tokens
DAILY_FLOOR = 10_000
HISTORY_WEEKS = 12
HISTORY_DAYS = 28
CHART_WEEKS = 8


class Score(BaseModel):
    """One total scored against its history with the median/MAD modified z-score."""

    model_config = ConfigDict(frozen=True)

    period: str  # "2026-W10" or "2026-03-04"
    value: int
    points: int
    median: float | None = None
    m: float | None = None  # None without enough history; ±inf when the history is flat and x differs
    status: Literal["normal", "flagged", "not enough history"]

    def line(self) -> str:
        if self.status == "not enough history":
            return f"{self.period}: {self.value:,} tokens, not enough history ({self.points} of {MIN_HISTORY} points)"
        m = "∞" if self.m is not None and abs(self.m) == float("inf") else f"{self.m:+.1f}"
        word = "ANOMALY" if self.status == "flagged" else "normal"
        return f"{self.period}: {self.value:,} tokens vs median {self.median:,.0f} (M = {m}) — {word}"


def modified_z(value: float, history: list[float]) -> float | None:
    """0.6745·(x − median)/MAD; with MAD = 0, (x − median)/(1.2533·mean absolute deviation); with both
    zero, 0 when x equals the median and ±inf otherwise. None under MIN_HISTORY points."""
    if len(history) < MIN_HISTORY:
        return None
    med = statistics.median(history)
    mad = statistics.median(abs(h - med) for h in history)
    if mad > 0:
        return 0.6745 * (value - med) / mad
    mean_ad = statistics.fmean(abs(h - med) for h in history)
    if mean_ad > 0:
        return (value - med) / (1.253314 * mean_ad)
    if value == med:
        return 0.0
    return float("inf") if value > med else float("-inf")


def score(period: str, value: int, history: list[int], floor: int, *, partial: bool = False) -> Score:
    """Flag when |M| > THRESHOLD and |x − median| ≥ floor. A partial period (still running) can only
    grow, so only a spike is flagged there, never a drop."""
    m = modified_z(value, [float(h) for h in history])
    if m is None:
        return Score(period=period, value=value, points=len(history), status="not enough history")
    med = statistics.median(history)
    unusual = abs(m) > THRESHOLD and abs(value - med) >= floor and not (partial and value < med)
    return Score(
        period=period, value=value, points=len(history), median=med, m=m, status="flagged" if unusual else "normal"
    )


class DomainWeek(BaseModel):
    """One line of the users' token table, for one domain and week."""

    domain: str
    label: str
    requests: int
    avg_input: int
    avg_output: int
    total: int
    review_total: int = 0  # of `total`, spent by reviews
    tuning_total: int = 0  # of `total`, spent by `opgate tune` rounds
    tuning_requests: int = 0
    tuning_runs: int = 0
    budget: int
    pct_used: float
    anomaly: bool
    anomaly_text: str
    local_action: str
    weekly: Score
    daily: list[Score]


class WeeklySummary(BaseModel):
    week: str
    start: date
    end: date  # the Sunday
    domains: list[DomainWeek]
    weeks: list[str]  # the last CHART_WEEKS weeks, oldest first, ending with `week`
    history: dict[str, list[int]]  # domain -> totals for `weeks`

    @property
    def anomalies(self) -> list[DomainWeek]:
        return [d for d in self.domains if d.anomaly]


def _when(row_time: str) -> datetime:
    when = datetime.fromisoformat(row_time)
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def weeks_before(week: str, n: int) -> list[str]:
    """The n weeks before `week`, oldest first."""
    start = week_start(week)
    return [iso_week(start - timedelta(weeks=k)) for k in range(n, 0, -1)]


class _Totals:
    """Token totals of one domain by ISO week and by day, and when it first spent anything."""

    def __init__(self, rows: list[UsageRow]) -> None:
        self.by_week: Counter[str] = Counter()
        self.by_day: Counter[date] = Counter()
        self.first: datetime | None = None
        for row in rows:
            when = _when(row.created_at)
            self.by_week[iso_week(when)] += row.total_tokens
            self.by_day[when.date()] += row.total_tokens
            self.first = when if self.first is None or when < self.first else self.first

    def week_history(self, week: str) -> list[int]:
        if self.first is None:
            return []
        return [self.by_week[w] for w in weeks_before(week, HISTORY_WEEKS) if week_start(w) >= _monday(self.first)]

    def day_history(self, day: date) -> list[int]:
        if self.first is None:
            return []
        days = [day - timedelta(days=k) for k in range(HISTORY_DAYS, 0, -1)]
        return [self.by_day[d] for d in days if d >= self.first.date()]


def _monday(when: datetime) -> datetime:
    return week_start(iso_week(when))


def domain_scores(rows: Iterable[UsageRow], domain: str, week: str, now: datetime) -> tuple[Score, list[Score]]:
    """The week's total and each elapsed day's total of one domain, scored against their history."""
    totals = _Totals([r for r in rows if r.domain == domain])
    start = week_start(week)
    running = start <= now < start + timedelta(days=7)
    weekly = score(week, totals.by_week[week], totals.week_history(week), WEEKLY_FLOOR, partial=running)
    daily = []
    for k in range(7):
        day = (start + timedelta(days=k)).date()
        if day > now.date():
            break
        value = totals.by_day[day]
        daily.append(score(day.isoformat(), value, totals.day_history(day), DAILY_FLOOR, partial=day == now.date()))
    return weekly, daily


def anomaly_text(weekly: Score, daily: list[Score]) -> str:
    flagged = [s for s in [weekly, *daily] if s.status == "flagged"]
    if flagged:
        return "; ".join(s.line() for s in flagged)
    if weekly.status == "not enough history":
        return f"not enough history ({weekly.points} of {MIN_HISTORY} weeks)"
    return "none"


ANSWERED = ("ok", "cached")  # a request that produced a reply (from the gateway or the cache)


def _local_action(domain: str, verdicts: list[VerdictRow], rows: list[UsageRow], flagged: bool) -> str:
    parts = []
    if domain == CI_SUMMARY_DOMAIN and (written := sum(1 for r in rows if r.domain == domain and r.status in ANSWERED)):
        parts.append(f"{written} review summary(ies) written into report.json and the comment, not a production DB")
    judged = Counter(v.verdict for v in verdicts if v.domain == domain and v.changed)
    if judged:
        detail = ", ".join(f"{n} {verdict}" for verdict, n in sorted(judged.items()))
        parts.append(f"{sum(judged.values())} kernel change(s) gated locally ({detail})")
    refused = sum(1 for r in rows if r.domain == domain and r.status == "over_budget")
    if refused:
        parts.append(f"agent not asked {refused}× (over budget), gates still ran")
    cached = sum(1 for r in rows if r.domain == domain and r.cached)
    if cached:
        parts.append(f"{cached} repeated prompt(s) answered from the cache")
    if flagged:
        parts.append("rotation signal: check the key for a request loop or misconfiguration")
    return "; ".join(parts) or "—"


def weekly_summary(
    rows: Iterable[UsageRow],
    budgets: Mapping[str, int],
    week: str,
    *,
    verdicts: Iterable[VerdictRow] = (),
    now: datetime | None = None,
    labels: Mapping[str, str] | None = None,
) -> WeeklySummary:
    """The users' token table for `week` (requests, averages, total, budget, % used, anomaly, local action)
    and the last CHART_WEEKS weeks' totals per domain: the configured domains (`labels`, else `budgets`) in
    their order, then any other domain the rows spent tokens in (no budget)."""
    start = week_start(week)
    now = now or datetime.now(UTC)
    all_rows = list(rows)
    in_week = [r for r in all_rows if iso_week(_when(r.created_at)) == week]
    week_verdicts = [v for v in verdicts if iso_week(_when(v.created_at)) == week]
    chart_weeks = [*weeks_before(week, CHART_WEEKS - 1), week]
    by_week: dict[str, Counter[str]] = defaultdict(Counter)
    for r in all_rows:
        by_week[r.domain][iso_week(_when(r.created_at))] += r.total_tokens
    names = domain_names(labels if labels is not None else budgets, all_rows)
    domains = []
    for domain in names:
        label = (labels or {}).get(domain) or domain
        answered = [r for r in in_week if r.domain == domain and r.status == "ok"]
        total = sum(r.total_tokens for r in in_week if r.domain == domain)
        tuning = [r for r in in_week if r.domain == domain and r.purpose == "tune"]
        budget = int(budgets.get(domain, 0))
        weekly, daily = domain_scores(all_rows, domain, week, now)
        flagged = any(s.status == "flagged" for s in [weekly, *daily])
        domains.append(
            DomainWeek(
                domain=domain,
                label=label,
                requests=len(answered),
                avg_input=round(statistics.fmean(r.prompt_tokens for r in answered)) if answered else 0,
                avg_output=round(statistics.fmean(r.completion_tokens for r in answered)) if answered else 0,
                total=total,
                review_total=total - sum(r.total_tokens for r in tuning),
                tuning_total=sum(r.total_tokens for r in tuning),
                tuning_requests=sum(1 for r in tuning if r.status == "ok"),
                tuning_runs=len({r.tuning_run for r in tuning if r.tuning_run}),
                budget=budget,
                pct_used=round(100.0 * total / budget, 1) if budget else 0.0,
                anomaly=flagged,
                anomaly_text=anomaly_text(weekly, daily),
                local_action=_local_action(domain, week_verdicts, in_week, flagged),
                weekly=weekly,
                daily=daily,
            )
        )
    return WeeklySummary(
        week=week,
        start=start.date(),
        end=(start + timedelta(days=6)).date(),
        domains=domains,
        weeks=chart_weeks,
        history={d: [by_week[d][w] for w in chart_weeks] for d in names},
    )


def domain_names(configured: Iterable[str], rows: Iterable[UsageRow]) -> list[str]:
    """The configured domains in their order, then the other domains rows name (sorted)."""
    known = list(configured)
    return known + sorted({r.domain for r in rows if r.domain} - set(known))
