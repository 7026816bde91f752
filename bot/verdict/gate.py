"""The gate: pure functions from measured evidence to verdicts and reasons."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from bot.config.manifest import Case, Constraints
from bot.models.finding import Finding, Gate, Outcome, Phrase
from bot.models.judging import CaseRun, Check, Timing
from bot.models.report import (
    CaseReport,
    CaseStatus,
    CompileError,
    KernelReport,
    Occupancy,
    ProbeReport,
    ReportVerdict,
    Resource,
    ResourceCheckReport,
    SimulatedCost,
    Violation,
)
from bot.verdict import stats
from bot.verdict.compile_errors import compile_phrases, described
from bot.verdict.findings import add_case, add_kernel, rerender_case, verbatim
from bot.verdict.messages import phrase, render
from bot.verdict.names import ARG_CHARS, LONGEST, base_name, families, template_args
from bot.verdict.occupancy import SM90, Arch, drop_pct, occupancy, register_phrase, smem_phrase, table
from bot.verdict.plausible import speedup_findings as implausible_speedups

HEAD, BASE = "head", "base"
# What base already had of an absolute rule, as the gate notes it (never the change's failure): docs/review.md
IN_BASE = (
    "resources.in_base",
    "resources.in_base_renamed",
    "resources.launch_in_base",
    "resources.launch_in_base_moved",
)
SMEM_PER_BLOCK_LIMIT = SM90.smem_per_block_optin  # 232,448 B of static + dynamic shared memory per block


class Policy(BaseModel):
    """How the gate treats a latency comparison whose CI straddles the threshold."""

    model_config = ConfigDict(frozen=True)

    inconclusive: Literal["neutral", "fail"] = "neutral"


def _fmt(x: float | None) -> str:
    return "?" if x is None else f"{x:.3g}"


def _finding(gate: Gate, key: str, outcome: Outcome = Outcome.fail, **params: str | int | float) -> Finding:
    return Finding(gate=gate, outcome=outcome, key=key, params=params)


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
    if run.status in (CaseStatus.timeout, CaseStatus.crashed):
        report.status, report.verdict = run.status, "error"
        who = run.failed_label or "the runner"
        status = run.status.value
        failed = _finding(Gate.run, "run.side_failed", Outcome.error, who=who, status=status, detail=run.detail)
        if run.why is not None:  # its words through the catalog (the worker's output and an exception's verbatim)
            failed = failed.model_copy(
                update={"params": {"who": who, "status": status}, "phrases": {"detail": [run.why]}}
            )
        add_case(report, failed)
        return report
    if run.status == CaseStatus.tampered:
        report.status, report.verdict = run.status, "error"
        rejected = _finding(Gate.measurement, "measurement.rejected", Outcome.error, detail=run.detail)
        if run.why is not None:
            rejected = rejected.model_copy(update={"params": {}, "phrases": {"detail": [run.why]}})
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


def base_correct(run: CaseRun, tol: float) -> bool | None:
    """Base right on the case's inputs and probes; False where it is wrong or crashed; None where it was not checked."""
    if run.failed_label == BASE and run.status in (CaseStatus.timeout, CaseStatus.crashed):
        return False
    base = run.checks.get(BASE)
    if base is None:
        return None
    spot = run.spots.get(BASE)
    wrong = any(check_reasons(c, tol) for c in (base, *run.probes.get(BASE, [])))
    return not (wrong or (spot is not None and spot.failed))


def check_reasons(check: Check, tol: float) -> list[str]:
    """Why one check (random inputs or a boundary probe) is wrong, as its case states it."""
    return [render(f, case=False) for f in check_findings(check, tol)]


def check_findings(check: Check, tol: float) -> list[Finding]:
    """Why one check (random inputs or a boundary probe) is wrong: the metric, the output, the first bad element."""
    on = [Phrase(key="tail.probe", params={"probe": check.probe})] if check.probe else []
    if check.error:
        side = check.label or HEAD
        if check.probe:
            return [
                _finding(
                    Gate.correctness, "correctness.bad_output_probe", side=side, probe=check.probe, error=check.error
                )
            ]
        return [_finding(Gate.correctness, "correctness.bad_output", side=side, error=check.error)]
    findings = []
    v = check.failure
    if check.nan_inf and v is not None and v.metric == "nan_inf" and v.unwritten:  # the judge's NaN, left in place
        findings.append(
            Finding(
                gate=Gate.correctness,
                outcome=Outcome.fail,
                key="correctness.unwritten",
                params={"output": v.output},
                phrases={"element": [_element(v)]},
                tail=on,
            )
        )
    elif check.nan_inf:
        at = v is not None and v.metric == "nan_inf"
        key = "stability.nan_inf_at" if at else "stability.nan_inf"
        phrases = {"element": [_element(v)]} if at and v is not None else {}
        findings.append(Finding(gate=Gate.stability, outcome=Outcome.fail, key=key, phrases=phrases, tail=on))
    if v is not None and v.metric != "nan_inf":
        findings.append(violation_finding(v).model_copy(update={"tail": on}))
    elif not check.outputs and check.max_abs_err is not None and check.max_abs_err > tol:  # a run without limits
        params: dict[str, str | int | float] = {"value": _fmt(check.max_abs_err), "limit": _fmt(tol)}
        findings.append(
            Finding(
                gate=Gate.correctness,
                outcome=Outcome.fail,
                key="correctness.max_abs_err_total",
                params=params,
                value=check.max_abs_err,
                limit=tol,
                tail=on,
            )
        )
    return findings


def _element(v: Violation) -> Phrase:
    """`out[1, 0, 5, 37]: got 0.12, reference 0.95` (a cos_diff row: `out[1, 0, 5, :]`)."""
    if v.metric == "cos_diff":
        return Phrase(key="element.at", params={"where": f"{v.output}[{', '.join([*map(str, v.index), ':'])}]"})
    where = f"{v.output}[{', '.join(map(str, v.index))}]"
    if v.unwritten:  # an output argument the judge poisoned before the call
        got = "NaN" if v.got is not None and math.isnan(v.got) else _fmt(v.got)
        return Phrase(key="element.unwritten", params={"where": where, "got": got, "expected": _fmt(v.expected)})
    if v.got is None:
        return Phrase(key="element.at", params={"where": where})
    return Phrase(key="element.value", params={"where": where, "got": _fmt(v.got), "expected": _fmt(v.expected)})


def violation_finding(v: Violation) -> Finding:
    """The first limit an output broke: its metric, value and limit, the output and the first bad element."""
    if v.metric == "nan_inf":
        return Finding(
            gate=Gate.stability, outcome=Outcome.fail, key="stability.violation", phrases={"element": [_element(v)]}
        )
    return Finding(
        gate=Gate.correctness,
        outcome=Outcome.fail,
        key=f"correctness.{v.metric}",
        params={"value": _fmt(v.value), "limit": _fmt(v.limit), "output": v.output},
        phrases={"element": [_element(v)]},
        value=v.value,
        limit=v.limit,
    )


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


def _judge_latency(report: CaseReport, run: CaseRun, max_regression_pct: float, *, with_base: bool = True) -> None:
    """Head against base by the paired statistic (bot/verdict/stats.py): Δ, its 95 % interval and the verdict.

    A busy or throttled runner widened the interval and bought more measurement (the judge's caps); it never
    overrides an interval that lies wholly beyond the limit, and it is named where the interval stays undecided."""
    head_t, base_t = run.timings.get(HEAD), run.timings.get(BASE) if with_base else None
    report.stop_reason = run.stop_reason
    report.max_regression_pct = max_regression_pct
    if head_t is None:
        return
    if len(head_t.samples_ms) < 2 or (base_t is not None and len(base_t.samples_ms) < 2):
        report.verdict = "inconclusive"
        add_case(report, _finding(Gate.performance, "performance.few_samples", Outcome.undecided))
        return
    report.samples = len(head_t.samples_ms)
    if base_t is None:
        report.p50_ms = stats.median(head_t.samples_ms)
        return
    report.base_p50_ms = stats.median(base_t.samples_ms)
    report.base_samples = len(base_t.samples_ms)
    blocks = _blocks(head_t, base_t)
    report.processes = len(blocks)
    if not blocks:
        report.verdict = "inconclusive"
        add_case(report, _finding(Gate.performance, "performance.not_paired", Outcome.undecided))
        return
    est = stats.paired([h for h, _, _ in blocks], [b for _, b, _ in blocks], [f for _, _, f in blocks])
    low, high = est.interval()
    report.p50_ms = report.base_p50_ms * est.ratio  # head's p50 as the paired ratio puts it: the columns give Δ
    report.regression_pct = round((est.ratio - 1.0) * 100.0, 3)
    report.ci95_pct = [round((low - 1.0) * 100.0, 3), round((high - 1.0) * 100.0, 3)]
    verdict = stats.latency_verdict(low, high, max_regression_pct)
    span = _span(report.regression_pct, report.ci95_pct, max_regression_pct)
    if verdict == "fail":
        report.verdict = "fail"
        add_case(report, Finding(gate=Gate.performance, outcome=Outcome.fail, key="performance.regression", **span))
    elif verdict == "inconclusive":
        report.verdict = "inconclusive"
        key, noisy = "performance.inconclusive", {}
        if run.noisy:
            key, noisy = "performance.inconclusive_noisy", {"noisy": run.noisy, "pairs": est.pairs}
        span["params"].update(noisy)
        if run.noisy_why is not None:  # the runner's words through the catalog
            del span["params"]["noisy"]
            span["phrases"] = {"noisy": [run.noisy_why]}
        add_case(report, Finding(gate=Gate.performance, outcome=Outcome.undecided, key=key, **span))
    cpu_time_verdict(report, head_t, base_t, max_regression_pct)


def _interval(delta: float, ci: list[float]) -> dict[str, str | int | float]:
    """A Δ and its 95 % interval as a message's parameters ("+1.78%", "-12.17%", "+17.96%")."""
    return {"delta": f"{delta:+.2f}%", "low": f"{ci[0]:+.2f}%", "high": f"{ci[1]:+.2f}%"}


def _span(delta: float, ci: list[float], limit: float) -> dict:  # type: ignore[type-arg]
    """A Δ and its 95 % interval against the limit, as a finding's parameters and fields (in %)."""
    params = {**_interval(delta, ci), "limit": f"{limit:g}"}
    return {"params": params, "value": delta, "limit": limit, "unit": "%"}


def cpu_time_verdict(report: CaseReport, head: Timing, base: Timing, max_regression_pct: float) -> None:
    """A CPU case's CPU time per call, every thread of each side's sandbox, by the same paired statistic as p50.

    Reported beside p50; a head whose CPU time is decisively above base's beyond the limit (the whole 95 % interval)
    fails whatever its wall time says — work moved to a helper thread costs CPU the clock of one call does not show
    (issue 37, 3). A CPU time within the limit decides nothing: p50 does."""
    blocks = _blocks(*(h.model_copy(update={"processes": h.cpu_processes}) for h in (head, base)))
    if (
        not head.cpu_processes
        or not base.cpu_processes
        or not blocks
        or any(x <= 0 for h, b, _ in blocks for x in (*h, *b))
    ):
        return
    est = stats.paired([h for h, _, _ in blocks], [b for _, b, _ in blocks], [f for _, _, f in blocks])
    low, high = est.interval()
    report.base_cpu_ms = stats.median([x for _, b, _ in blocks for x in b])
    report.cpu_ms = report.base_cpu_ms * est.ratio
    report.cpu_regression_pct = round((est.ratio - 1.0) * 100.0, 3)
    report.cpu_ci95_pct = [round((low - 1.0) * 100.0, 3), round((high - 1.0) * 100.0, 3)]
    verdict = stats.latency_verdict(low, high, max_regression_pct)
    if verdict == "pass":
        cpu_time_decides(report)
    elif verdict == "inconclusive" and est.ratio > 1.0 + max_regression_pct / 100.0:
        cpu_time_leans(report, max_regression_pct)
    if verdict != "fail":
        return
    cpu = _span(report.cpu_regression_pct, report.cpu_ci95_pct, max_regression_pct)
    report.verdict = "fail"
    kept = [f for f in report.findings if f.key not in _INCONCLUSIVE]
    cpu_time = Finding(
        gate=Gate.performance, outcome=Outcome.fail, key="performance.cpu_time", tail=_wall_tail(report), **cpu
    )
    rerender_case(report, [*kept, cpu_time.model_copy(update={"case": report.name})])


def _wall_tail(report: CaseReport) -> list[Phrase]:
    """ "; wall time p50 +1.78% (-12.17%..+17.96%)" after a CPU-time finding, where the wall time was compared."""
    if report.regression_pct is None or report.ci95_pct is None:
        return []
    return [Phrase(key="tail.wall", params=_interval(report.regression_pct, report.ci95_pct))]


def cpu_time_leans(report: CaseReport, max_regression_pct: float) -> None:
    """A wall-time pass is not a pass while the CPU time per call straddles the limit and its estimate is above it:
    the case is undecided. Work moved to a helper thread makes the clock of one call faster and the CPU time dearer,
    and a head can widen its own CPU-time interval (a helper that works only now and then); a pass then rested on the
    clock alone against the evidence of the cost it does not show (tests/test_redteam.py, a second thread under
    load). Like the sampler's early stop (`stats.early_stop`), which never stops on one clock leaning against the
    other. A straddling CPU time at or below the limit at its estimate decides nothing; the wall time does."""
    if report.verdict != "pass":
        return
    assert report.cpu_regression_pct is not None and report.cpu_ci95_pct is not None
    cpu = _span(report.cpu_regression_pct, report.cpu_ci95_pct, max_regression_pct)
    report.verdict = "inconclusive"
    add_case(
        report,
        Finding(
            gate=Gate.performance,
            outcome=Outcome.undecided,
            key="performance.cpu_time_leans",
            tail=_wall_tail(report),
            **cpu,
        ),
    )


def cpu_time_decides(report: CaseReport) -> None:
    """A CPU case whose wall-time interval straddles the limit passes when its CPU-time interval lies wholly within
    it (issue 40, 2: on the same samples the CPU-time interval decides more comparisons at the same error rates,
    benchmarks/README.md). Never against a decisive wall-time interval: only an inconclusive latency verdict is
    decided here, and a CPU time decisively above the limit fails in `cpu_time_verdict` whatever the clock says."""
    only = report.findings[0] if len(report.findings) == 1 and len(report.reasons) == 1 else None
    if report.verdict != "inconclusive" or only is None or only.key not in _INCONCLUSIVE:
        return
    report.verdict = "pass"
    rerender_case(report, [])


def _blocks(head: Timing, base: Timing) -> list[tuple[list[float], list[float], list[bool]]]:
    """(head, base, base ran first) per process pair whose blocks hold both sides (at least two); a timing without
    processes is one pair."""
    processes = (head.processes, base.processes) if base.processes else ([head.samples_ms], [base.samples_ms])
    firsts = base.first if len(base.first) == len(processes[1]) else [[] for _ in processes[1]]
    out = []
    for p, (h, b, f) in enumerate(zip(*processes, firsts, strict=False)):
        if len(h) == len(b) >= 2:
            out.append((h, b, f if len(f) == len(b) else [stats.base_first(p, i) for i in range(len(b))]))
    return out


def simulated_note(report: CaseReport, sim: SimulatedCost) -> None:
    """Report a CPU case's simulated cost beside p50; it decides nothing (issue 40, 2). It is a model — on the README
    demo's change the cache model alone moved cycles ×1.06 while instructions fell ×0.979 — and a forgeable one: under
    valgrind the counted code shares its process with callgrind, unconfined, and can lower its own count (client
    requests, callgrind's memory, its own dump; docs/security.md, round three). In the end-to-end reviews that made the
    comparison (benchmarks/README.md) CPU time from the kernel's accounting decided straddling cases and the simulated
    cost none, so a case the clock and the CPU time leave undecided stays undecided; the count is evidence for the
    person who decides it."""
    report.simulated = sim
    if sim.head is None or sim.base is None or sim.base.cycles <= 0 or sim.base.instructions <= 0:
        if report.verdict == "inconclusive" and sim.error:
            _add_tail(report, Phrase(key="tail.no_simulated", params={"error": sim.error}))
        return
    sim.ratio = round(sim.head.cycles / sim.base.cycles, 5)
    sim.instructions_ratio = round(sim.head.instructions / sim.base.instructions, 5)
    if report.verdict == "inconclusive" and report.status == CaseStatus.ok:
        cost = {"ratio": f"{sim.ratio:.3f}", "instructions": f"{sim.instructions_ratio:.3f}"}
        _add_tail(report, Phrase(key="tail.simulated", params=cost))


def _add_tail(report: CaseReport, tail: Phrase) -> None:
    """Every finding of the case, one more phrase at its end ("; the simulated cost … decides nothing")."""
    rerender_case(report, [f.model_copy(update={"tail": [*f.tail, tail]}) for f in report.findings])


_INCONCLUSIVE = ("performance.inconclusive", "performance.inconclusive_noisy")
_NUMBER = re.compile(r"\b\d+[uUlL]*\b")  # 128, and 128u, 64l, 8ull: a template argument's literal is a number too


def _shape(function: str) -> str:
    """A function name with its integer literals blanked: `k<128, 64, false>` and `k<256u, 64, false>` match."""
    return _NUMBER.sub("#", function)


def _signature(function: str) -> str | None:
    """The parameter list of a demangled name with its numbers blanked (`(float const*, float*, int)`); None for a
    mangled name or one without parameters to read."""
    if function.startswith("_Z"):
        return None
    name, depth = function.replace("(anonymous namespace)", ""), 0
    for i, ch in enumerate(name):
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth = max(0, depth - 1)
        elif ch == "(" and depth == 0:
            return _shape(name[i:]) if name[:i].strip() else None
    return None


def _common_prefix(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def match_base(head: list[Resource], base: list[Resource]) -> dict[str, Resource]:
    """Head function -> its function in base, so that base's figures stand beside head's:

    1. the same name;
    2. else the same name up to its numbers (`k<128, 64>` and `k<256u, 64>`: a tunable renames instantiations)
       where that shape is unique on both sides;
    3. else, a renamed function (`forward_kernel` → `forward_kernel_naive` and `forward_kernel_wmma`), the base
       function of the same signature (demangled parameter list): the only one left, or the one whose name shares
       the longest start with head's; several head functions may stand beside one base function;
    4. else, when exactly one function is left on each side, those two.

    A base function no head function matches is removed (`removed_in_head`), never silently dropped."""
    by_name = {r.function: r for r in base}
    matched: dict[str, Resource] = {r.function: by_name[r.function] for r in head if r.function in by_name}
    taken = {id(b) for b in matched.values()}
    left = [r for r in head if r.function not in matched]
    spare = [b for b in base if id(b) not in taken]
    shapes_head: dict[str, int] = {}
    for r in left:
        shapes_head[_shape(r.function)] = shapes_head.get(_shape(r.function), 0) + 1
    shapes_base: dict[str, list[Resource]] = {}
    for b in spare:
        shapes_base.setdefault(_shape(b.function), []).append(b)
    for r in left:
        shape = _shape(r.function)
        if shapes_head[shape] == 1 and len(shapes_base.get(shape, [])) == 1:
            matched[r.function] = shapes_base[shape][0]
    taken = {id(b) for b in matched.values()}
    left = [r for r in head if r.function not in matched]
    spare = [b for b in base if id(b) not in taken]
    paired: dict[str, Resource] = {}
    for r in left:
        sig = _signature(r.function)
        same = [b for b in spare if sig is not None and _signature(b.function) == sig]
        if len(same) > 1:
            best = max(_common_prefix(r.function, b.function) for b in same)
            same = [b for b in same if _common_prefix(r.function, b.function) == best]
        if len(same) == 1:
            paired[r.function] = same[0]
    matched.update(paired)
    taken = {id(b) for b in matched.values()}
    left = [r for r in head if r.function not in matched]
    spare = [b for b in base if id(b) not in taken]
    if len(left) == 1 and len(spare) == 1:
        matched[left[0].function] = spare[0]
    return matched


def is_rename(head: str, base: str) -> bool:
    """A head function that stands beside a base function of another name (not merely other numbers)."""
    return _shape(head) != _shape(base)


def removed_in_head(head: list[Resource], base: list[Resource]) -> list[Resource]:
    """Base's functions that no head function stands beside (`match_base`): removed, or renamed past matching."""
    kept = {id(b) for b in match_base(head, base).values()}
    return [b for b in base if id(b) not in kept]


def _occupancy_of(r: Resource, threads: dict[str, int] | None, sm: Arch | None = SM90) -> Occupancy | None:
    """The function's occupancy as described, else from its launch bounds when its smem is known."""
    if r.occupancy is not None:
        return r.occupancy
    block = r.threads or (threads or {}).get(r.function)
    if not block or (r.dynamic_smem_bytes is None and r.extern_smem) or sm is None:
        return None
    barriers = 1 if r.barriers is None else r.barriers
    return occupancy(r.registers, block, r.smem_bytes, r.dynamic_smem_bytes or 0, barriers, arch=sm)


def explained(r: Resource, occ: Occupancy, factor: str, threads: int | None = None) -> Phrase:
    """Why one resource allows only so many blocks, in the kernel author's numbers."""
    block = threads or r.threads or 0
    if factor == "registers":
        return register_phrase(r.registers, block, occ)
    if factor == "shared memory":
        return smem_phrase(occ)
    if factor == "threads":
        return Phrase(key="occupancy.block_threads", params={"threads": block})
    if factor == "barriers":
        return Phrase(key="occupancy.barriers", params={"barriers": str(r.barriers)})
    return Phrase(key="occupancy.at_most", params={"blocks": str(occ.limits.get(factor))})


FACTORS = {"registers": "occupancy.registers_factor", "shared memory": "occupancy.smem_factor",
           "threads": "occupancy.threads_factor", "blocks": "occupancy.blocks_factor",
           "barriers": "occupancy.barriers_factor"}  # fmt: skip


def _factor(factor: str) -> Phrase:
    return Phrase(key=FACTORS[factor]) if factor in FACTORS else Phrase.as_written(factor)


def _limited_by(r: Resource, occ: Occupancy, threads: int | None) -> list[Phrase]:
    return [
        Phrase(
            key="resources.limited_by",
            phrases={"factor": [_factor(f)], "why": [explained(r, occ, f, threads)]},
        )
        for f in occ.limited_by
    ]


def _smem(r: Resource) -> str:
    """`static + dynamic B`; `?` for dynamic memory nobody sized; static alone when no launch was described."""
    if r.dynamic_smem_bytes is None:
        return f"{r.smem_bytes:,} + ? B" if r.extern_smem else f"{r.smem_bytes:,} B"
    return f"{r.smem_bytes:,} + {r.dynamic_smem_bytes:,} B"


# The absolute rules a launch's dynamic shared memory decides: not judged on a declared figure the change can move
ON_THE_LAUNCH = ("resources.smem_arch", "resources.smem_limit", "resources.not_resident", "resources.min_warps")


def _arg(text: str) -> str:
    return text if len(text) <= ARG_CHARS else f"{text[: ARG_CHARS - 1]}…"


def declared_moved(r: Resource, b: Resource | None, base: Sequence[Resource]) -> str | None:
    """How the change moves the template arguments of head's instantiation `r` whose dynamic shared memory is
    kernel.toml's figure (a literal or an expression of tunables: declared, not read back from the code), against
    base's instantiation `b` beside it (`match_base`): `4u → 6u` for each argument that differs, both lists where
    their counts differ, "" where none stands beside it but `base` (base's functions) has other instantiations of
    its template. None where the figure is judged as it stands: read back, not described, not a template's
    instantiation, base's instantiation has the same arguments, or base has no instantiation of the template (a new
    kernel, or no base at all: its figure was written with it)."""
    if r.launch_from != "declared" or r.dynamic_smem_bytes is None or not (r.extern_smem or r.dynamic_smem_bytes):
        return None
    if (mine := template_args(r.function)) is None:
        return None
    if b is None:
        return "" if any((t := template_args(x.function)) and t[0] == mine[0] for x in base) else None
    theirs = template_args(b.function)
    old = theirs[1] if theirs is not None else []
    if old == mine[1]:
        return None
    if len(old) != len(mine[1]):
        moved = f"<{', '.join(map(_arg, old))}> → <{', '.join(map(_arg, mine[1]))}>"
    else:
        moved = ", ".join(f"{_arg(o)} → {_arg(n)}" for o, n in zip(old, mine[1], strict=True) if o != n)
    return moved if len(moved) <= LONGEST else f"{moved[: LONGEST - 1]}…"


def _declared_finding(r: Resource, moved: str) -> Finding:
    """Head's declared figure the change can move: its shared memory and occupancy undecided, never judged."""
    smem = f"{r.dynamic_smem_bytes:,} B"
    if moved:
        return _resource("resources.declared_moved", r, Outcome.undecided, smem=smem, moved=moved)
    return _resource("resources.declared_new", r, Outcome.undecided, smem=smem)


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


def _resource(key: str, r: Resource, outcome: Outcome = Outcome.fail, **fields: Any) -> Finding:
    """A resource finding about `r`: keywords are the message's parameters; `value_`, `limit_`, `unit_` and
    `phrases_` the finding's own fields."""
    params = {k: v for k, v in fields.items() if not k.endswith("_")}
    extra = {k[:-1]: v for k, v in fields.items() if k.endswith("_")}
    return Finding(
        gate=Gate.resources,
        outcome=outcome,
        key=key,
        function=r.function,
        params={"function": r.function, **params},
        **extra,
    )  # type: ignore[arg-type]


def resource_findings(
    head: list[Resource],
    base: list[Resource],
    constraints: Constraints,
    threads: dict[str, int] | None = None,
    arch: str = "sm_90a",
) -> tuple[list[Finding], list[Finding]]:
    """(failures, notes) for the resources and occupancy of head against base on one architecture.

    Fails: spills, static + dynamic smem per block over the architecture's opt-in limit (232,448 B on sm_90
    and sm_100; or `max_smem_bytes`), registers over `max_registers`, a launch that fits no SM, fewer resident
    warps per SM than base beyond `max_occupancy_drop_pct`, fewer than `min_warps_per_sm`. Any occupancy change
    is noted either way. An absolute rule's breach that base's function (`match_base`) has alike or worse is base's,
    not the change's: noted "in base too" with both figures (`in_base`), never a failure. Where the dynamic shared
    memory is kernel.toml's figure and the change moves the instantiation's template arguments (`declared_moved`),
    the shared memory and occupancy are not judged: one undecided finding among the notes says so.
    """
    failures: list[Finding] = []
    notes: list[Finding] = []
    base_of = match_base(head, base)
    sm = table(arch)
    smem_limit = sm.smem_per_block_optin if sm is not None else SMEM_PER_BLOCK_LIMIT
    for r in head:
        b = base_of.get(r.function)
        moved = declared_moved(r, b, base)
        theirs = _absolute(b, None, constraints, sm, smem_limit) if b is not None else []
        for f in _absolute(r, threads, constraints, sm, smem_limit):
            same = next((g for g in theirs if g.key == f.key and _as_bad(g, f)), None)
            if moved is not None and f.key in ON_THE_LAUNCH:
                continue  # judged on a figure nobody measured: undecided below, neither a pass nor a failure
            if same is None or b is None:
                failures.append(f)
            else:
                notes.append(in_base(f, same, b))
        if moved is not None:
            notes.append(_declared_finding(r, moved))
        elif (occ := _occupancy_of(r, threads, sm)) is not None:
            block = r.threads or (threads or {}).get(r.function)
            if b is not None and b.occupancy is not None and occ.blocks_per_sm > 0:
                change = _occupancy_change(r, occ, b.occupancy, block, constraints)
                if change is not None:
                    (failures if change.outcome == Outcome.fail else notes).append(change)
        if b is not None:
            renamed = is_rename(r.function, b.function)
            for field in ("registers", "smem_bytes", "dynamic_smem_bytes", "stack_bytes"):
                new, old = getattr(r, field), getattr(b, field)
                if field == "dynamic_smem_bytes" and moved is not None:
                    continue
                if new is not None and old is not None and new > old:
                    grew = {"field": field, "old": old, "new": new, "value_": new, "limit_": old}
                    if renamed:
                        notes.append(
                            _resource("resources.grew_renamed", r, Outcome.note, base_function=b.function, **grew)
                        )
                    else:
                        notes.append(_resource("resources.grew", r, Outcome.note, **grew))
    compiled, before = [r.function for r in head], [r.function for r in base]
    return families(failures, compiled, before), families(notes, compiled, before)


def _absolute(
    r: Resource, threads: dict[str, int] | None, constraints: Constraints, sm: Arch | None, smem_limit: int
) -> list[Finding]:
    """What one function breaks of the absolute rules, whatever base has: spills, shared memory over the
    architecture's or the manifest's limit, registers over `max_registers`, a launch that fits no SM, fewer than
    `min_warps_per_sm`."""
    found: list[Finding] = []
    if r.spill_bytes > constraints.max_spill_bytes:
        spill: dict[str, Any] = {"value_": r.spill_bytes, "limit_": constraints.max_spill_bytes, "unit_": "B"}
        found.append(
            _resource(
                "resources.spill",
                r,
                bytes=r.spill_bytes,
                stores=r.spill_store_bytes,
                loads=r.spill_load_bytes,
                **spill,
            )
        )
    smem = r.smem_bytes + (r.dynamic_smem_bytes or 0)
    if smem > smem_limit:
        smem_arch: dict[str, Any] = {"value_": smem, "limit_": smem_limit, "unit_": "B"}
        found.append(_resource("resources.smem_arch", r, smem=_smem(r), limit=f"{smem_limit:,}", **smem_arch))
    if constraints.max_registers is not None and r.registers > constraints.max_registers:
        found.append(
            _resource(
                "resources.registers",
                r,
                registers=r.registers,
                limit=constraints.max_registers,
                value_=r.registers,
                limit_=constraints.max_registers,
                unit_="registers",
            )
        )
    if constraints.max_smem_bytes is not None and smem > constraints.max_smem_bytes:
        found.append(
            _resource(
                "resources.smem_limit",
                r,
                smem=_smem(r),
                limit=f"{constraints.max_smem_bytes:,}",
                value_=smem,
                limit_=constraints.max_smem_bytes,
                unit_="B",
            )
        )
    if (occ := _occupancy_of(r, threads, sm)) is not None:
        block = r.threads or (threads or {}).get(r.function)
        found.extend(_occupancy_failures(r, occ, block, constraints, smem, smem_limit))
    return found


_FEWER_IS_WORSE = ("resources.not_resident", "resources.min_warps")  # resident blocks, warps: the fewer the worse


def _as_bad(theirs: Finding, ours: Finding) -> bool:
    """Base's breach of a rule is as bad as head's or worse (the same figure, or further past the limit)."""
    if theirs.value is None or ours.value is None:
        return theirs.value is None and ours.value is None
    if ours.key in _FEWER_IS_WORSE:
        return theirs.value <= ours.value
    return theirs.value >= ours.value


def _figure(f: Finding) -> str:
    value = "?" if f.value is None else f"{f.value:,g}"
    return f"{value} {f.unit}" if f.unit else value


def in_base(ours: Finding, theirs: Finding, b: Resource) -> Finding:
    """Head's breach of an absolute rule that base has alike or worse, for the same function (`match_base`): a note
    with both figures, never a failure of this change (docs/review.md, "What base already has")."""
    renamed = is_rename(ours.function or "", b.function)
    return ours.model_copy(
        update={
            "outcome": Outcome.note,
            "key": "resources.in_base_renamed" if renamed else "resources.in_base",
            "params": {"head": _figure(ours), "base": _figure(theirs), "base_function": b.function},
            "phrases": {"violation": [Phrase(key=ours.key, params=ours.params, phrases=ours.phrases)]},
        }
    )


def _occupancy_failures(
    r: Resource, occ: Occupancy, block: int | None, constraints: Constraints, smem: int, smem_limit: int
) -> list[Finding]:
    if occ.blocks_per_sm == 0:
        why = [explained(r, occ, f, block) for f, n in occ.limits.items() if n == 0 and f != "shared memory"]
        if smem <= smem_limit or why:  # an smem overflow alone is reported above
            why = why or [explained(r, occ, "shared memory", block)]
            return [_resource("resources.not_resident", r, phrases_={"why": why}, value_=0, unit_="blocks/SM")]
        return []
    if constraints.min_warps_per_sm is not None and occ.warps_per_sm < constraints.min_warps_per_sm:
        return [
            _resource(
                "resources.min_warps",
                r,
                warps=occ.warps_per_sm,
                limit=constraints.min_warps_per_sm,
                phrases_={"limited_by": _limited_by(r, occ, block)},
                value_=occ.warps_per_sm,
                limit_=constraints.min_warps_per_sm,
                unit_="warps/SM",
            )
        ]
    return []


def _occupancy_change(
    r: Resource, occ: Occupancy, base: Occupancy, block: int | None, constraints: Constraints
) -> Finding | None:
    """The occupancy change, failing when resident warps fell more than allowed; None when it did not change."""
    if occ.warps_per_sm == base.warps_per_sm:
        return None
    change: dict[str, Any] = {
        "old": f"{base.occupancy_pct:g}",
        "new": f"{occ.occupancy_pct:g}",
        "old_blocks": base.blocks_per_sm,
        "new_blocks": occ.blocks_per_sm,
        "old_warps": base.warps_per_sm,
        "new_warps": occ.warps_per_sm,
        "phrases_": {"limited_by": _limited_by(r, occ, block)},
    }
    drop, allowed = drop_pct(base, occ), constraints.max_occupancy_drop_pct
    fewer: dict[str, Any] = {
        "drop": f"{drop:g}",
        "limit": f"{allowed:g}",
        "value_": drop,
        "limit_": allowed,
        "unit_": "%",
    }
    if drop > allowed:
        return _resource("resources.occupancy_drop", r, **change, **fewer)
    if drop > 0:
        return _resource("resources.occupancy_within", r, Outcome.note, **change, **fewer)
    return _resource("resources.occupancy_change", r, Outcome.note, **change)


def _judge_resources(kernel: KernelReport, constraints: Constraints) -> None:
    """Every architecture's resource check; with more than one, each failure and finding names its architecture."""
    checks = kernel.resource_checks()
    for check in checks:
        _judge_arch(kernel, check, constraints, named=len(checks) > 1)


def _compile_findings(
    step: Phrase, key: str, errors: list[CompileError], base_failed: bool, base_errors: list[CompileError], **where: str
) -> list[Finding]:
    """A failed compile as a failure (head's fault) or as undecided (base fails alike), at the first error's place;
    its `detail` a phrase (bot/verdict/compile_errors.py compile_phrases)."""
    failure, undecided = compile_phrases(step, errors, base_failed, base_errors)
    place: dict[str, str | int | None] = {"file": errors[0].path or None, "line": errors[0].line} if errors else {}
    found = [(failure, Outcome.fail), (undecided, Outcome.undecided)]
    return [
        Finding(gate=Gate.build, outcome=outcome, key=key, phrases={"detail": [detail]}, **place, **where)  # type: ignore[arg-type]
        for detail, outcome in found
        if detail
    ]


def _judge_arch(kernel: KernelReport, check: ResourceCheckReport, constraints: Constraints, *, named: bool) -> None:
    on = [Phrase(key="tail.arch", params={"arch": check.arch})] if named else []
    arch = check.arch
    if check.status == "no_nvcc":
        add_kernel(kernel, _finding(Gate.resources, "resources.no_nvcc", Outcome.note), once=True)
        return
    if check.status == "unsupported_arch":  # the toolchain's limit, not the change's: not decided, never a pass
        found = _finding(Gate.resources, "resources.unsupported_arch", Outcome.undecided, detail=check.log_tail)
        add_kernel(kernel, found.model_copy(update={"arch": arch}))
        return
    if check.status == "compile_fail":  # base failing alike leaves it undecided: the runner's or the manifest's
        step = Phrase(key="compile.step_cuda", params={"arch": check.arch})
        for f in _compile_findings(step, "resources.compile_failed", check.errors, check.base_status == "compile_fail",
                                   check.base_errors, arch=arch):  # fmt: skip
            add_kernel(kernel, f)
        return
    if check.base_status == "compile_fail":
        if check.base_errors:
            found = Finding(
                gate=Gate.build,
                outcome=Outcome.note,
                key="resources.base_compile_fail",
                params={"arch": check.arch},
                phrases={"error": [described(check.base_errors[0])]},
            )
        else:
            found = _finding(Gate.build, "resources.base_compile_fail_log", Outcome.note, arch=check.arch)
        add_kernel(kernel, found.model_copy(update={"arch": arch}))
    for e in _launch_lines(check.launch_errors, check.launch_errors_why):
        add_kernel(kernel, _launch_error(e, check).model_copy(update={"tail": on, "arch": arch}))
    for e in check.base_launch_errors_why:
        if e not in check.launch_errors_why:  # base's own, which head mends or lacks: reported, never head's fault
            own = Phrase(key="launch.base", phrases={"detail": [e]})
            base_own = _launch(own, Outcome.note, "resources.launch_note")
            add_kernel(kernel, base_own.model_copy(update={"arch": arch}), once=True)
    for u in _launch_lines(check.launch_undecided, check.launch_undecided_why):
        add_kernel(kernel, _launch(u, Outcome.undecided).model_copy(update={"tail": on, "arch": arch}))
    for note in _launch_lines(check.launch_notes, check.launch_notes_why):
        add_kernel(kernel, _launch(note, Outcome.note, "resources.launch_note").model_copy(update={"arch": arch}),
                   once=True)  # fmt: skip
    if check.unchanged is not None:
        key = "resources.unchanged" if check.unchanged == "same" else "resources.unchanged_unread"
        add_kernel(kernel, _finding(Gate.resources, key, Outcome.note, functions=len(check.head)).model_copy(
            update={"arch": arch}), once=True)  # fmt: skip
    failures, notes = resource_findings(check.head, check.base, constraints, check.threads, check.arch)
    for f in (*failures, *notes):
        add_kernel(kernel, f.model_copy(update={"tail": [*f.tail, *on], "arch": arch}))


def _unsized(r: Resource | None) -> bool:
    return r is not None and r.extern_smem and r.dynamic_smem_bytes is None


def _own_figures(r: Resource) -> tuple[object, ...]:
    """What a function's occupancy is made of besides its launch's dynamic shared memory."""
    return (r.registers, r.smem_bytes, r.barriers, r.threads)


def _launch_error(line: str | Phrase, check: ResourceCheckReport) -> Finding:
    """Head's launch error: a failure, unless base's kernel.toml has it alike (`launch_in_base`)."""
    if not isinstance(line, Phrase):
        return _launch(line, Outcome.fail, head=check.head)
    moved = launch_in_base(line, check.head, check.base, check.base_launch_errors_why)
    if moved is None:
        return _launch(line, Outcome.fail, head=check.head)
    if moved:
        detail: dict[str, Any] = {"params": {"functions": "; ".join(moved)}, "phrases": {"detail": [line]}}
        return Finding(gate=Gate.resources, outcome=Outcome.undecided, key="resources.launch_in_base_moved", **detail)
    shared = {"detail": [line]}
    return Finding(gate=Gate.resources, outcome=Outcome.note, key="resources.launch_in_base", phrases=shared)


def launch_in_base(
    error: Phrase, head: list[Resource], base: list[Resource], base_errors: list[Phrase]
) -> list[str] | None:
    """Whether base's kernel.toml has head's launch error alike: None when it does not (the change's: it fails);
    else the functions it leaves blind whose own figures (registers, static shared memory, barriers, threads) the
    change moved — their occupancy against base is then undecided, not passed —, an empty list when none moved.

    Alike is the same error, or dynamic shared memory nobody sizes (`launch.unsized`) where every such head function
    of the kernel stands beside a base function (`match_base`) nobody sizes either."""
    paired = match_base(head, base)
    name = error.params.get("name") if error.key == "launch.unsized" else None
    named = [r for r in head if name is not None and _unsized(r) and base_name(r.function) == name]
    if error not in base_errors and (not named or not all(_unsized(paired.get(r.function)) for r in named)):
        return None
    return [r.function for r in named if (b := paired.get(r.function)) is None or _own_figures(b) != _own_figures(r)]


def _launch_lines(english: list[str], why: list[Phrase]) -> list[str] | list[Phrase]:
    """A resource check's launch lines as its phrases; as written where a report has none for each (an older one)."""
    return why if len(why) == len(english) else english


def _launch(
    line: str | Phrase, outcome: Outcome, key: str = "resources.launch", head: Sequence[Resource] = ()
) -> Finding:
    """One launch error, undecided launch or launch note as a resources finding (its phrase the detail; an older
    report's line shown as written). One about a template's instantiations (`launch.unsized`) names them as data:
    `family`, `functions` (`head`'s unsized ones) and the first as its `function` (where annotations place it)."""
    detail = line if isinstance(line, Phrase) else Phrase.as_written(line)
    found = Finding(gate=Gate.resources, outcome=outcome, key=key, phrases={"detail": [detail]})
    if detail.key == "launch.unsized" and isinstance(family := detail.params.get("name"), str):
        unsized = [r.function for r in head if r.extern_smem and r.dynamic_smem_bytes is None]
        functions = [f for f in unsized if base_name(f) == family]
        first = functions[0] if functions else None
        found = found.model_copy(update={"family": family, "functions": functions, "function": first})
    return found


def probe_findings(cases: list[CaseReport]) -> list[Finding]:
    """A note when the cases that ran had no boundary probes: random inputs alone miss one-off errors."""
    reached = [c for c in cases if c.probe_count is not None]
    without = [c.name for c in reached if c.probe_count == 0]
    if not reached or not without:
        return []
    if len(without) == len(reached):
        return [_finding(Gate.coverage, "coverage.no_probes", Outcome.note)]
    return [_finding(Gate.coverage, "coverage.no_probes_for", Outcome.note, cases=", ".join(without))]


def small_shape_findings(cases: list[CaseReport]) -> list[Finding]:
    """A note when the speed-up is confined to the small cases: every case whose whole interval is faster takes less
    time on base than every case that is not faster (unchanged, slower or undecided) — the users' checklist asks
    "is it only faster on small batches?". Cases are sized by base's p50, the work each does."""
    timed = [c for c in cases if c.ci95_pct and c.base_p50_ms is not None and c.regression_pct is not None]
    faster = sorted((c for c in timed if c.ci95_pct[1] < 0), key=lambda c: c.base_p50_ms or 0.0)  # type: ignore[index]
    rest = sorted((c for c in timed if c.ci95_pct[1] >= 0), key=lambda c: c.base_p50_ms or 0.0)  # type: ignore[index]
    if not faster or not rest or (faster[-1].base_p50_ms or 0.0) >= (rest[0].base_p50_ms or 0.0):
        return []

    def listed(group: list[CaseReport]) -> str:
        return ", ".join(f"{c.name} {c.regression_pct:+.1f}%" for c in group[:4]) + (" …" if len(group) > 4 else "")

    found = _finding(
        Gate.performance,
        "performance.small_only",
        Outcome.note,
        faster=listed(faster),
        faster_max=f"{faster[-1].base_p50_ms:.3g}",
        rest=listed(rest),
        rest_min=f"{rest[0].base_p50_ms:.3g}",
    )
    return [found]


_ORDER = {"error": 3, "fail": 2, "inconclusive": 1, "pass": 0, "skipped": -1}


def _of_case(c: CaseReport, outcome: Outcome) -> list[Finding]:
    """The case's findings as its kernel states them, one per line of its reasons (a line set outside the gate, with
    no finding rendered to it, verbatim)."""
    rendered = {render(f, case=False): f for f in c.findings}
    found = [rendered[r] if r in rendered else verbatim(r, Gate.run, outcome) for r in c.reasons]
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
    what the review already put in `kernel.undecided`) makes it `undecided`: a pass is only what was judged."""
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
    if kernel.reasons and worst in ("pass", "inconclusive", "skipped"):
        worst = "fail"
    if worst in ("fail", "error"):
        kernel.verdict = worst  # type: ignore[assignment]
        return kernel
    if not any(c.verdict != "skipped" for c in cases):
        if not cases and kernel.resource_check is not None and kernel.resource_check.status == "ok":
            add_kernel(kernel, _finding(Gate.coverage, "resources.only", Outcome.undecided))  # its one gate passed
        elif cases or not kernel.undecided:  # a kernel undecided for its own reason needs no "no case" besides
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
    if kernel.accept_needed:
        kernel.verdict = "needs_accept"
    elif kernel.undecided:
        kernel.verdict = "undecided"
    else:
        kernel.verdict = "pass"
    return kernel


def not_run_phrases(cases: list[CaseReport]) -> list[Phrase]:
    """The cases that did not run ("2 cuda cases (needs a CUDA GPU; …)"): one phrase per reason, its count and
    devices, the reason as the cases' findings say it (a reason made elsewhere, as written)."""
    by_reason: dict[str, tuple[list[Phrase], list[str]]] = {}
    for c in cases:
        if c.verdict == "skipped":
            reason = "; ".join(c.reasons) or "not run"
            made = [Phrase(key=f.key, params=f.params, phrases=f.phrases) for f in c.findings]
            if "; ".join(phrase(p) for p in made) != reason or not made:
                made = [Phrase.as_written(reason)] if c.reasons else [Phrase(key="run.not_run")]
            by_reason.setdefault(reason, (made, []))[1].append(c.device)
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
