"""What `opgate check` decides (pure): head's compile-only resources held to the manifest's limits alone (no base),
and the dry run's smallest case against the reference."""

from __future__ import annotations

from bot.config.manifest_tables import Case, Constraints
from bot.models.judging import CaseRun
from bot.models.report import ResourceCheckReport
from bot.verdict.compile_errors import advised, describe, torch_cuda
from bot.verdict.gate import case_verdict
from bot.verdict.gate_resources import resource_findings
from bot.wording.messages import ENGLISH, phrase, render

# How a review will treat each of them: held against base's same function (docs/review.md, "What base already has").
IN_A_REVIEW = (
    "in a review, each line above is held against base: noted 'in base too' where base has it alike, failed only where "
    "a change makes or worsens it"
)


def resource_failures(check: ResourceCheckReport, constraints: Constraints) -> list[str]:
    """Why head's figures on `check.arch` fail on their own: each launch error, then each resource over a limit
    (spills, registers, shared memory, occupancy), as the review's gate words them without its "resource:"; `opgate
    check` says once after them how a review will treat them (`IN_A_REVIEW`)."""
    failures, _ = resource_findings(check.head, [], constraints, check.threads, check.arch)
    return [*(phrase(p) for p in check.launch_errors), *(ENGLISH.text(f) for f in failures)]


def runner_lacks(check: ResourceCheckReport) -> str | None:
    """Why this runner cannot compile the step's units whatever the kernel does — its torch is the CPU build, which
    lacks torch's CUDA headers (`compile_errors.torch_cuda`) —, naming the header, the #include and the fix; None for
    any other failure (the kernel's, which the step fails on)."""
    first = next((e for e in check.errors if e.kind != "manifest"), None)
    if first is None or not torch_cuda(first) or (fix := advised(first)) is None:
        return None
    return f"{describe(first)}; {phrase(fix)}"


def dry_case(case: Case, constraints: Constraints, run: CaseRun) -> tuple[bool, str]:
    """(failed, the line) of the dry run's one compared case: the gate's reasons, or that entry and reference agree
    within the case's tolerance."""
    report = case_verdict(case, constraints, run)
    if report.verdict in ("fail", "error"):
        return True, f"{case.name}: {'; '.join(render(f, case=False) for f in report.findings)}"
    err = "?" if report.max_abs_err is None else f"{report.max_abs_err:.3g}"
    return False, f"{case.name} (the smallest): entry and reference agree, max_abs_err {err} ≤ {report.tolerance:g}"
