"""One kernel's verdict from its evidence, decided once: `judge_kernel` (pure; the review only gathers)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict

from bot.config.manifest import Kernel
from bot.config.manifest_tables import Case, Constraints
from bot.models.evidence import CaseEvidence, KernelEvidence, NotRun, Peak
from bot.models.finding import Finding, Gate, Outcome, Phrase
from bot.models.report import Build, CaseReport, CaseStatus, KernelReport
from bot.verdict import agent_cases, change
from bot.verdict.compile_errors import new_errors
from bot.verdict.findings import BASE, HEAD, add_case, add_kernel
from bot.verdict.gate import Policy, case_verdict, kernel_verdict
from bot.verdict.gate_latency import simulated_note
from bot.verdict.throughput import device_peak, judge_throughput, over_peak, throughput

RUNNER_DRIFT_PCT = 5.0  # base latency this far from its first measurement is worth a note


class SecondLooks(BaseModel):
    """What the review measures again before the gate decides: the CPU cases whose latency stays undecided (or
    every timed one, `simulate = "always"`) counted under callgrind, and this CPU runner's peak measured longer
    when a case claims more than it."""

    model_config = ConfigDict(frozen=True)

    simulate: list[str] = []
    refresh_cpu_peak: bool = False


def judge_kernel(evidence: KernelEvidence, rules: Kernel | None, policy: Policy) -> KernelReport:
    """The kernel's report and verdict from everything the review gathered, held to `rules` (base's manifest, or
    head's for a new kernel; None where neither side has one): static findings, builds, resource checks, each
    case's run or why it did not run. A kernel the review gathered nothing of is skipped; an invalid one fails."""
    ev = evidence
    report = KernelReport(name=ev.name, domain=ev.domain, changed=ev.changed, verdict="skipped", diff=ev.diff)
    if ev.invalid:
        report.verdict = "fail"
        add_kernel(report, change.invalid(ev.invalid))
        return report
    for note in change.change_notes(ev):
        add_kernel(report, note)
    if not ev.gathered or rules is None:  # untouched, removed in head, or gated in another job: the notes say which
        return report
    constraints = rules.manifest.constraints
    if ev.new_kernel:  # a reference written in the same change proves nothing on its own: a person decides
        add_kernel(report, change.new_kernel())
    for f in ev.unread:
        add_kernel(report, f)
    if ev.static:
        return with_agent_cases(kernel_verdict(report, list(ev.static), [], constraints, policy), ev, rules)
    checks = [c.model_copy(deep=True) for c in ev.resource_checks]
    report.resource_check, report.arch_checks = (checks[0] if checks else None), checks[1:]
    device = "cuda" if ev.device == "cuda" and "cuda" in ev.builds.get(HEAD, {}) else "cpu"
    if (hb := ev.builds.get(HEAD, {}).get(device)) is not None:
        report.build = hb.model_copy(deep=True)
    if (bb := ev.builds.get(BASE, {}).get(device)) is not None:
        report.base_build = bb.model_copy(deep=True)
    if report.build is not None and report.resource_check is not None:
        report.build.resources = report.resource_check.head
    if report.base_build is not None and report.resource_check is not None:
        report.base_build.resources = report.resource_check.base
    cases = [judge_case(case, _evidence_of(ev, case), ev, constraints) for case in rules.manifest.cases]
    for f in drift_findings(cases):
        add_kernel(report, f)
    return with_agent_cases(kernel_verdict(report, [], cases, constraints, policy), ev, rules)


def with_agent_cases(report: KernelReport, ev: KernelEvidence, rules: Kernel) -> KernelReport:
    """The agent's test matrix as the review admitted it (`ev.agent_admission`: base's [agent_cases], applied once),
    each admitted case's run judged like a manifest case and then as an agent case; a head that fails one where base
    passes fails the kernel (`agent_cases.fold`). Nothing an agent case shows passes or excuses anything."""
    admitted = ev.agent_admission
    if not admitted.proposed and not admitted.note:  # nothing proposed, and nothing to say about it
        return report
    runs = {c.name: c for c in ev.agent_runs}
    base_built = any(b.ok for b in ev.builds.get(BASE, {}).values())
    judged = [
        agent_cases.judged(
            case, judge_case(case, runs[case.name], ev, rules.manifest.constraints), base_built=base_built
        )
        for case in agent_cases.cases(admitted)
        if case.name in runs
    ]
    proposer = ev.agent_proposer or "the agent"
    report.agent_cases = agent_cases.report(proposer, admitted, judged)
    if admitted.cases and ev.static:
        report.agent_cases.note = agent_cases.NOT_BUILT
    return agent_cases.fold(report)


def judge_case(case: Case, ce: CaseEvidence, ev: KernelEvidence, constraints: Constraints) -> CaseReport:
    """One case: not run (and why), or the judge's run through the gate, its simulated cost, the base's drift and
    its throughput against the device's peak."""
    if ce.not_run is not None:
        report = not_run_report(case, ce, ev, constraints)
    else:
        report = case_verdict(case, constraints, ce.run)
        if ce.run is not None and ce.log_tail:
            report.log_tail = ce.log_tail
        if ce.simulated is not None:
            simulated_note(report, ce.simulated)
        if ce.identical_build:
            report.stop_reason = "identical_build"
        elif ce.prior_base_p50_ms is not None and report.base_p50_ms is not None:
            report.base_drift_pct = round((report.base_p50_ms / ce.prior_base_p50_ms - 1.0) * 100.0, 2)
    if report.device == "cuda" and report.status != CaseStatus.skipped:
        report.arch, report.gpu = ev.arch, ev.gpu
    flops, nbytes = case.work()
    if (flops is not None or nbytes is not None) and report.p50_ms is not None:
        judge_throughput(report, flops, nbytes, _peak(case, ev))
    return report


def not_run_report(case: Case, ce: CaseEvidence, ev: KernelEvidence, constraints: Constraints) -> CaseReport:
    """A case the review did not hand to the judge: skipped with the reason, or failed when head does not build
    (and base does, or fails otherwise), or an error when an artifact was refused."""
    why = ce.not_run
    if why == NotRun.head_build_failed:
        head_b = ev.builds.get(HEAD, {}).get(case.device)
        if head_b is not None and shared_failure(head_b, ev.builds.get(BASE, {}).get(case.device)):
            return case_verdict(case, constraints, None, Phrase(key="run.fail_alike"))
        return _not_run(case, constraints, CaseStatus.compile_fail, "fail", Phrase(key="run.head_fails"))
    if why == NotRun.artifact_refused:
        refused = Phrase(key="run.artifact_refused", params={"detail": ce.detail})
        return _not_run(case, constraints, CaseStatus.crashed, "error", refused)
    if why == NotRun.other_job:  # ce.detail: the architecture family whose job runs it
        return case_verdict(case, constraints, None, change.other_job(ce.detail))
    skipped = {
        NotRun.held_out: Phrase(key="run.held_out"),
        NotRun.wrong_gpu: Phrase(
            key="run.wrong_gpu", params={"arch": str(case.arch), "gpu_arch": str(ev.arch), "gpu": str(ev.gpu)}
        ),
        NotRun.no_gpu: Phrase(key="run.no_gpu"),
        NotRun.no_build: Phrase(key="run.no_build", params={"device": case.device}),
    }
    return case_verdict(case, constraints, None, skipped.get(why, ce.detail) if why is not None else "")


def _not_run(case: Case, constraints: Constraints, status: CaseStatus, verdict: str, why: Phrase) -> CaseReport:
    """A case not handed to the judge that fails or errors for it (head does not build, an artifact refused)."""
    report = case_verdict(case, constraints, None, "")
    report.status, report.verdict, report.findings = status, verdict, []  # type: ignore[assignment]
    outcome = Outcome.fail if verdict == "fail" else Outcome.error
    add_case(report, Finding(gate=Gate.run, outcome=outcome, key=why.key, params=dict(why.params)))
    return report


def second_looks(
    evidence: KernelEvidence, rules: Kernel, simulate: Literal["off", "undecided", "always"]
) -> SecondLooks:
    """What to measure again before `judge_kernel` decides (pure): each timed CPU case whose latency interval stays
    undecided (every timed one when `simulate` is "always"; none when "off"), and whether a CPU case claims more
    than this runner's measured peak (a busy first measurement reads low: it is measured again, longer)."""
    constraints = rules.manifest.constraints
    wanted: list[str] = []
    refresh = False
    for case in rules.manifest.cases:
        ce = _evidence_of(evidence, case)
        if ce.run is None or ce.not_run is not None or case.device != "cpu":
            continue
        report = case_verdict(case, constraints, ce.run)
        timed = simulate != "off" and report.regression_pct is not None
        if timed and (report.verdict == "inconclusive" or simulate == "always"):
            wanted.append(case.name)
        flops, nbytes = case.work()
        if evidence.cpu_peak is not None and report.p50_ms is not None and (flops is not None or nbytes is not None):
            t = throughput(flops, nbytes, report, evidence.cpu_peak)
            refresh = refresh or (t is not None and bool(over_peak(t, HEAD)))
    return SecondLooks(simulate=wanted, refresh_cpu_peak=refresh)


def shared_failure(head: Build, base: Build | None) -> bool:
    """Head's build fails with first errors base's failed build has too (the runner's or the manifest's)."""
    return base is not None and not base.ok and bool(head.errors) and not new_errors(head.errors, base.errors)


def drift_findings(cases: list[CaseReport]) -> list[Finding]:
    """A note for each case whose base latency moved more than RUNNER_DRIFT_PCT from its first measurement of the
    same binary on this device: the runner changed, not the change (head and base were interleaved)."""
    return [
        Finding(
            gate=Gate.performance,
            outcome=Outcome.note,
            key="performance.base_drift",
            params={"drift": f"{c.base_drift_pct:+.1f}%"},
            case=c.name,
            value=c.base_drift_pct,
            limit=RUNNER_DRIFT_PCT,
            unit="%",
        )
        for c in cases
        if c.base_drift_pct is not None and abs(c.base_drift_pct) > RUNNER_DRIFT_PCT
    ]


def _evidence_of(ev: KernelEvidence, case: Case) -> CaseEvidence:
    """The case's evidence; a case the review recorded nothing for was not run."""
    return ev.case(case.name) or CaseEvidence(name=case.name)


def _peak(case: Case, ev: KernelEvidence) -> Peak | None:
    """A GPU's data-sheet peak, or this CPU runner's measured one."""
    return device_peak(ev.gpu) if case.device == "cuda" else ev.cpu_peak
