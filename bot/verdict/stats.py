"""Timing statistics: medians, bootstrap confidence intervals, the latency verdict (pure)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np

DEFAULT_RESAMPLES = 2000
DEFAULT_SEED = 20261130


def median(samples: Sequence[float]) -> float:
    return float(np.median(np.asarray(samples, dtype=np.float64)))


def _boot_medians(samples: Sequence[float], resamples: int, rng: np.random.Generator) -> np.ndarray:
    x = np.asarray(samples, dtype=np.float64)
    idx = rng.integers(0, len(x), size=(resamples, len(x)))
    return np.median(x[idx], axis=1)


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
    """head/base latency ratio over process pairs, with a CI that holds the variation between processes.

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
