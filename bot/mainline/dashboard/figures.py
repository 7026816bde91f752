"""The static dashboard: main's history per kernel and case, resources, token spend and tuning, as charts (pure)."""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from bot.mainline.dashboard.charts import Band, Chart, Point, Rule, Series, Tick
from bot.mainline.drift import DriftCheck
from bot.mainline.record import MainCommit, ResourceFigure
from bot.mainline.store import StoredReview
from bot.models.ledger import AcceptanceRow, CaseFigure, UsageRow
from bot.spend.budget import iso_week
from bot.spend.tokens import domain_names, domain_scores, weeks_before

TOKEN_WEEKS = 26  # at most this many weeks on the token charts
TUNING_TABLES = ("tuning_trials", "tuning_runs")  # a tuning feature's table, when the ledger has one
_SAFE = re.compile(r"[^A-Za-z0-9_.-]")


@dataclass
class SiteData:
    """Everything the site shows, read from the ledger once."""

    generated_at: datetime
    commits: list[MainCommit] = field(default_factory=list)
    figures: list[CaseFigure] = field(default_factory=list)
    resources: list[ResourceFigure] = field(default_factory=list)
    reviews: list[StoredReview] = field(default_factory=list)
    acceptances: list[AcceptanceRow] = field(default_factory=list)
    usage: list[UsageRow] = field(default_factory=list)
    budgets: dict[str, int] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)  # configured domain -> its name in charts
    checks: list[DriftCheck] = field(default_factory=list)
    limit_pct: float = 5.0
    tuning_table: str | None = None
    tuning_rows: list[dict[str, Any]] = field(default_factory=list)


def page_name(kernel: str) -> str:
    """The file of a kernel's page: its name with anything but [A-Za-z0-9_.-] replaced."""
    return f"kernel-{_SAFE.sub('_', kernel)}.html"


def kernels(data: SiteData) -> list[str]:
    names = {f.kernel for f in data.figures} | {r.kernel for r in data.resources}
    names |= {k.name for r in data.reviews for k in r.report.kernels if k.changed}
    return sorted(names)


class Axis:
    """x positions: one per recorded main commit (oldest first); without any, one per pull request review."""

    def __init__(self, data: SiteData) -> None:
        self.commits = sorted(data.commits, key=lambda c: c.committed_at)
        self.index = {c.sha: i for i, c in enumerate(self.commits)}
        self.labels = [c.sha[:7] for c in self.commits]
        self.by_pr = not self.commits

    def of_review(self, review: StoredReview, order: int) -> float:
        """A pull request sits on its base commit; an unrecorded base sits after the last commit before it."""
        if self.by_pr:
            return float(order)
        base = review.report.base_sha
        if base in self.index:
            return float(self.index[base])
        before = [i for i, c in enumerate(self.commits) if c.committed_at <= review.created_at]
        return (before[-1] if before else -1) + 0.5


def _overrides(data: SiteData) -> dict[tuple[int, str], list[AcceptanceRow]]:
    """(PR, kernel) -> its overrides (a kernel list of [] covers every kernel)."""
    out: dict[tuple[int, str], list[AcceptanceRow]] = defaultdict(list)
    for a in data.acceptances:
        if a.override:
            for k in a.kernels or ["*"]:
                out[(a.pr, k)].append(a)
    return out


def _overridden(overrides: Mapping[tuple[int, str], list[AcceptanceRow]], pr: int | None, kernel: str) -> str:
    if pr is None:
        return ""
    found = overrides.get((pr, kernel), []) + overrides.get((pr, "*"), [])
    return "; ".join(f"overridden by {a.login}: {a.reason}" for a in found)


def kernel_reviews(data: SiteData, kernel: str) -> list[StoredReview]:
    """The latest review of each (PR, head) that changed the kernel."""
    latest: dict[tuple[int | None, str], StoredReview] = {}
    for r in data.reviews:
        if any(k.name == kernel and k.changed for k in r.report.kernels):
            latest[(r.report.pr, r.report.head_sha)] = r
    return sorted(latest.values(), key=lambda r: r.id)


def latency_charts(data: SiteData, kernel: str) -> list[Chart]:
    """Per case and device: main's p50 over commits with its 95% CI band, and each PR's base → head."""
    axis = Axis(data)
    overrides = _overrides(data)
    commits = {c.sha: c for c in data.commits}
    keys = sorted({(f.case_name, f.device_name) for f in data.figures if f.kernel == kernel})
    reviews = kernel_reviews(data, kernel)
    for r in reviews:
        k = next(k for k in r.report.kernels if k.name == kernel)
        keys += [(c.name, _device(r, c.device)) for c in k.cases if c.p50_ms is not None]
    out = []
    for case, device in dict.fromkeys(keys):
        rows = [f for f in data.figures if f.kernel == kernel and f.case_name == case and f.device_name == device]
        rows = [f for f in rows if f.sha in axis.index]
        points, xs, lows, highs = [], [], [], []
        for f in sorted(rows, key=lambda f: axis.index[f.sha]):
            c = commits.get(f.sha)
            pr = c.pr if c else None
            note = _overridden(overrides, pr, kernel)
            reg = f"{f.regression_pct:+.2f}% vs {f.base_sha[:7]}" if f.regression_pct is not None else "no base"
            label = (
                f"{f.sha[:7]} {f.committed_at[:10]}{f' PR #{pr}' if pr else ''}: {f.p50_ms:.4g} ms ({reg}), {f.verdict}"
            )
            mark = f"{f.verdict} override" if note else f.verdict
            points.append(
                Point(x=axis.index[f.sha], y=f.p50_ms, label=label + (f"; {note}" if note else ""), mark=mark)
            )
            if (band := f.band_ms) is not None:
                xs.append(float(axis.index[f.sha]))
                lows.append(band[0])
                highs.append(band[1])
        ticks = _pr_ticks(reviews, axis, kernel, case, device, overrides)
        if not points and not ticks:
            continue
        out.append(
            Chart(
                title=f"{case} ({device}): p50 on main",
                x_labels=axis.labels if not axis.by_pr else [f"#{r.report.pr}" for r in reviews],
                y_label="p50 ms",
                series=[Series(name="main p50", points=points)] if points else [],
                bands=[Band(name="95% CI of each step", xs=xs, lows=lows, highs=highs)] if xs else [],
                ticks=ticks,
            )
        )
    return out


def _device(review: StoredReview, device: str) -> str:
    return (review.report.environment.gpu or "cuda") if device == "cuda" else "cpu"


def _pr_ticks(
    reviews: list[StoredReview],
    axis: Axis,
    kernel: str,
    case: str,
    device: str,
    overrides: Mapping[tuple[int, str], list[AcceptanceRow]],
) -> list[Tick]:
    ticks: list[Tick] = []
    crowd: dict[float, int] = defaultdict(int)
    for order, r in enumerate(reviews):
        k = next(k for k in r.report.kernels if k.name == kernel)
        c = next((c for c in k.cases if c.name == case and _device(r, c.device) == device), None)
        if c is None or c.p50_ms is None or c.base_p50_ms is None:
            continue
        x = axis.of_review(r, order)
        shift = 0.12 * crowd[x]
        crowd[x] += 1
        note = _overridden(overrides, r.report.pr, kernel)
        label = (
            f"PR #{r.report.pr} head {r.report.head_sha[:7]} on base {r.report.base_sha[:7]}: "
            f"{c.base_p50_ms:.4g} → {c.p50_ms:.4g} ms ({(c.regression_pct or 0):+.2f}%), {c.verdict}"
        )
        mark = f"{c.verdict} override" if note else c.verdict
        ticks.append(
            Tick(x=x + shift, y0=c.base_p50_ms, y1=c.p50_ms, label=label + (f"; {note}" if note else ""), mark=mark)
        )
    return ticks


def cumulative_chart(data: SiteData, kernel: str) -> Chart | None:
    """Per case: main's cumulative change since the first recorded commit (the product of the steps), in %."""
    axis = Axis(data)
    series = []
    by_case: dict[tuple[str, str], list[CaseFigure]] = defaultdict(list)
    for f in data.figures:
        if f.kernel == kernel and f.sha in axis.index and f.ratio is not None:
            by_case[(f.case_name, f.device_name)].append(f)
    for (case, device), rows in sorted(by_case.items()):
        total, points = 0.0, []
        for f in sorted(rows, key=lambda f: axis.index[f.sha]):
            total += math.log(f.ratio or 1.0)
            pct = (math.exp(total) - 1) * 100
            points.append(Point(x=axis.index[f.sha], y=pct, label=f"{f.sha[:7]} {f.committed_at[:10]}: {pct:+.2f}%"))
        name = case if device == "cpu" else f"{case} ({device})"
        series.append(Series(name=name, points=points))
    if not series:
        return None
    return Chart(
        title=f"{kernel}: cumulative change on main since its first record",
        x_labels=axis.labels,
        y_label="% vs first record",
        series=series,
        rules=[Rule(y=data.limit_pct, label=f"drift limit +{data.limit_pct:g}%")],
        y_zero=True,
    )


def resource_charts(data: SiteData, kernel: str) -> list[Chart]:
    """Registers, shared memory and estimated occupancy per compiled function over main's commits."""
    axis = Axis(data)
    rows = [r for r in data.resources if r.kernel == kernel and r.sha in axis.index]
    functions = sorted({(r.function, r.arch) for r in rows})  # one series per function and architecture
    named = len({arch for _, arch in functions}) > 1
    out = []
    for title, unit, value in (
        ("registers per thread", "registers", lambda r: float(r.registers)),
        ("static shared memory per block", "bytes", lambda r: float(r.smem_bytes)),
        ("occupancy (estimate)", "% of the SM's warps", lambda r: None if r.occupancy is None else r.occupancy * 100),
    ):
        series = []
        for fn, arch in functions:
            pts = []
            mine = (r for r in rows if r.function == fn and r.arch == arch)
            for r in sorted(mine, key=lambda r: axis.index[r.sha]):
                v = value(r)
                if v is not None:
                    label = f"{r.sha[:7]}: {v:g} ({r.registers} regs, {r.smem_bytes} B smem, {r.spill_bytes} B spill)"
                    pts.append(Point(x=axis.index[r.sha], y=v, label=label, mark="fail" if r.spill_bytes else ""))
            if pts:
                series.append(Series(name=f"{_short(fn)} ({arch})" if named else _short(fn), points=pts))
        if series:
            out.append(
                Chart(title=f"{kernel}: {title}", x_labels=axis.labels, y_label=unit, series=series, y_zero=True)
            )
    return out


def _short(function: str) -> str:
    """A mangled or templated function name cut for a legend."""
    return function if len(function) <= 40 else function[:39] + "…"


@dataclass(frozen=True)
class DomainWeekCell:
    week: str
    tokens: int
    budget: int
    anomaly: str  # "" or the anomaly line


def token_weeks(data: SiteData) -> list[str]:
    """The weeks on the token charts: from the first week with spend (at least the last 8) to this week."""
    now_week = iso_week(data.generated_at)
    weeks = [*weeks_before(now_week, TOKEN_WEEKS - 1), now_week]
    first = min((iso_week(_when(u.created_at)) for u in data.usage), default=now_week)
    return [w for i, w in enumerate(weeks) if w >= first or i >= len(weeks) - 8]


def _when(stamp: str) -> datetime:
    when = datetime.fromisoformat(stamp)
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def token_table(data: SiteData) -> dict[str, list[DomainWeekCell]]:
    """Per domain and week: tokens spent, the weekly budget and the anomaly line when flagged."""
    weeks = token_weeks(data)
    totals: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for u in data.usage:
        totals[u.domain][iso_week(_when(u.created_at))] += u.total_tokens
    table = {}
    for domain in domain_names(data.labels or data.budgets, data.usage):
        cells = []
        for w in weeks:
            weekly, daily = domain_scores(data.usage, domain, w, data.generated_at)
            flagged = [s for s in [weekly, *daily] if s.status == "flagged"]
            cells.append(
                DomainWeekCell(
                    week=w,
                    tokens=totals[domain][w],
                    budget=data.budgets.get(domain, 0),
                    anomaly="; ".join(s.line() for s in flagged),
                )
            )
        table[domain] = cells
    return table


def token_charts(data: SiteData) -> tuple[Chart, list[Chart]]:
    """Every domain's weekly spend as % of its budget (one chart), and each domain's tokens against its budget."""
    table = token_table(data)
    weeks = token_weeks(data)
    labels = [w.split("-")[-1] if i else w for i, w in enumerate(weeks)]
    share, per_domain = [], []
    for domain, cells in table.items():
        pts, abs_pts = [], []
        for i, cell in enumerate(cells):
            mark = "anomaly" if cell.anomaly else ""
            note = f"; ANOMALY: {cell.anomaly}" if cell.anomaly else ""
            pct = 100.0 * cell.tokens / cell.budget if cell.budget else 0.0
            pts.append(
                Point(x=i, y=pct, label=f"{cell.week}: {cell.tokens:,} tokens, {pct:.1f}% of budget{note}", mark=mark)
            )
            abs_pts.append(Point(x=i, y=cell.tokens, label=f"{cell.week}: {cell.tokens:,} tokens{note}", mark=mark))
        name = data.labels.get(domain) or domain
        share.append(Series(name=name, points=pts))
        budget = cells[0].budget if cells else 0
        per_domain.append(
            Chart(
                title=f"{name} ({domain}): tokens per week",
                x_labels=labels,
                y_label="tokens",
                series=[Series(name="tokens", points=abs_pts)],
                rules=[Rule(y=budget, label=f"weekly budget {budget:,}")] if budget else [],
                y_zero=True,
            )
        )
    overview = Chart(
        title="Agent tokens per week, % of each domain's weekly budget",
        x_labels=labels,
        y_label="% of budget",
        series=share,
        rules=[Rule(y=100.0, label="budget")],
        y_zero=True,
    )
    return overview, per_domain
