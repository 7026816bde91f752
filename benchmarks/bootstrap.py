"""The latency statistic the gate used before issue 25, kept for the benchmarks that compare it with the gate's
(benchmarks/gate_power.py judges the same samples with both; benchmarks/kernels_vs_torch.py gives its interval).

`ratio_ci`: median(head)/median(base) and a percentile-bootstrap interval over pooled samples;
`hierarchical_ratio_ci`: the geometric mean over process pairs of median(head_p)/median(base_p), a hierarchical
bootstrap (pairs, then samples within them) widened by `small_sample_factor` for few pairs. The gate itself uses
`bot.verdict.stats.paired`; the Student t quantiles here are that module's.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from bot.verdict.stats import median, t_quantile

DEFAULT_RESAMPLES = 2000
DEFAULT_SEED = 20261130


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


def small_sample_factor(n: int) -> float:
    """How much wider a percentile-bootstrap interval over `n` groups must be to cover like a t interval.

    The bootstrap of a mean over n groups behaves like a z interval with the biased (1/n) variance; the
    t interval uses t_{n-1} and the 1/(n-1) variance. The ratio of the two is this factor (→ 1 as n grows).
    """
    if n < 2:
        raise ValueError("need at least two groups")
    return t_quantile(0.975, n - 1) / 1.96 * float(np.sqrt(n / (n - 1)))


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
