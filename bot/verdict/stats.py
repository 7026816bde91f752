"""Timing statistics: the paired block statistic, Student t intervals, the sequential latency verdict (pure)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import cache
from typing import Literal, NamedTuple

import numpy as np

DEFAULT_RESAMPLES = 2000
DEFAULT_SEED = 20261130


def median(samples: Sequence[float]) -> float:
    return float(np.median(np.asarray(samples, dtype=np.float64)))


def _boot_medians(samples: Sequence[float], resamples: int, rng: np.random.Generator) -> np.ndarray:
    x = np.asarray(samples, dtype=np.float64)
    idx = rng.integers(0, len(x), size=(resamples, len(x)))
    return np.median(x[idx], axis=1)


# -- the statistic before issue 25 (kept for benchmarks/gate_power.py, which reports both from the same samples) --


def ratio_ci(
    head: Sequence[float],
    base: Sequence[float],
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    level: float = 0.95,
) -> tuple[float, float, float]:
    """median(head)/median(base) and its percentile-bootstrap CI: (ratio, low, high)."""
    if len(head) < 2 or len(base) < 2:
        raise ValueError("need at least two samples on each side")
    rng = np.random.default_rng(seed)
    ratios = _boot_medians(head, resamples, rng) / _boot_medians(base, resamples, rng)
    alpha = (1.0 - level) / 2.0
    low, high = np.quantile(ratios, [alpha, 1.0 - alpha])
    return median(head) / median(base), float(low), float(high)


LatencyVerdict = Literal["pass", "fail", "inconclusive"]


def latency_verdict(ci_low: float, ci_high: float, max_regression_pct: float) -> LatencyVerdict:
    """Fail only when the whole CI is above the threshold; pass only when it is all below."""
    limit = 1.0 + max_regression_pct / 100.0
    if ci_low > limit:
        return "fail"
    if ci_high <= limit:
        return "pass"
    return "inconclusive"


# Two-sided 97.5 % quantiles of Student's t for 1..30 degrees of freedom (numpy has no t.ppf).
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145,
         2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048,
         2.045, 2.042)  # fmt: skip


def small_sample_factor(n: int) -> float:
    """How much wider a percentile-bootstrap interval over `n` groups must be to cover like a t interval.

    The bootstrap of a mean over n groups behaves like a z interval with the biased (1/n) variance; the
    t interval uses t_{n-1} and the 1/(n-1) variance. The ratio of the two is this factor (→ 1 as n grows).
    """
    if n < 2:
        raise ValueError("need at least two groups")
    t = _T975[n - 2] if n - 1 <= len(_T975) else 1.96
    return t / 1.96 * float(np.sqrt(n / (n - 1)))


def hierarchical_ratio_ci(
    head: Sequence[Sequence[float]],
    base: Sequence[Sequence[float]],
    *,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
    level: float = 0.95,
) -> tuple[float, float, float]:
    """head/base latency ratio over process pairs, with a CI that holds the variation between processes (the gate's
    statistic before `paired`: it ignores which blocks were timed together and counts the variance within a pair twice).

    `head[p]` and `base[p]` are the samples of the p-th process pair (measured interleaved). The statistic
    is the geometric mean over pairs of median(head_p)/median(base_p). The bootstrap resamples pairs, then
    the samples within each chosen pair; the interval is widened by `small_sample_factor` for few pairs.
    Returns (ratio, low, high).
    """
    n = len(head)
    if n != len(base) or n < 2 or any(len(h) < 2 or len(b) < 2 for h, b in zip(head, base, strict=True)):
        raise ValueError("need at least two process pairs with at least two samples on each side")
    rng = np.random.default_rng(seed)
    # Within-process bootstrap: one row of resampled log-ratios per pair.
    within = np.stack(
        [
            np.log(_boot_medians(h, resamples, rng) / _boot_medians(b, resamples, rng))
            for h, b in zip(head, base, strict=True)
        ]
    )
    observed = np.log(np.array([median(h) / median(b) for h, b in zip(head, base, strict=True)]))
    pairs = rng.integers(0, n, size=(resamples, n))  # which pairs each bootstrap replicate draws
    column = rng.integers(0, resamples, size=(resamples, n))  # and which within-pair replicate of each
    stats = within[pairs, column].mean(axis=1)
    alpha = (1.0 - level) / 2.0
    low, high = np.quantile(stats, [alpha, 1.0 - alpha])
    centre = float(observed.mean())
    factor = small_sample_factor(n)
    low, high = centre - (centre - low) * factor, centre + (high - centre) * factor
    return float(np.exp(centre)), float(np.exp(low)), float(np.exp(high))


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
        return math.exp(self.centre - half), math.exp(self.centre + half)


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
