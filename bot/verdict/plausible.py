"""Implausible results: a head far faster than base on a case is flagged for a person, never celebrated (pure).

An optimiser aimed at the judge finds its holes (2025's reward-hacked kernels); KernelBench caps the speedup
it believes. Here a case whose head p50 is more than `max_speedup` times faster than base's (default 3x,
`[constraints]` or the repository's `[thresholds]`) puts "implausible speedup — verify" into the kernel's
`accept_needed`: the verdict is needs_accept until someone with write access checks it and says /accept.
"""

from __future__ import annotations

from bot.models.finding import Finding, Gate, Outcome
from bot.models.report import CaseReport
from bot.wording.messages import LABELS

IMPLAUSIBLE = LABELS["implausible_speedup"]  # "implausible speedup — verify"


def speedup_findings(cases: list[CaseReport], max_speedup: float) -> list[Finding]:
    """One finding per case whose head p50 beats base's by more than `max_speedup` times (needs a person)."""
    found = []
    for c in cases:
        if c.p50_ms is None or c.base_p50_ms is None or c.p50_ms <= 0:
            continue
        speedup = c.base_p50_ms / c.p50_ms
        if speedup > max_speedup:
            params = {"head": f"{c.p50_ms:.3g}", "base": f"{c.base_p50_ms:.3g}", "speedup": f"{speedup:.1f}"}
            found.append(
                Finding(
                    gate=Gate.plausibility,
                    outcome=Outcome.accept,
                    key="plausibility.speedup",
                    case=c.name,
                    params={**params, "limit": f"{max_speedup:g}"},
                    value=speedup,
                    limit=max_speedup,
                    unit="x",
                )
            )
    return found
