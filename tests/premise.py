"""A test whose premise is a measured direction ("head is 8 % slower") checks that premise first, outside opgate, in
the same run (benchmarks/planted.py `measure`): where this machine cannot show it, the test says so and skips, naming
the figures, and never asserts what opgate makes of a change that is not what the test says it is."""

from __future__ import annotations

import pytest

from benchmarks.planted import GEMM, SHAPES, Effect, cpu_model, measure, twice

__all__ = ["BODY", "SHAPES", "planted", "twice"]

BODY = GEMM.read_text()  # deepgemm_tile's CPU body, as the repository has it


def planted(head_body: str, case: str, *, above: float | None = None, below: float | None = None,
            base_body: str | None = None) -> Effect:  # fmt: skip
    """Head's deepgemm_tile CPU body against base's (the repository's by default) on `case`: skip unless the 95 %
    interval of its CPU time per call or of its clock lies wholly above `above` % (a slowdown) or wholly below `below` %
    (a speed-up). Either figure: the body is single-threaded, so both measure its work; another test's load widens the
    clock's interval more, and on a quiet machine the clock's was seen the narrower (8 % planted: wall +8.1 %
    [+7.9, +8.4], CPU +6.1 % [+0.7, +11.7])."""
    effect = measure(BODY if base_body is None else base_body, head_body, SHAPES[case], pairs=8)
    shown = any((above is None or i.lo > above) and (below is None or i.hi < below) for i in (effect.cpu, effect.wall))
    if not shown:
        want = f"above {above:+g} %" if above is not None else f"below {below:+g} %"
        pytest.skip(f"premise not shown on this machine ({cpu_model()}): the planted change measured {effect} on "
                    f"{case} outside opgate, not wholly {want}")  # fmt: skip
    print(f"premise: {case} {effect} outside opgate ({cpu_model()})")
    return effect
