"""Implausible results (bot/verdict/plausible.py): a head more than max_speedup times faster than base is one line
for a person to verify, naming the case, both p50s and the limit; a case without both timings is not judged."""

from __future__ import annotations

from bot.models.report import CaseReport
from bot.verdict.plausible import IMPLAUSIBLE, speedup_findings
from bot.wording.messages import render


def implausible_speedups(cases: list[CaseReport], max_speedup: float) -> list[str]:
    """One line per case whose head p50 beats base's by more than `max_speedup` times, as the comment writes it."""
    return [render(f) for f in speedup_findings(cases, max_speedup)]


def timed(name: str, head_ms: float | None, base_ms: float | None) -> CaseReport:
    return CaseReport(name=name, tolerance=1e-2, verdict="pass", p50_ms=head_ms, base_p50_ms=base_ms)


def test_a_head_far_faster_than_base_is_flagged_with_its_numbers() -> None:
    cases = [timed("square_512", 0.1, 0.5), timed("ragged", 0.2, 0.5)]  # 5x and 2.5x faster
    assert implausible_speedups(cases, 3.0) == [
        f"{IMPLAUSIBLE}: square_512 head p50 0.1 ms vs base 0.5 ms (5.0x faster, above max_speedup 3x)"
    ]
    assert len(implausible_speedups(cases, 2.0)) == 2  # the repository may lower the limit
    assert implausible_speedups([timed("exact", 0.25, 0.75)], 3.0) == []  # exactly the limit is believed


def test_a_case_without_both_timings_is_not_judged() -> None:
    cases = [timed("no_head", None, 0.5), timed("no_base", 0.1, None), timed("zero", 0.0, 0.5)]
    assert implausible_speedups(cases, 3.0) == []
