"""The gate: pure functions from measured evidence to verdicts and reasons."""

from __future__ import annotations

import math
import re
from typing import Literal

from pydantic import BaseModel, ConfigDict

from bot.config.manifest import Case, Constraints
from bot.models.judging import CaseRun, Check, Timing
from bot.models.report import (
    CaseReport,
    CaseStatus,
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
from bot.verdict.compile_errors import compile_failure, describe
from bot.verdict.occupancy import SM90, Arch, drop_pct, occupancy, register_arithmetic, smem_arithmetic, table
from bot.verdict.plausible import implausible_speedups

HEAD, BASE = "head", "base"
RESOURCES_ONLY = "resources checked; no case ran (needs a CUDA GPU)"  # a manifest without cases, its resources passed
SMEM_PER_BLOCK_LIMIT = SM90.smem_per_block_optin  # 232,448 B of static + dynamic shared memory per block


class Policy(BaseModel):
    """How the gate treats a latency comparison whose CI straddles the threshold."""

    model_config = ConfigDict(frozen=True)

    inconclusive: Literal["neutral", "fail"] = "neutral"


def _fmt(x: float | None) -> str:
    return "?" if x is None else f"{x:.3g}"


# The gates a case reason can start with ("correctness: max_abs_err 0.5 > tolerance 0.01"): the kernel's reason
# for a failing case puts the case right after the gate, so every reason names gate, case, value and limit once.
CASE_GATES = (
    "correctness",
    "stability",
    "performance",
    "performance inconclusive",
    "performance not judged",
    "measurement rejected",
    "implausible",  # above the hardware's peak (bot/verdict/throughput.py)
)


def split_reason(reason: str) -> tuple[str | None, str]:
    """("performance", "p50 +10.53% … > 3% limit") for a reason that starts with a gate; (None, reason) else."""
    gate, sep, rest = reason.partition(": ")
    return (gate, rest) if sep and gate in CASE_GATES else (None, reason)


def case_reason(case: str, reason: str) -> str:
    """A case's reason as its kernel states it: "performance: ragged_200x328x264 p50 +10.53% (…) > 3% limit"."""
    gate, rest = split_reason(reason)
    return f"{gate}: {case} {rest}" if gate else f"{case}: {reason}"


def case_verdict(case: Case, constraints: Constraints, run: CaseRun | None, skip_reason: str = "") -> CaseReport:
    """One case: correctness and stability of head (random inputs, then boundary probes), then its latency."""
    tol = case.limits(constraints).max_abs_err
    report = CaseReport(name=case.name, device=case.device, tolerance=tol, verdict="pass")
    if run is None:
        report.status, report.verdict = CaseStatus.skipped, "skipped"
        report.reasons.append(skip_reason or "not run")
        return report
    head = run.checks.get(HEAD)
    base = run.checks.get(BASE)
    probes = run.probes.get(HEAD, [])
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
        report.reasons.append(f"{who} {run.status.value}: {run.detail}")
        return report
    if run.status == CaseStatus.tampered:
        report.status, report.verdict = run.status, "error"
        report.reasons.append(f"measurement rejected: {run.detail}")
        return report
    if head is None:
        report.status, report.verdict = CaseStatus.crashed, "error"
        report.reasons.append("head produced no result")
        return report
    if head.error:
        report.status, report.verdict = CaseStatus.incorrect, "fail"
        report.reasons.append(f"head raised or returned a bad output: {head.error}")
        return report
    for check in (head, *probes):
        if reasons := check_reasons(check, tol):
            report.status, report.verdict = CaseStatus.incorrect, "fail"
            report.reasons.extend(reasons)
            if report.failure is None and check.failure is not None:
                report.failure = check.failure.model_copy(update={"probe": check.probe})
    if report.verdict == "fail":
        return report
    if (spot := run.spots.get(HEAD)) is not None:
        report.spot_checks = spot.checked
        report.max_abs_err = max(report.max_abs_err or 0.0, spot.worst_abs_err)
        if spot.failed:
            report.status, report.verdict = CaseStatus.incorrect, "fail"
            report.reasons.append(
                f"correctness: {spot.failed} of {spot.checked} checked timed calls differ from the reference "
                f"({spot.first_failure}): every call must compute its result"
            )
            return report
    base_spot = run.spots.get(BASE)
    base_wrong = [c for c in (base, *run.probes.get(BASE, [])) if c is not None and check_reasons(c, tol)]
    comparable = not (base_wrong or (base_spot is not None and base_spot.failed))
    if not comparable:
        probe = next((c.probe for c in base_wrong if c.probe), None)
        on = f" (boundary probe {probe})" if probe and base is not None and not check_reasons(base, tol) else ""
        report.reasons.append(f"base is itself incorrect on this case{on}; latency not compared")
    _judge_latency(report, run, constraints.max_regression_pct, with_base=comparable)
    return report


def check_reasons(check: Check, tol: float) -> list[str]:
    """Why one check (random inputs or a boundary probe) is wrong: the metric, the output, the first bad element."""
    on = f"; boundary probe {check.probe}" if check.probe else ""
    if check.error:
        probe = f" on boundary probe {check.probe}" if check.probe else ""
        return [f"{check.label or HEAD} raised or returned a bad output{probe}: {check.error}"]
    reasons = []
    v = check.failure
    if check.nan_inf and v is not None and v.metric == "nan_inf" and v.unwritten:  # the judge's NaN, left in place
        reasons.append(
            f"correctness: output {v.output} has elements the kernel never wrote, first at {_element(v)}{on}"
        )
    elif check.nan_inf:
        first = f", first at {_element(v)}" if v is not None and v.metric == "nan_inf" else ""
        reasons.append(f"stability: output has NaN/Inf where the reference has none (or misses them){first}{on}")
    if v is not None and v.metric != "nan_inf":
        reasons.append(violation_reason(v) + on)
    elif not check.outputs and check.max_abs_err is not None and check.max_abs_err > tol:  # a run without limits
        reasons.append(f"correctness: max_abs_err {_fmt(check.max_abs_err)} > tolerance {_fmt(tol)}{on}")
    return reasons


def _element(v: Violation) -> str:
    """`out[1, 0, 5, 37]: got 0.12, reference 0.95` (a cos_diff row: `out[1, 0, 5, :]`)."""
    if v.metric == "cos_diff":
        return f"{v.output}[{', '.join([*map(str, v.index), ':'])}]"
    where = f"{v.output}[{', '.join(map(str, v.index))}]"
    if v.unwritten:  # an output argument the judge poisoned before the call
        got = "NaN" if v.got is not None and math.isnan(v.got) else _fmt(v.got)
        return f"{where}: got {got} (never written), reference {_fmt(v.expected)}"
    return f"{where}: got {_fmt(v.got)}, reference {_fmt(v.expected)}" if v.got is not None else where


def violation_reason(v: Violation) -> str:
    """One line naming the metric, its value and limit, the output and the first bad element."""
    limit = _fmt(v.limit)
    if v.metric == "nan_inf":
        return f"stability: NaN/Inf where the reference has none (or misses them), first at {_element(v)}"
    what = {"max_abs_err": "max_abs_err", "max_rel_err": "max_rel_err", "cos_diff": "cos_diff (1 - cos-sim)"}
    bound = "tolerance" if v.metric == "max_abs_err" else "limit"
    first = "first bad row" if v.metric == "cos_diff" else "first bad element"
    return f"correctness: {what[v.metric]} {_fmt(v.value)} > {bound} {limit} on {v.output}, {first} {_element(v)}"


def _probe_report(check: Check, tol: float) -> ProbeReport:
    return ProbeReport(
        name=check.probe or "",
        verdict="fail" if check_reasons(check, tol) else "pass",
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
        report.reasons.append("performance not judged: fewer than two valid timing samples (throttled GPU?)")
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
        report.reasons.append("performance not judged: head and base were not timed in the same blocks")
        return
    est = stats.paired([h for h, _, _ in blocks], [b for _, b, _ in blocks], [f for _, _, f in blocks])
    low, high = est.interval()
    report.p50_ms = report.base_p50_ms * est.ratio  # head's p50 as the paired ratio puts it: the columns give Δ
    report.regression_pct = round((est.ratio - 1.0) * 100.0, 3)
    report.ci95_pct = [round((low - 1.0) * 100.0, 3), round((high - 1.0) * 100.0, 3)]
    verdict = stats.latency_verdict(low, high, max_regression_pct)
    span = f"p50 {report.regression_pct:+.2f}% (95% CI {report.ci95_pct[0]:+.2f}%..{report.ci95_pct[1]:+.2f}%)"
    if verdict == "fail":
        report.verdict = "fail"
        report.reasons.append(f"performance: {span} > {max_regression_pct:g}% limit")
    elif verdict == "inconclusive":
        report.verdict = "inconclusive"
        why = f" ({run.noisy}; measured {est.pairs} process pairs)" if run.noisy else ""
        report.reasons.append(f"performance inconclusive: {span} straddles the {max_regression_pct:g}% limit{why}")
    cpu_time_verdict(report, head_t, base_t, max_regression_pct)


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
    if verdict != "fail":
        return
    cpu = f"CPU time per call {report.cpu_regression_pct:+.2f}% (95% CI {report.cpu_ci95_pct[0]:+.2f}%.."
    cpu += f"{report.cpu_ci95_pct[1]:+.2f}%, every thread of the sandbox)"
    wall = ""
    if report.regression_pct is not None and report.ci95_pct is not None:
        wall = f"; wall time p50 {report.regression_pct:+.2f}% ({report.ci95_pct[0]:+.2f}%..{report.ci95_pct[1]:+.2f}%)"
    report.verdict = "fail"
    report.reasons = [r for r in report.reasons if not r.startswith("performance inconclusive:")]
    report.reasons.append(f"performance: {cpu} > {max_regression_pct:g}% limit{wall}")


def cpu_time_decides(report: CaseReport) -> None:
    """A CPU case whose wall-time interval straddles the limit passes when its CPU-time interval lies wholly within
    it (issue 40, 2: on the same samples the CPU-time interval decides more comparisons at the same error rates,
    benchmarks/README.md). Never against a decisive wall-time interval: only an inconclusive latency verdict is
    decided here, and a CPU time decisively above the limit fails in `cpu_time_verdict` whatever the clock says."""
    wall = report.reasons[0] if report.reasons else ""
    if report.verdict != "inconclusive" or not wall.startswith("performance inconclusive:") or len(report.reasons) != 1:
        return
    report.verdict = "pass"
    report.reasons = []


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


def simulated_verdict(report: CaseReport, sim: SimulatedCost, max_regression_pct: float) -> None:
    """Report a CPU case's simulated cost beside p50; where p50's interval straddles the limit, the simulated cost
    can fail the head — only when the instruction count and the simulated cycles are both above the limit (the cache
    model alone does not decide) and the cycle ratio lies inside that interval (the clock must not contradict it).

    It never passes a head: under valgrind the counted code shares its process with callgrind, unconfined, and can
    lower its own count (client requests, callgrind's memory, its own dump; docs/security.md, round three), so a
    count within the limit decides nothing (issue 37, 4). Base's count is base's own: head cannot raise it."""
    report.simulated = sim
    if sim.head is None or sim.base is None or sim.base.cycles <= 0 or sim.base.instructions <= 0:
        if report.verdict == "inconclusive" and sim.error:
            report.reasons = [f"{r}; no simulated cost: {sim.error}" for r in report.reasons]
        return
    sim.ratio = round(sim.head.cycles / sim.base.cycles, 5)
    sim.instructions_ratio = round(sim.head.instructions / sim.base.instructions, 5)
    if report.verdict != "inconclusive" or report.ci95_pct is None or report.status != CaseStatus.ok:
        return
    low, high = (1.0 + x / 100.0 for x in report.ci95_pct)
    limit = 1.0 + max_regression_pct / 100.0
    cost = f"simulated cost x{sim.ratio:.3f} (callgrind cycles; instructions x{sim.instructions_ratio:.3f})"
    wall = report.reasons[0].removeprefix("performance inconclusive: ") if report.reasons else "p50 undecided"
    if not low <= sim.ratio <= high:
        report.reasons = [f"{r}; the {cost} lies outside that interval, so it decides nothing" for r in report.reasons]
        return
    if (sim.ratio > limit) != (sim.instructions_ratio > limit):
        report.reasons = [f"{r}; the {cost} falls on both sides of the limit, so it decides nothing"
                          for r in report.reasons]  # fmt: skip
        return
    if sim.ratio <= limit:
        report.reasons = [f"{r}; the {cost} is within the limit, but the code it counts could have lowered its own "
                          "count, so it decides nothing" for r in report.reasons]  # fmt: skip
        return
    sim.decided = True
    report.verdict = "fail"
    report.reasons = [f"performance: {cost} > {max_regression_pct:g}% limit; on wall time alone {wall}"]


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


def explain(r: Resource, occ: Occupancy, factor: str, threads: int | None = None) -> str:
    """Why one resource allows only so many blocks, in the kernel author's numbers."""
    block = threads or r.threads or 0
    if factor == "registers":
        return register_arithmetic(r.registers, block, occ)
    if factor == "shared memory":
        return smem_arithmetic(occ)
    if factor == "threads":
        return f"{block} threads per block"
    if factor == "barriers":
        return f"{r.barriers} barriers per block"
    return f"at most {occ.limits.get(factor)} blocks per SM"


def _limited_by(r: Resource, occ: Occupancy, threads: int | None) -> str:
    return "; ".join(f"{f}: {explain(r, occ, f, threads)}" for f in occ.limited_by)


def _smem(r: Resource) -> str:
    """`static + dynamic B`; `?` for dynamic memory nobody sized; static alone when no launch was described."""
    if r.dynamic_smem_bytes is None:
        return f"{r.smem_bytes:,} + ? B" if r.extern_smem else f"{r.smem_bytes:,} B"
    return f"{r.smem_bytes:,} + {r.dynamic_smem_bytes:,} B"


def resource_reasons(
    head: list[Resource],
    base: list[Resource],
    constraints: Constraints,
    threads: dict[str, int] | None = None,
    arch: str = "sm_90a",
) -> tuple[list[str], list[str]]:
    """(failures, notes) for the resources and occupancy of head against base on one architecture.

    Fails: spills, static + dynamic smem per block over the architecture's opt-in limit (232,448 B on sm_90
    and sm_100; or `max_smem_bytes`), registers over `max_registers`, a launch that fits no SM, fewer resident
    warps per SM than base beyond `max_occupancy_drop_pct`, fewer than `min_warps_per_sm`. Any occupancy change
    is noted either way.
    """
    failures: list[str] = []
    notes: list[str] = []
    base_of = match_base(head, base)
    sm = table(arch)
    smem_limit = sm.smem_per_block_optin if sm is not None else SMEM_PER_BLOCK_LIMIT
    for r in head:
        if r.spill_bytes > constraints.max_spill_bytes:
            failures.append(
                f"resource: {r.function} spills {r.spill_bytes} bytes "
                f"(stores {r.spill_store_bytes} B, loads {r.spill_load_bytes} B)"
            )
        smem = r.smem_bytes + (r.dynamic_smem_bytes or 0)
        if smem > smem_limit:
            failures.append(
                f"resource: {r.function} uses {_smem(r)} shared memory per block (static + dynamic) > {smem_limit:,}"
            )
        if constraints.max_registers is not None and r.registers > constraints.max_registers:
            failures.append(f"resource: {r.function} uses {r.registers} registers > limit {constraints.max_registers}")
        if constraints.max_smem_bytes is not None and smem > constraints.max_smem_bytes:
            failures.append(
                f"resource: {r.function} uses {_smem(r)} smem per block > limit {constraints.max_smem_bytes:,}"
            )
        b = base_of.get(r.function)
        if (occ := _occupancy_of(r, threads, sm)) is not None:
            block = r.threads or (threads or {}).get(r.function)
            failures.extend(_occupancy_failures(r, occ, block, constraints, smem, smem_limit))
            if b is not None and b.occupancy is not None and occ.blocks_per_sm > 0:
                fatal, change = _occupancy_change(r, occ, b.occupancy, block, constraints)
                if change:
                    (failures if fatal else notes).append(change)
        if b is not None:
            named = f"{r.function} (in base {b.function})" if is_rename(r.function, b.function) else r.function
            for field in ("registers", "smem_bytes", "dynamic_smem_bytes", "stack_bytes"):
                new, old = getattr(r, field), getattr(b, field)
                if new is not None and old is not None and new > old:
                    notes.append(f"{named}: {field} {old} -> {new}")
    return failures, notes


def _occupancy_failures(
    r: Resource, occ: Occupancy, block: int | None, constraints: Constraints, smem: int, smem_limit: int
) -> list[str]:
    if occ.blocks_per_sm == 0:
        why = [explain(r, occ, f, block) for f, n in occ.limits.items() if n == 0 and f != "shared memory"]
        if smem <= smem_limit or why:  # an smem overflow alone is reported above
            why = why or [explain(r, occ, "shared memory", block)]
            return [f"resource: {r.function} cannot be resident on an SM: {'; '.join(why)}"]
        return []
    if constraints.min_warps_per_sm is not None and occ.warps_per_sm < constraints.min_warps_per_sm:
        return [
            f"resource: {r.function} keeps {occ.warps_per_sm} warps per SM < min_warps_per_sm "
            f"{constraints.min_warps_per_sm}, limited by {_limited_by(r, occ, block)}"
        ]
    return []


def _occupancy_change(
    r: Resource, occ: Occupancy, base: Occupancy, block: int | None, constraints: Constraints
) -> tuple[bool, str]:
    """(fails, text): fails when resident warps fell more than allowed; text "" when occupancy did not change."""
    if occ.warps_per_sm == base.warps_per_sm:
        return False, ""
    change = (
        f"{r.function}: occupancy {base.occupancy_pct:g}% -> {occ.occupancy_pct:g}% "
        f"({base.blocks_per_sm} -> {occ.blocks_per_sm} blocks/SM, {base.warps_per_sm} -> {occ.warps_per_sm} warps/SM), "
        f"limited by {_limited_by(r, occ, block)}"
    )
    drop, allowed = drop_pct(base, occ), constraints.max_occupancy_drop_pct
    fewer = f"{drop:g}% fewer resident warps than base"
    if drop > allowed:
        return True, f"resource: {change}: {fewer} > max_occupancy_drop_pct {allowed:g}%"
    if drop > 0:
        return False, f"{change}: {fewer}, within max_occupancy_drop_pct {allowed:g}%"
    return False, change


def _judge_resources(kernel: KernelReport, constraints: Constraints) -> None:
    """Every architecture's resource check; with more than one, each failure and finding names its architecture."""
    checks = kernel.resource_checks()
    for check in checks:
        _judge_arch(kernel, check, constraints, named=len(checks) > 1)


def _once(items: list[str], text: str) -> None:
    if text not in items:
        items.append(text)


def _judge_arch(kernel: KernelReport, check: ResourceCheckReport, constraints: Constraints, *, named: bool) -> None:
    on = f" on {check.arch}" if named else ""
    if check.status == "no_nvcc":
        _once(kernel.notes, "resource check skipped: nvcc is not on the PATH")
        return
    if check.status == "unsupported_arch":  # the toolchain's limit, not the change's: not decided, never a pass
        kernel.undecided.append(f"resource: {check.log_tail}")
        return
    if check.status == "compile_fail":  # base failing alike leaves it undecided: the runner's or the manifest's
        base_failed = check.base_status == "compile_fail"
        step = f"resource: CUDA sources for {check.arch}"
        failure, undecided = compile_failure(step, check.errors, base_failed, check.base_errors)
        kernel.reasons.extend([failure] if failure else [])
        kernel.undecided.extend([undecided] if undecided else [])
        return
    if check.base_status == "compile_fail":
        first = f": {describe(check.base_errors[0])}" if check.base_errors else " (see the base log)"
        kernel.notes.append(f"resource check: base's CUDA sources do not compile for {check.arch}{first}")
    kernel.reasons.extend(f"resource: {e}{on}" for e in check.launch_errors)
    kernel.undecided.extend(f"resource: {u}{on}" for u in check.launch_undecided)
    for note in check.launch_notes:
        _once(kernel.notes, note)
    failures, notes = resource_reasons(check.head, check.base, constraints, check.threads, check.arch)
    kernel.reasons.extend(f"{f}{on}" for f in failures)
    kernel.notes.extend(f"{n}{on}" for n in notes)


def probe_notes(cases: list[CaseReport]) -> list[str]:
    """A note when the cases that ran had no boundary probes: random inputs alone miss one-off errors."""
    reached = [c for c in cases if c.probe_count is not None]
    without = [c.name for c in reached if c.probe_count == 0]
    if not reached or not without:
        return []
    if len(without) == len(reached):
        return [
            "no boundary probes: the reference defines no make_probes, so only random inputs checked correctness "
            "(a mask or tile edge off by one can pass them; see docs/manifest.md, boundary probes)"
        ]
    return [f"no boundary probes for {', '.join(without)}: random inputs only"]


def small_shape_notes(cases: list[CaseReport]) -> list[str]:
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

    return [
        f"faster only on the smaller cases: {listed(faster)} (base p50 up to {faster[-1].base_p50_ms:.3g} ms), while "
        f"the larger ones are not: {listed(rest)} (from {rest[0].base_p50_ms:.3g} ms) — is it only faster on small "
        "batches?"
    ]


_ORDER = {"error": 3, "fail": 2, "inconclusive": 1, "pass": 0, "skipped": -1}


def kernel_verdict(
    kernel: KernelReport,
    static_findings: list[str],
    cases: list[CaseReport],
    constraints: Constraints,
    policy: Policy,
) -> KernelReport:
    """Fold static findings, builds, resources and cases into the kernel's verdict.

    A failing gate fails it; otherwise whatever only a person can accept makes it `needs_accept`, and whatever
    was not decided (a latency interval straddling the limit under the neutral policy, no case that could run,
    what the review already put in `kernel.undecided`) makes it `undecided`: a pass is only what was judged."""
    kernel.reasons.extend(static_findings)
    kernel.cases = cases
    kernel.notes.extend(probe_notes(cases))
    kernel.notes.extend(small_shape_notes(cases))
    if static_findings:
        kernel.verdict = "fail"
        return kernel
    if kernel.build is not None and not kernel.build.ok:
        base_failed = kernel.base_build is not None and not kernel.base_build.ok
        base_errors = kernel.base_build.errors if kernel.base_build is not None else []
        step = f"build ({kernel.build.device})"
        failure, undecided = compile_failure(step, kernel.build.errors, base_failed, base_errors)
        if failure is not None:
            kernel.verdict = "fail"
            kernel.reasons.append(failure)
            return kernel
        kernel.undecided.extend([undecided] if undecided else [])  # base fails alike: no case could run on either
    elif kernel.base_build is not None and not kernel.base_build.ok:
        first = f": {describe(kernel.base_build.errors[0])}" if kernel.base_build.errors else ""
        kernel.notes.append(f"base does not build{first}: no latency or resource comparison")
    _judge_resources(kernel, constraints)
    worst = max((c.verdict for c in cases), key=_ORDER.__getitem__, default="skipped")
    deciding = ("fail", "error", "inconclusive") if policy.inconclusive == "fail" else ("fail", "error")
    for c in cases:
        if c.verdict in deciding:  # the case's own reasons, each naming the case once (never "case: fail")
            kernel.reasons.extend(case_reason(c.name, r) for r in c.reasons or [f"{c.verdict}: {c.status.value}"])
        elif c.verdict == "inconclusive":
            kernel.undecided.extend(case_reason(c.name, r) for r in c.reasons or ["latency undecided"])
    if kernel.reasons and worst in ("pass", "inconclusive", "skipped"):
        worst = "fail"
    if worst in ("fail", "error"):
        kernel.verdict = worst  # type: ignore[assignment]
        return kernel
    if not any(c.verdict != "skipped" for c in cases):
        if not cases and kernel.resource_check is not None and kernel.resource_check.status == "ok":
            kernel.undecided.append(RESOURCES_ONLY)  # a resource-only kernel: its one gate ran and passed
        elif cases or not kernel.undecided:  # a kernel undecided for its own reason needs no "no case" besides
            kernel.undecided.append(f"no case ran: {not_run_summary(cases)}" if cases else "the manifest has no case")
    kernel.accept_needed.extend(implausible_speedups(cases, constraints.max_speedup))
    if kernel.accept_needed:
        kernel.verdict = "needs_accept"
    elif kernel.undecided:
        kernel.verdict = "undecided"
    else:
        kernel.verdict = "pass"
    return kernel


def not_run_summary(cases: list[CaseReport]) -> str:
    """ "2 cuda cases: needs a CUDA GPU; this machine has none" — the cases that did not run, by reason."""
    by_reason: dict[str, list[str]] = {}
    for c in cases:
        if c.verdict == "skipped":
            by_reason.setdefault("; ".join(c.reasons) or "not run", []).append(c.device)
    return "; ".join(
        f"{len(devices)} {'/'.join(dict.fromkeys(devices))} case{'s' if len(devices) != 1 else ''} ({why})"
        for why, devices in by_reason.items()
    )


def overall(kernels: list[KernelReport]) -> ReportVerdict:
    """The review's verdict: its worst kernel (a kernel the change does not touch counts as a pass)."""
    verdicts: set[str] = {k.verdict for k in kernels}
    worst_first: tuple[ReportVerdict, ...] = ("error", "fail", "needs_accept", "undecided")
    return next((v for v in worst_first if v in verdicts), "pass")
