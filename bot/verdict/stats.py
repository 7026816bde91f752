"""Timing statistics: the paired block statistic, Student t intervals, the sequential latency verdict (pure).

The statistic it replaced (issue 25), a bootstrap of medians, lives on in benchmarks/bootstrap.py for the benchmarks
that compare the two."""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import cache
from typing import Literal, NamedTuple

import numpy as np


def median(samples: Sequence[float]) -> float:
    return float(np.median(np.asarray(samples, dtype=np.float64)))


LatencyVerdict = Literal["pass", "fail", "inconclusive"]


def latency_verdict(ci_low: float, ci_high: float, max_regression_pct: float) -> LatencyVerdict:
    """Fail only when the whole CI is above the threshold; pass only when it is all below."""
    limit = 1.0 + max_regression_pct / 100.0
    if ci_low > limit:
        return "fail"
    if ci_high <= limit:
        return "pass"
    return "inconclusive"


# -- the paired statistic (issue 25) ------------------------------------------------------------------------------
#
# The judge times head and base in blocks, adjacent in time: A B, B A, … within each fresh process pair. One block
# gives one log-ratio d = log(head / base) of two measurements taken under the same host conditions, so a host speed
# jump between blocks cancels. Per process pair the d are winsorized (clipped to median ± WINSOR robust sds of the
# whole comparison, so one stalled call cannot move the mean) and averaged separately over the blocks where base ran
# first and those where head ran first (a penalty for running second cancels); the pairs' values are independent
# (fresh processes, fresh placement), so a Student t interval over them holds the variation between processes.

WINSOR = 3.0  # robust standard deviations (1.4826 MAD) a block log-ratio may lie from the comparison's median
INTERIM_LEVEL = 0.999  # before the last look a case is decided only when this interval clears the limit
LEVEL = 0.95  # the interval reported, and the one that decides at the last look
# No look before this many process pairs may stop a case early (decided, decided_cpu, precision): three to five pairs
# that happen to agree give intervals of ±0.2–1 pp that the next review's estimate lands outside (issue 40, 3:
# benchmarks/README.md, "End-to-end reviews on the idle runner"); the caps still stop a case below it.
EARLY_MIN_PAIRS = 6


def _betacf(a: float, b: float, x: float) -> float:
    """The continued fraction of the regularized incomplete beta function (modified Lentz)."""
    tiny, qab, qap, qam = 1e-300, a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        m2 = 2 * m
        for aa in (m * (b - m) * x / ((qam + m2) * (a + m2)), -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))):
            d = 1.0 + aa * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + aa / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-14:
            break
    return h


def _betainc(a: float, b: float, x: float) -> float:
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def t_cdf(t: float, df: float) -> float:
    """P(T <= t) for Student's t with `df` degrees of freedom."""
    tail = 0.5 * _betainc(df / 2.0, 0.5, df / (df + t * t))
    return 1.0 - tail if t > 0 else tail


@cache
def t_quantile(p: float, df: float) -> float:
    """The p-quantile of Student's t (bisection on t_cdf; numpy has no t.ppf and opgate needs no scipy)."""
    if not 0.0 < p < 1.0 or df <= 0:
        raise ValueError("need 0 < p < 1 and df > 0")
    if p < 0.5:
        return -t_quantile(1.0 - p, df)
    low, high = 0.0, 1.0
    while t_cdf(high, df) < p:
        high *= 2.0
    for _ in range(200):
        mid = (low + high) / 2.0
        low, high = (mid, high) if t_cdf(mid, df) < p else (low, mid)
        if high - low < 1e-12 * max(1.0, high):
            break
    return (low + high) / 2.0


MAX_LOG = 700.0  # exp(700) ~ 1e304: below float's limit


class Paired(NamedTuple):
    """A paired comparison: the mean log-ratio over process pairs, its standard error and degrees of freedom."""

    centre: float  # mean over pairs of their balanced, winsorized block log-ratios
    se: float
    df: int
    pairs: int
    blocks: int

    @property
    def ratio(self) -> float:
        return math.exp(self.centre)

    def interval(self, level: float = LEVEL) -> tuple[float, float]:
        """(low, high) of head/base at `level` (two-sided Student t over the pairs)."""
        half = t_quantile(0.5 + level / 2.0, self.df) * self.se
        return _exp(self.centre - half), _exp(self.centre + half)


def _exp(x: float) -> float:
    """exp, saturating: two pairs of near-zero CPU blocks give a half-width beyond exp's range (an interval of
    0..inf, undecided), never an OverflowError that stops the judge."""
    return math.exp(max(-MAX_LOG, min(MAX_LOG, x))) if not math.isnan(x) else math.nan


def base_first(pair: int, block: int) -> bool:
    """Whether base ran first in block `block` of pair `pair` (the judge's order: A B, B A, … shifted per pair)."""
    return (pair + block) % 2 == 0


def paired(
    head: Sequence[Sequence[float]],
    base: Sequence[Sequence[float]],
    firsts: Sequence[Sequence[bool]] | None = None,
) -> Paired:
    """The paired statistic over process pairs; `head[p][b]` and `base[p][b]` were timed in the same block.

    `firsts[p][b]`: base ran first in that block (default: the judge's alternation). With one process pair the
    blocks themselves are the units (the interval then knows nothing of the variation between processes)."""
    if (
        len(head) != len(base)
        or not head
        or any(len(h) != len(b) or len(h) < 2 for h, b in zip(head, base, strict=True))
    ):
        raise ValueError("need process pairs of at least two blocks, head and base timed in the same blocks")
    d = [
        np.log(np.asarray(h, dtype=np.float64) / np.asarray(b, dtype=np.float64))
        for h, b in zip(head, base, strict=True)
    ]
    order = firsts if firsts is not None else [[base_first(p, b) for b in range(len(x))] for p, x in enumerate(d)]
    if len(order) != len(d) or any(len(o) != len(x) for o, x in zip(order, d, strict=True)):
        raise ValueError("the block order must name every block")
    flat = np.concatenate(d)
    centre = float(np.median(flat))
    spread = 1.4826 * float(np.median(np.abs(flat - centre)))
    low, high = (centre - WINSOR * spread, centre + WINSOR * spread) if spread > 0 else (-np.inf, np.inf)
    clipped = [np.clip(x, low, high) for x in d]
    if len(d) == 1:
        values = clipped[0]
    else:
        values = np.array([_balanced(x, np.asarray(o, dtype=bool)) for x, o in zip(clipped, order, strict=True)])
    n = len(values)
    se = float(np.std(values, ddof=1)) / math.sqrt(n)
    return Paired(centre=float(np.mean(values)), se=se, df=n - 1, pairs=len(d), blocks=int(flat.size))


def _balanced(d: np.ndarray, base_first_: np.ndarray) -> float:
    """The mean of the blocks where base ran first and the mean of those where head did, averaged."""
    if base_first_.all() or not base_first_.any():
        return float(d.mean())
    return (float(d[base_first_].mean()) + float(d[~base_first_].mean())) / 2.0


def decide(p: Paired, max_regression_pct: float, *, last: bool) -> LatencyVerdict:
    """The sequential verdict after one look: before the last look only the INTERIM_LEVEL interval decides (so the
    looks spend almost none of the error rate), at the last look the LEVEL interval does (Haybittle-Peto)."""
    low, high = p.interval(LEVEL if last else INTERIM_LEVEL)
    return latency_verdict(low, high, max_regression_pct)


EarlyStop = Literal["decided", "decided_cpu"]


def early_stop(wall: Paired, cpu: Paired | None, max_regression_pct: float) -> EarlyStop | None:
    """Whether an interim look (not the last) may stop, and on what, where the gate would decide the same way on the
        same blocks (bot/verdict/gate_latency.py `cpu_time_verdict`, `cpu_time_decides`); `cpu`: None on a GPU case.
    Never before EARLY_MIN_PAIRS process pairs.

        `decided`: the wall time's INTERIM_LEVEL interval clears the limit and the CPU time's does too (a CPU time
        decisively above the limit fails a head whatever its clock, so a wall-time pass alone is not final).
        `decided_cpu`: the CPU time's INTERIM_LEVEL interval clears the limit while the wall time's does not — above it
        the gate fails whatever the clock says; wholly within it the gate passes a straddling wall time, so the stop
        needs the wall time unable to decide against it: its 95 % interval not above the limit and its estimate at or
        below it (a wall time leaning over the limit is measured on, never cut short on CPU time)."""
    if wall.pairs < EARLY_MIN_PAIRS:
        return None
    walls = decide(wall, max_regression_pct, last=False)
    cpus = decide(cpu, max_regression_pct, last=False) if cpu is not None else None
    if walls != "inconclusive" and cpus != "inconclusive":
        return "decided"
    if cpus == "fail":
        return "decided_cpu"
    limit = 1.0 + max_regression_pct / 100.0
    if cpus == "pass" and latency_verdict(*wall.interval(LEVEL), max_regression_pct) != "fail" and wall.ratio <= limit:
        return "decided_cpu"
    return None
