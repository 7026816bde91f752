"""The gate (bot/verdict/gate.py): a case's correctness, stability and latency, a kernel's resources and spills, the
inconclusive policy, and a renamed template instantiation matched with its base."""

from __future__ import annotations

from typing import Any

import numpy as np

from bot.config.manifest_tables import Case, Constraints
from bot.models.finding import Outcome, Phrase
from bot.models.judging import CaseRun, Check, Spot, Timing
from bot.models.report import CaseReport, CaseStatus, KernelReport, Resource
from bot.present.comment_md import delta_cell
from bot.verdict.gate import Policy, case_verdict, kernel_verdict, overall
from bot.verdict.written import written_case, written_kernel
from tests.gate_lines import resource_reasons


def judged_case(*args: Any, **kw: Any) -> CaseReport:
    """`case_verdict`'s report as report.json states it (its findings' lines written)."""
    return written_case(case_verdict(*args, **kw))


def judged_kernel(*args: Any, **kw: Any) -> KernelReport:
    """`kernel_verdict`'s report as report.json states it (its findings' lines written)."""
    return written_kernel(kernel_verdict(*args, **kw))


def _samples(center: float, n: int, seed: int, noise: float = 0.01) -> list[float]:
    rng = np.random.default_rng(seed)
    return list(center * (1 + noise * rng.standard_normal(n)))


CASE = Case(name="square", device="cpu", dtype="bfloat16", shape={"m": 8})
LIMITS = Constraints()


def test_gate_case_correctness_stability_and_latency():
    ok = CaseRun(
        status=CaseStatus.ok,
        checks={"head": Check(label="head", max_abs_err=1e-4)},
        timings={
            "head": Timing(label="head", samples_ms=_samples(1.2, 30, 1)),
            "base": Timing(label="base", samples_ms=_samples(1.0, 30, 2)),
        },
    )
    slow = judged_case(CASE, LIMITS, ok)
    assert slow.verdict == "fail" and slow.reasons[0].startswith("performance: p50 +2")
    wrong = judged_case(
        CASE, LIMITS, CaseRun(status=CaseStatus.ok, checks={"head": Check(label="head", max_abs_err=0.5)})
    )
    assert wrong.verdict == "fail" and wrong.status == CaseStatus.incorrect
    assert wrong.reasons == ["correctness: max_abs_err 0.5 > tolerance 0.01"]
    nan = judged_case(
        CASE, LIMITS, CaseRun(status=CaseStatus.ok, checks={"head": Check(label="head", max_abs_err=0.0, nan_inf=True)})
    )
    assert nan.verdict == "fail" and nan.nan_inf
    crashed = judged_case(
        CASE,
        LIMITS,
        CaseRun(
            status=CaseStatus.crashed, detail=Phrase.as_written("killed by signal 11 (SIGSEGV)"), failed_label="head"
        ),
    )
    assert crashed.verdict == "error" and crashed.reasons == ["head crashed: killed by signal 11 (SIGSEGV)"]
    skipped = judged_case(CASE, LIMITS, None, "needs a CUDA GPU")
    assert skipped.verdict == "skipped" and skipped.status == CaseStatus.skipped


def test_resource_gate_occupancy_limits_and_a_missing_nvcc():
    from bot.models.report import ResourceCheckReport

    big = Resource(function="attn<8>", registers=128, smem_bytes=240_000)
    check = ResourceCheckReport(
        status="ok",
        head=[big],
        threads={"attn<8>": 1024},
        base=[Resource(function="attn<8>", registers=96, smem_bytes=1024)],
    )
    judged = judged_kernel(
        KernelReport(name="k", domain="d", changed=True, verdict="skipped", resource_check=check),
        [],
        [],
        LIMITS,
        Policy(),
    )
    assert judged.verdict == "fail"
    assert judged.reasons == [
        "resource: attn<8> uses 240,000 B shared memory per block (static + dynamic) > 232,448",
        "resource: attn<8> cannot be resident on an SM: 128 registers x 1024 threads = 131,072 allocated per block",
    ]
    assert "attn<8>: registers 96 -> 128" in judged.notes
    none = judged_kernel(
        KernelReport(
            name="k", domain="d", changed=True, verdict="skipped", resource_check=ResourceCheckReport(status="no_nvcc")
        ),
        [],
        [],
        LIMITS,
        Policy(),
    )
    assert "resource check skipped: nvcc is not on the PATH" in none.notes


def test_gate_kernel_spills_fail_and_inconclusive_follows_the_policy():
    from bot.models.report import ResourceCheckReport

    spill = Resource(
        function="gemm_kernel<128,128,64>", registers=255, spill_bytes=96, spill_store_bytes=48, spill_load_bytes=48
    )
    kernel = KernelReport(
        name="k",
        domain="deepgemm",
        changed=True,
        verdict="skipped",
        resource_check=ResourceCheckReport(status="ok", head=[spill], threads={spill.function: 128}),
    )
    judged = judged_kernel(kernel, [], [], LIMITS, Policy())
    assert judged.verdict == "fail"
    assert judged.reasons == ["resource: gemm_kernel<128,128,64> spills 96 bytes (stores 48 B, loads 48 B)"]
    unsure = judged_case(CASE, LIMITS, None, "x").model_copy(update={"verdict": "inconclusive", "reasons": []})
    neutral = judged_kernel(
        KernelReport(name="k", domain="d", changed=True, verdict="skipped"),
        [],
        [unsure],
        LIMITS,
        Policy(inconclusive="neutral"),
    )
    strict = judged_kernel(
        KernelReport(name="k", domain="d", changed=True, verdict="skipped"),
        [],
        [unsure],
        LIMITS,
        Policy(inconclusive="fail"),
    )
    assert (neutral.verdict, strict.verdict) == ("undecided", "fail")  # undecided is never a pass
    assert overall([neutral, strict]) == "fail" and overall([neutral]) == "undecided"


def test_renamed_kernel_functions_stand_beside_base_by_signature_and_unmatched_base_rows_are_removed():
    from bot.verdict.gate_resources import match_base, removed_in_head

    base = [
        Resource(function="void forward_kernel(float const*, float*, int)", registers=40),
        Resource(function="void backward_kernel(float const*, float*, int)", registers=60),
        Resource(function="void stats_kernel(double*)", registers=10),
    ]
    head = [
        Resource(function="void forward_kernel_naive(float const*, float*, int)", registers=40),
        Resource(function="void forward_kernel_wmma(float const*, float*, int)", registers=72),
        Resource(function="void backward_kernel(float const*, float*, int)", registers=60),
    ]
    matched = {h: b.function for h, b in match_base(head, base).items()}
    assert matched == {  # both renamed functions beside base's forward_kernel: its name starts theirs
        "void forward_kernel_naive(float const*, float*, int)": "void forward_kernel(float const*, float*, int)",
        "void forward_kernel_wmma(float const*, float*, int)": "void forward_kernel(float const*, float*, int)",
        "void backward_kernel(float const*, float*, int)": "void backward_kernel(float const*, float*, int)",
    }
    assert [r.function for r in removed_in_head(head, base)] == ["void stats_kernel(double*)"]
    _, notes = resource_reasons(head, base, LIMITS)
    assert notes == [
        "void forward_kernel_wmma(float const*, float*, int) (in base void forward_kernel(float const*, float*, "
        "int)): registers 40 -> 72"
    ]


def test_template_arguments_that_differ_in_unsigned_numbers_pair_and_one_function_each_side_pairs():
    from bot.verdict.gate_resources import match_base, removed_in_head

    base = [Resource(function=f"void k<128u, {b}>(float*)", registers=90) for b in ("true", "false")]
    head = [Resource(function=f"void k<256u, {b}>(float*)", registers=96) for b in ("true", "false")]
    assert {h: b.function for h, b in match_base(head, base).items()} == {
        "void k<256u, true>(float*)": "void k<128u, true>(float*)",
        "void k<256u, false>(float*)": "void k<128u, false>(float*)",
    }
    # A rename that changes the parameters too: the one function left on each side is the pair.
    lone_base = [Resource(function="void old_k(float*)", registers=1)]
    lone_head = [Resource(function="void new_k(half*, int)", registers=1)]
    assert match_base(lone_head, lone_base)["void new_k(half*, int)"].function == "void old_k(float*)"
    # Two left on each side with nothing in common: no guess; base's rows are listed as removed.
    two_base = [Resource(function="void a(float*)", registers=1), Resource(function="void b(int*)", registers=1)]
    two_head = [Resource(function="void c(half*)", registers=1), Resource(function="void d(char*)", registers=1)]
    assert match_base(two_head, two_base) == {}
    assert [r.function for r in removed_in_head(two_head, two_base)] == ["void a(float*)", "void b(int*)"]


def test_a_renamed_template_instantiation_is_still_compared_with_its_base():
    from bot.verdict.gate_resources import match_base

    base = [
        Resource(function="k<128, 64, false>(int)", registers=200),
        Resource(function="k<128, 64, true>(int)", registers=180),
        Resource(function="merge(int)", registers=20),
    ]
    head = [
        Resource(function="k<256, 64, false>(int)", registers=230),
        Resource(function="k<256, 64, true>(int)", registers=170),
        Resource(function="merge(int)", registers=22),
    ]
    matched = match_base(head, base)
    assert {h: b.function for h, b in matched.items()} == {
        "k<256, 64, false>(int)": "k<128, 64, false>(int)",
        "k<256, 64, true>(int)": "k<128, 64, true>(int)",
        "merge(int)": "merge(int)",
    }
    _, notes = resource_reasons(head, base, LIMITS)
    assert notes == ["k<256, 64, false>(int): registers 200 -> 230", "merge(int): registers 20 -> 22"]


def _timed(wall: float, cpu: float | None, seed: int, pairs: int = 6, blocks: int = 5) -> Timing:
    """A side timed in `pairs` processes of `blocks` blocks: wall ms and CPU ms per call (None: no CPU figures)."""
    walls = [_samples(wall, blocks, seed * 100 + p) for p in range(pairs)]
    cpus = [_samples(cpu, blocks, seed * 100 + p + 50, noise=0.005) for p in range(pairs)] if cpu else []
    flat = [x for p in walls for x in p]
    return Timing(label="", samples_ms=flat, processes=walls, cpu_processes=cpus)


def _run(head: Timing, base: Timing) -> CaseRun:
    return CaseRun(
        status=CaseStatus.ok,
        checks={"head": Check(label="head", max_abs_err=1e-4)},
        timings={"head": head.model_copy(update={"label": "head"}), "base": base.model_copy(update={"label": "base"})},
    )


def test_a_head_faster_on_the_clock_but_decisively_dearer_in_cpu_time_fails():
    """Issue 37, 3: a quarter of the work on a helper thread, 12 % more of it: wall -10 %, CPU time per call +12 %."""
    report = judged_case(CASE, LIMITS, _run(_timed(0.90, 1.12, 1), _timed(1.0, 1.0, 2)))
    assert report.verdict == "fail" and report.ci95_pct is not None and report.ci95_pct[1] < 0  # faster on the clock
    assert report.cpu_regression_pct is not None and 10.0 < report.cpu_regression_pct < 14.0
    assert report.cpu_ci95_pct is not None and report.cpu_ci95_pct[0] > 3.0
    assert report.base_cpu_ms is not None and report.cpu_ms is not None and report.cpu_ms / report.base_cpu_ms > 1.10
    (reason,) = report.reasons
    assert (
        reason.startswith("performance: CPU time per call +1") and "every thread of the sandbox) > 3% limit" in reason
    )
    assert "; wall time p50 -" in reason
    cell = delta_cell(report)
    assert cell.startswith(f"{report.regression_pct:+.2f}% (") and " · **CPU +1" in cell and cell.endswith("❌ > 3%")


def test_cpu_time_within_the_limit_or_straddling_it_decides_nothing():
    same = judged_case(CASE, LIMITS, _run(_timed(0.90, 1.01, 1), _timed(1.0, 1.0, 2)))
    assert same.verdict == "pass" and same.reasons == [] and same.cpu_ci95_pct is not None
    assert same.cpu_ci95_pct[1] < 3.0 and delta_cell(same).endswith(
        f" · CPU {same.cpu_regression_pct:+.2f}% ({same.cpu_ci95_pct[0]:+.2f}..{same.cpu_ci95_pct[1]:+.2f})"
    )
    noisy = _timed(0.9, 1.0, 1)  # processes alternately 2 % below and 8 % above: the CPU interval straddles +3 %
    noisy.cpu_processes = [[x * (1.08 if p % 2 else 0.98) for x in row] for p, row in enumerate(noisy.cpu_processes)]
    straddling = judged_case(CASE, LIMITS, _run(noisy, _timed(1.0, 1.0, 2)))
    assert straddling.cpu_ci95_pct is not None and straddling.cpu_ci95_pct[0] < 3.0 < straddling.cpu_ci95_pct[1]
    assert straddling.verdict == "pass", straddling.reasons


def test_a_wall_time_pass_is_not_taken_while_the_cpu_time_straddles_above_the_limit():
    """A head faster on the clock whose CPU time per call is +10 % at its estimate but too noisy to fail (a helper
    thread that works only now and then, or a loaded runner): undecided, never a pass; the comment's reason names
    both clocks."""
    noisy = _timed(0.9, 1.0, 1)  # processes alternately 2 % and 20 % above base's CPU time: about +10 %, straddling
    noisy.cpu_processes = [[x * (1.20 if p % 2 else 1.02) for x in row] for p, row in enumerate(noisy.cpu_processes)]
    leaning = judged_case(CASE, LIMITS, _run(noisy, _timed(1.0, 1.0, 2)))
    assert leaning.ci95_pct is not None and leaning.ci95_pct[1] < 0  # the clock alone would pass it
    assert leaning.cpu_ci95_pct is not None and leaning.cpu_ci95_pct[0] < 3.0 < leaning.cpu_ci95_pct[1]
    assert leaning.cpu_regression_pct is not None and leaning.cpu_regression_pct > 3.0
    assert leaning.verdict == "inconclusive", leaning.reasons
    (reason,) = leaning.reasons
    assert reason.startswith("performance inconclusive: CPU time per call +") and "above it at its estimate" in reason
    assert "; wall time p50 -" in reason
    assert [f.outcome for f in leaning.findings] == [Outcome.undecided]


def test_a_head_failed_on_both_clocks_names_both_and_a_case_without_cpu_figures_has_none():
    both = judged_case(CASE, LIMITS, _run(_timed(1.2, 1.2, 1), _timed(1.0, 1.0, 2)))
    assert both.verdict == "fail" and [r.split(" ")[1] for r in both.reasons] == ["p50", "CPU"]
    assert delta_cell(both).startswith(f"**{both.regression_pct:+.2f}%**")
    gpu = judged_case(CASE, LIMITS, _run(_timed(0.9, None, 1), _timed(1.0, None, 2)))  # no CPU time: a GPU case
    assert gpu.verdict == "pass" and gpu.cpu_regression_pct is None and gpu.cpu_ci95_pct is None
    assert "CPU" not in delta_cell(gpu)
    undecided = judged_case(CASE, LIMITS, _run(_timed(1.03, 1.15, 1), _timed(1.0, 1.0, 2)))  # the clock straddles
    assert undecided.verdict == "fail" and undecided.reasons[0].startswith("performance: CPU time per call")
    assert not any(r.startswith("performance inconclusive") for r in undecided.reasons)


def test_an_output_argument_the_kernel_never_wrote_is_named_with_its_element():
    from bot.models.report import Violation
    from bot.verdict.gate_correctness import check_findings
    from bot.wording.messages import render

    def check_reasons(check: Check, tol: float) -> list[str]:  # its lines as its case states them
        return [render(f, case=False) for f in check_findings(check, tol)]

    never = Violation(metric="nan_inf", output="C", index=[199, 327], value=1.0, got=float("nan"), expected=3.25)
    check = Check(max_abs_err=0.0, nan_inf=True, failure=never.model_copy(update={"unwritten": True}))
    assert check_reasons(check, 1e-2) == [
        "correctness: output C has elements the kernel never wrote, first at C[199, 327]: got NaN (never written), "
        "reference 3.25"
    ]
    # A NaN the kernel computed (not the judge's poison left in place) stays a stability failure.
    assert check_reasons(check.model_copy(update={"failure": never}), 1e-2) == [
        "stability: output has NaN/Inf where the reference has none (or misses them), first at C[199, 327]: got nan, "
        "reference 3.25"
    ]


def test_a_launch_that_is_declared_not_measured_leaves_the_kernel_undecided_never_unchanged():
    from bot.models.report import ResourceCheckReport

    same = Resource(function="gemm<3>", registers=96, threads=128, dynamic_smem_bytes=98_304)
    unmeasured = (
        "launch figures declared, not measured: k/gemm.cu holds the launch: k/gemm.cu:40 gemm<<<…, 128, n>>> (…)"
    )
    undecided = [Phrase.as_written(unmeasured)]
    check = ResourceCheckReport(status="ok", head=[same], base=[same], launch_undecided=undecided)
    judged = judged_kernel(
        KernelReport(name="k", domain="d", changed=True, verdict="skipped", resource_check=check),
        [],
        [CaseReport(name="square", device="cpu", tolerance=0.01, verdict="pass")],
        LIMITS,
        Policy(),
    )
    assert judged.verdict == "undecided"
    assert judged.undecided == [f"resource: {unmeasured}"]
    assert not any("unchanged" in n for n in judged.notes)


def test_a_wall_time_straddling_the_limit_is_decided_by_a_cpu_time_interval_within_it():
    """Issue 40, 2: processes alternately 2 % below and 8 % above on the clock (p50's interval straddles +3 %), CPU
    time per call +1 % in every process: the CPU-time interval decides the case, and the comment says so."""
    noisy = _timed(1.0, 1.01, 1)
    noisy.processes = [[x * (1.08 if p % 2 else 0.98) for x in row] for p, row in enumerate(noisy.processes)]
    noisy.samples_ms = [x for row in noisy.processes for x in row]
    report = judged_case(CASE, LIMITS, _run(noisy, _timed(1.0, 1.0, 2)))
    assert report.ci95_pct is not None and report.ci95_pct[0] < 3.0 < report.ci95_pct[1]  # the clock straddles
    assert report.cpu_ci95_pct is not None and report.cpu_ci95_pct[1] < 3.0
    assert report.verdict == "pass" and report.reasons == []
    assert delta_cell(report).endswith("✅ decided: p50 straddled 3%") and " · **CPU +" in delta_cell(report)
    cpu_straddles = noisy.model_copy(
        update={"cpu_processes": [[x * (1.08 if p % 2 else 0.98) for x in r] for p, r in enumerate(noisy.processes)]}
    )
    undecided = judged_case(CASE, LIMITS, _run(cpu_straddles, _timed(1.0, 1.0, 2)))  # neither clears it
    assert undecided.verdict == "inconclusive" and undecided.reasons[0].startswith("performance inconclusive:")
    assert "decided" not in delta_cell(undecided)


def test_a_decisive_wall_time_is_never_overturned_by_a_cpu_time_within_the_limit():
    slow = judged_case(CASE, LIMITS, _run(_timed(1.10, 1.0, 1), _timed(1.0, 1.0, 2)))  # sleeping: the clock fails
    assert slow.ci95_pct is not None and slow.ci95_pct[0] > 3.0
    assert slow.cpu_ci95_pct is not None and slow.cpu_ci95_pct[1] < 3.0
    assert slow.verdict == "fail" and slow.reasons[0].startswith("performance: p50 +")
    assert "decided" not in delta_cell(slow)


def test_scratch_a_head_leaves_non_zero_fails_it_unless_base_leaves_it_so_too():
    """Issue 50, 1: every timed call gets zeroed scratch; a head that leaves it non-zero fails (its next call in
    production would start from its leftovers), and where base does so alike it is reported as base's, not failed."""
    dirty = Spot(label="head", checked=10, scratch_checked=250, scratch_left=250, scratch_first="workspace[0] = 3786")
    same = _run(_timed(1.0, 1.0, 1), _timed(1.0, 1.0, 2))
    head_only = judged_case(CASE, LIMITS, same.model_copy(update={"spots": {"head": dirty}}))
    assert head_only.verdict == "fail" and head_only.reasons == [
        "correctness: left scratch non-zero after 250 of 250 timed calls, first at workspace[0] = 3786: every call "
        "gets zeroed scratch and must leave it zeroed, as in production, where nothing zeroes it between calls"
    ]
    base_too = {"head": dirty, "base": dirty.model_copy(update={"label": "base"})}
    alike = judged_case(CASE, LIMITS, same.model_copy(update={"spots": base_too}))
    assert alike.verdict == "pass", alike.reasons
    assert any(line.startswith("in base too: scratch left non-zero after 250 of 250") for line in alike.reasons), alike
