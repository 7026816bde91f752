"""Verdicts folded again (pure): one kernel's architecture parts of the CI fan-out into one report, and the review's
verdict once coverage is known."""

from __future__ import annotations

from bot.models.finding import Outcome
from bot.models.report import VERDICT_ORDER, CaseReport, Coverage, KernelReport, KernelVerdict, ReportVerdict
from bot.verdict.findings import stated
from bot.verdict.gate import overall


def _elsewhere(c: CaseReport) -> bool:
    """A case its job skipped because another architecture's job runs it (`change.other_job`)."""
    return c.verdict == "skipped" and any(f.key == "run.other_job" for f in c.findings)


def combine(parts: list[KernelReport]) -> KernelReport:
    """One kernel's report from its architecture jobs' parts (the first architecture's part first): each case
    from the job that ran it, builds and resource checks from the first part, the verdict folded again from
    their findings as kernel_verdict folds it. Its findings are what the parts state, each once (a "no case ran" of
    one job goes when another ran one); its lines are written from them with report.json."""
    first = parts[0]
    cases: dict[str, CaseReport] = {}
    for k in parts:
        for c in k.cases:
            if c.name not in cases or (_elsewhere(cases[c.name]) and not _elsewhere(c)):
                cases[c.name] = c
    ran = any(c.verdict != "skipped" for c in cases.values())
    findings = list({repr(f.model_dump()): f for k in parts for f in stated(k)}.values())  # not JSON: lone surrogates
    if ran:
        findings = [f for f in findings if f.key != "coverage.no_case_ran"]
    failing = [k.verdict for k in parts if k.verdict in ("error", "fail")]
    verdict: KernelVerdict
    if failing:
        verdict = min(failing, key=VERDICT_ORDER.index)
    elif any(f.outcome == Outcome.accept for f in findings):
        verdict = "needs_accept"
    elif any(f.outcome == Outcome.undecided for f in findings):
        verdict = "undecided"
    else:
        verdict = "pass" if any(k.verdict != "skipped" for k in parts) else "skipped"
    return first.model_copy(
        update={
            "changed": any(k.changed for k in parts),
            "verdict": verdict,
            **{name: [] for name in ("reasons", "undecided", "accept_needed", "notes")},  # read into the findings
            "findings": findings,
            "cases": list(cases.values()),
        }
    )


def with_coverage(verdict: ReportVerdict, cov: Coverage | None) -> ReportVerdict:
    """The review's verdict once coverage is known: nothing passes while kernel sources go unjudged (changed
    kernel sources no kernel.toml claims make a pass, an undecided or a needs_accept a fail)."""
    if verdict in ("pass", "undecided", "needs_accept") and cov is not None and cov.kernel_sources.total:
        return "fail"
    return verdict


def review_verdict(kernels: list[KernelReport], cov: Coverage | None, *, stopped: bool = False) -> ReportVerdict:
    """The review's verdict: its worst kernel (`overall`), and nothing passes while kernel sources go unjudged; a
    review that `stopped` before it judged everything (bad input, a service, an internal error) is an error."""
    return "error" if stopped else with_coverage(overall(kernels), cov)
