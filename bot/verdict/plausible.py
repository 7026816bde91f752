"""Implausible results: a head far faster than base on a case is flagged for a person, never celebrated (pure).

An optimiser aimed at the judge finds its holes (2025's reward-hacked kernels); KernelBench caps the speedup
it believes. Here a case whose head p50 is more than `max_speedup` times faster than base's (default 3x,
`[constraints]` or the repository's `[thresholds]`) puts "implausible speedup — verify" into the kernel's
`accept_needed`: the verdict is needs_accept until someone with write access checks it and says /accept.
"""

from __future__ import annotations

from bot.models.report import CaseReport

IMPLAUSIBLE = "implausible speedup — verify"


def implausible_speedups(cases: list[CaseReport], max_speedup: float) -> list[str]:
    """One line per case whose head p50 beats base's by more than `max_speedup` times."""
    lines = []
    for c in cases:
        if c.p50_ms is None or c.base_p50_ms is None or c.p50_ms <= 0:
            continue
        speedup = c.base_p50_ms / c.p50_ms
        if speedup > max_speedup:
            lines.append(
                f"{IMPLAUSIBLE}: {c.name} head p50 {c.p50_ms:.3g} ms vs base {c.base_p50_ms:.3g} ms "
                f"({speedup:.1f}x faster, above max_speedup {max_speedup:g}x)"
            )
    return lines
