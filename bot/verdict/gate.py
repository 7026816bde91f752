"""The gate: pure functions from measured evidence to verdicts and reasons. Each gate has its module (correctness,
latency, resources, build: `gate_*.py`); here a case's verdict and a kernel's are folded from their findings."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict

from bot.config.manifest_tables import Case, Constraints
from bot.models.finding import Finding, Gate, Outcome, Phrase
from bot.models.judging import CaseRun, Check
from bot.models.report import (
    CaseReport,
    CaseStatus,
    KernelReport,
    ProbeReport,
    ReportVerdict,
)
from bot.verdict.compile_errors import described
from bot.verdict.findings import BASE, HEAD, _finding, add_case, add_kernel, case_stated, verbatim
from bot.verdict.gate_build import _compile_findings, _judge_resources
from bot.verdict.gate_correctness import base_correct, check_findings, probe_findings, small_shape_findings
from bot.verdict.gate_latency import _judge_latency
from bot.verdict.plausible import speedup_findings as implausible_speedups


class Policy(BaseModel):
    """How the gate treats a latency comparison whose CI straddles the threshold."""

    model_config = ConfigDict(frozen=True)

    inconclusive: Literal["neutral", "fail"] = "neutral"


def case_verdict(
    case: Case, constraints: Constraints, run: CaseRun | None, skip_reason: str | Phrase | Finding = ""
) -> CaseReport:
    """One case: correctness and stability of head (random inputs, then boundary probes), then its latency.
    Without a run it is skipped, for `skip_reason` (a finding of its own, a message of the catalog, or a line made
    elsewhere)."""
    tol = case.limits(constraints).max_abs_err
    report = CaseReport(name=case.name, device=case.device, tolerance=tol, verdict="pass")
    if run is None:
        report.status, report.verdict = CaseStatus.skipped, "skipped"
        if isinstance(skip_reason, Finding):
            why = skip_reason
        elif isinstance(skip_reason, Phrase):
            why = Finding(
                gate=Gate.run, outcome=Outcome.undecided, key=skip_reason.key, params=dict(skip_reason.params)
            )
        elif skip_reason:
            why = _finding(Gate.run, "run.skipped", Outcome.undecided, reason=skip_reason)
        else:
            why = _finding(Gate.run, "run.not_run", Outcome.undecided)
        add_case(report, why)
        return report
    head = run.checks.get(HEAD)
    base = run.checks.get(BASE)
    probes = run.probes.get(HEAD, [])
    report.base_correct = base_correct(run, tol)
    if head is not None:
        report.max_abs_err, report.nan_inf = head.max_abs_err, head.nan_inf
        report.outputs = list(head.outputs)
    if probes:  # the headline is the worst error the judge saw on this case, probes included
        report.max_abs_err = max([report.max_abs_err or 0.0, *(p.max_abs_err or 0.0 for p in probes)])
        report.nan_inf = report.nan_inf or any(p.nan_inf for p in probes)
    report.probes = [_probe_report(p, tol) for p in probes]
    report.probe_count, report.probe_seconds, report.case_seconds = run.probe_count, run.probe_seconds, run.case_seconds
    report.seed = run.seed
    report.sandbox_cpu = dict(run.cpu)
    report.other_cores = run.other_cores
    report.judge_seconds = dict(run.phases)
    said = {"detail": [run.detail or Phrase.as_written("")]}  # why, through the catalog; a worker's words verbatim
    if run.status in (CaseStatus.timeout, CaseStatus.crashed):
        report.status, report.verdict = run.status, "error"
        side = {"who": run.failed_label or "the runner", "status": run.status.value}
        failed = Finding(gate=Gate.run, outcome=Outcome.error, key="run.side_failed", params=side, phrases=said)
        add_case(report, failed)
        return report
    if run.status == CaseStatus.tampered:
        report.status, report.verdict = run.status, "error"
        rejected = Finding(gate=Gate.measurement, outcome=Outcome.error, key="measurement.rejected", phrases=said)
        add_case(report, rejected)
        return report
    if head is None:
        report.status, report.verdict = CaseStatus.crashed, "error"
        add_case(report, _finding(Gate.run, "run.no_result", Outcome.error))
        return report
    if head.error:
        report.status, report.verdict = CaseStatus.incorrect, "fail"
        add_case(report, _finding(Gate.correctness, "correctness.bad_output", side=HEAD, error=head.error))
        return report
    for check in (head, *probes):
        if findings := check_findings(check, tol):
            report.status, report.verdict = CaseStatus.incorrect, "fail"
            for f in findings:
                add_case(report, f)
            if report.failure is None and check.failure is not None:
                report.failure = check.failure.model_copy(update={"probe": check.probe})
    if report.verdict == "fail":
        return report
    if (spot := run.spots.get(HEAD)) is not None:
        report.spot_checks = spot.checked
        report.max_abs_err = max(report.max_abs_err or 0.0, spot.worst_abs_err)
        if spot.failed:
            report.status, report.verdict = CaseStatus.incorrect, "fail"
            spots = _finding(
                Gate.correctness,
                "correctness.spot_checks",
                failed=spot.failed,
                checked=spot.checked,
                first=str(spot.first_failure),
            )
            add_case(report, spots)
            return report
    base_spot = run.spots.get(BASE)
    if spot is not None and spot.scratch_left:  # each call got zeroed scratch: one that leaves it dirty breaks the next
        left: dict[str, str | int] = {
            "left": spot.scratch_left,
            "checked": spot.scratch_checked,
            "first": str(spot.scratch_first),
        }
        if base_spot is not None and base_spot.scratch_left:  # base's own habit: reported, never failed on this change
            add_case(report, _finding(Gate.correctness, "correctness.scratch_left_base", Outcome.note, **left))
        else:
            report.status, report.verdict = CaseStatus.incorrect, "fail"
            add_case(report, _finding(Gate.correctness, "correctness.scratch_left", Outcome.fail, **left))
            return report
    base_wrong = [c for c in (base, *run.probes.get(BASE, [])) if c is not None and check_findings(c, tol)]
    comparable = not (base_wrong or (base_spot is not None and base_spot.failed))
    if not comparable:
        probe = next((c.probe for c in base_wrong if c.probe), None)
        if probe and base is not None and not check_findings(base, tol):
            add_case(report, _finding(Gate.correctness, "correctness.base_incorrect_probe", Outcome.note, probe=probe))
        else:
            add_case(report, _finding(Gate.correctness, "correctness.base_incorrect", Outcome.note))
    _judge_latency(report, run, constraints.max_regression_pct, with_base=comparable)
    return report


def _probe_report(check: Check, tol: float) -> ProbeReport:
    return ProbeReport(
        name=check.probe or "",
        verdict="fail" if check_findings(check, tol) else "pass",
        max_abs_err=check.max_abs_err,
        nan_inf=check.nan_inf,
        error=check.error,
        outputs=list(check.outputs),
        failure=check.failure.model_copy(update={"probe": check.probe}) if check.failure else None,
    )


_ORDER = {"error": 3, "fail": 2, "inconclusive": 1, "pass": 0, "skipped": -1}


def _of_case(c: CaseReport, outcome: Outcome) -> list[Finding]:
    """The case's findings as its kernel states them (`case_stated`: a line with no finding of its own, as written)."""
    found = case_stated(c)
    if not found and c.verdict == "inconclusive":
        found = [_finding(Gate.performance, "performance.latency_undecided", outcome)]
    elif not found:
        found = [_finding(Gate.run, "run.verdict_status", outcome, verdict=c.verdict, status=c.status.value)]
    return [f.model_copy(update={"outcome": outcome, "case": c.name}) for f in found]


def kernel_verdict(
    kernel: KernelReport,
    static_findings: Sequence[str | Finding],
    cases: list[CaseReport],
    constraints: Constraints,
    policy: Policy,
) -> KernelReport:
    """Fold static findings, builds, resources and cases into the kernel's verdict.

    A failing gate fails it; otherwise whatever only a person can accept makes it `needs_accept`, and whatever
    was not decided (a latency interval straddling the limit under the neutral policy, no case that could run,
    what the review already found undecided) makes it `undecided`: a pass is only what was judged. The verdict is
    its findings' outcomes; the lines they add are for the outputs."""
    for s in static_findings:
        add_kernel(kernel, s if isinstance(s, Finding) else verbatim(s, Gate.static, Outcome.fail))
    kernel.cases = cases
    for f in (*probe_findings(cases), *small_shape_findings(cases)):
        add_kernel(kernel, f)
    if static_findings:
        kernel.verdict = "fail"
        return kernel
    if kernel.build is not None and not kernel.build.ok:
        base_failed = kernel.base_build is not None and not kernel.base_build.ok
        base_errors = kernel.base_build.errors if kernel.base_build is not None else []
        step = Phrase(key="compile.step_build", params={"device": kernel.build.device})
        built = _compile_findings(step, "build.failed", kernel.build.errors, base_failed, base_errors)
        for f in built:
            add_kernel(kernel, f)
        if any(f.outcome == Outcome.fail for f in built):
            kernel.verdict = "fail"
            return kernel
    elif kernel.base_build is not None and not kernel.base_build.ok:
        if kernel.base_build.errors:
            error = {"error": [described(kernel.base_build.errors[0])]}
            found = Finding(gate=Gate.build, outcome=Outcome.note, key="build.base_fails", phrases=error)
        else:
            found = _finding(Gate.build, "build.base_fails_plain", Outcome.note)
        add_kernel(kernel, found)
    _judge_resources(kernel, constraints)
    worst = max((c.verdict for c in cases), key=_ORDER.__getitem__, default="skipped")
    deciding = ("fail", "error", "inconclusive") if policy.inconclusive == "fail" else ("fail", "error")
    for c in cases:
        if c.verdict in deciding:  # the case's own findings, each naming the case once (never "case: fail")
            outcome = Outcome.error if c.verdict == "error" else Outcome.fail
            for f in _of_case(c, outcome):
                add_kernel(kernel, f)
        elif c.verdict == "inconclusive":
            for f in _of_case(c, Outcome.undecided):
                add_kernel(kernel, f)
    if _found(kernel, Outcome.fail, Outcome.error) and worst in ("pass", "inconclusive", "skipped"):
        worst = "fail"
    if worst in ("fail", "error"):
        kernel.verdict = worst  # type: ignore[assignment]
        return kernel
    if not any(c.verdict != "skipped" for c in cases):
        if not cases and kernel.resource_check is not None and kernel.resource_check.status == "ok":
            add_kernel(kernel, _finding(Gate.coverage, "resources.only", Outcome.undecided))  # its one gate passed
        elif cases or not _found(kernel, Outcome.undecided):  # undecided for its own reason: no "no case" besides
            if cases:
                found = Finding(
                    gate=Gate.coverage,
                    outcome=Outcome.undecided,
                    key="coverage.no_case_ran",
                    phrases={"summary": not_run_phrases(cases)},
                )
            else:
                found = _finding(Gate.coverage, "coverage.no_cases", Outcome.undecided)
            add_kernel(kernel, found)
    for f in implausible_speedups(cases, constraints.max_speedup):
        add_kernel(kernel, f)
    if _found(kernel, Outcome.accept):
        kernel.verdict = "needs_accept"
    elif _found(kernel, Outcome.undecided):
        kernel.verdict = "undecided"
    else:
        kernel.verdict = "pass"
    return kernel


def _found(kernel: KernelReport, *outcomes: Outcome) -> bool:
    """Whether a finding on the kernel has one of `outcomes` (the fold decides from findings, never from lines)."""
    return any(f.outcome in outcomes for f in kernel.findings)


def not_run_phrases(cases: list[CaseReport]) -> list[Phrase]:
    """The cases that did not run ("2 cuda cases (needs a CUDA GPU; …)"): one phrase per reason, its count and
    devices, the reason as the cases' findings say it (a case without findings: its reasons as written)."""
    by_reason: dict[tuple[str, ...], tuple[list[Phrase], list[str]]] = {}  # one group per reason, as data
    for c in cases:
        if c.verdict == "skipped":
            made = [Phrase(key=f.key, params=f.params, phrases=f.phrases) for f in case_stated(c)]
            made = made or [Phrase(key="run.not_run")]
            by_reason.setdefault(tuple(p.model_dump_json() for p in made), (made, []))[1].append(c.device)
    return [
        Phrase(
            key="coverage.case_group" if len(devices) == 1 else "coverage.cases_group",
            params={"count": len(devices), "devices": "/".join(dict.fromkeys(devices))},
            phrases={"why": why},
        )
        for why, devices in by_reason.values()
    ]


def overall(kernels: list[KernelReport]) -> ReportVerdict:
    """The review's verdict: its worst kernel (a kernel the change does not touch counts as a pass)."""
    verdicts: set[str] = {k.verdict for k in kernels}
    worst_first: tuple[ReportVerdict, ...] = ("error", "fail", "needs_accept", "undecided")
    return next((v for v in worst_first if v in verdicts), "pass")
