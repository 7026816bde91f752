"""The resource gate's findings as the lines a kernel states (the tests read them as a reviewer does)."""

from __future__ import annotations

from bot.config.manifest import Constraints
from bot.models.report import Resource
from bot.verdict.gate_resources import resource_findings
from bot.wording.messages import render


def resource_reasons(
    head: list[Resource],
    base: list[Resource],
    constraints: Constraints,
    threads: dict[str, int] | None = None,
    arch: str = "sm_90a",
) -> tuple[list[str], list[str]]:
    """(failures, notes) of `resource_findings`, as lines."""
    failures, notes = resource_findings(head, base, constraints, threads, arch)
    return [render(f) for f in failures], [render(n) for n in notes]
