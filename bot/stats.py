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


def median_ci_halfwidth_pct(samples: Sequence[float], *, resamples: int = 500, seed: int = DEFAULT_SEED) -> float:
    """Half-width of the bootstrap 95% CI of the median, in percent of the median."""
    rng = np.random.default_rng(seed)
    meds = _boot_medians(samples, resamples, rng)
    low, high = np.quantile(meds, [0.025, 0.975])
    return float((high - low) / 2.0 / median(samples) * 100.0)


LatencyVerdict = Literal["pass", "fail", "inconclusive"]


def latency_verdict(ci_low: float, ci_high: float, max_regression_pct: float) -> LatencyVerdict:
    """Fail only when the whole CI is above the threshold; pass only when it is all below."""
    limit = 1.0 + max_regression_pct / 100.0
    if ci_low > limit:
        return "fail"
    if ci_high <= limit:
        return "pass"
    return "inconclusive"
