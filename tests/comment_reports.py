"""Reports the suite renders into comments: one per situation a reviewer meets, and the biggest realistic one.

Numbers follow real reviews of this repository's kernels (the README demo on a 2-core CPU runner: square_512
and ragged_200x328x264 run, seven cuda cases need a GPU; sm_90a resources of deepgemm_tile's two functions).
"""

from __future__ import annotations

from collections.abc import Callable

from bot.agent.client import ChatResult
from bot.agent.exchange import ReplyCut, answered
from bot.edges.peak import measured_peak
from bot.models.agent_report import AgentReport, aggregate_agents
from bot.models.cost import CpuUse, SideCost, SimulatedCost
from bot.models.finding import Finding, Gate, Outcome, Phrase
from bot.models.ledger import AcceptanceRow, UsageRow
from bot.models.report import (
    Build,
    CaseReport,
    CaseStatus,
    CompileError,
    Coverage,
    Isolation,
    KernelReport,
    Listed,
    Machine,
    Occupancy,
    Report,
    Resource,
    ResourceCheckReport,
    RunnerHealth,
)
from bot.spend.budget import BudgetState
from bot.spend.pull_request import PrContext, pr_context
from bot.untrusted import userns
from bot.untrusted.sandbox import refusal, unisolated
from bot.verdict import change
from bot.verdict.compile_errors import compile_phrases
from bot.verdict.findings import add_case, add_kernel
from bot.verdict.gate import not_run_phrases
from bot.verdict.kernel import drift_findings
from bot.verdict.occupancy import register_phrase
from bot.verdict.throughput import Peak, judge_throughput
from bot.wording.messages import phrase

BASE = "9f048766d08c0bb6cf31c2dd8400732279650eae"
HEAD = "13392073d7124eb883404f4059b7907e50c6ea51"
OLD_HEAD = "0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c"
PR = 42
CUDA_CASES = (
    "gemm_4096",
    "m128_n2112_k7168",
    "m128_n7168_k2048",
    "m4096_n2112_k7168",
    "m4096_n7168_k2048",
    "ragged_cuda_200x328x264",
    "odd_cuda_77x93x101",
)
NO_GPU = "needs a CUDA GPU; this machine has none"
HEALTH = RunnerHealth(cores=2, load1=0.41, governor="performance", cpu_mhz=2399.9)
GPU_HEALTH = RunnerHealth(
    cores=16, load1=1.2, governor="performance", cpu_mhz=3100.0, gpu_sm_mhz=1980, gpu_mem_mhz=2619, gpu_temp_c=41
)
FN = "void deepgemm_tile::gemm_bf16_kernel<128, {n}, 64, {split}>(unsigned short const*, unsigned short const*, float*, int, int, int, int, int, int, int)"  # noqa: E501


def cpu_use(timed: float = 0.09, untimed: float = 0.02) -> dict[str, CpuUse]:
    return {
        "head": CpuUse(timed_wall_s=timed, timed_cpu_s=timed * 0.8, untimed_cpu_s=untimed),
        "base": CpuUse(timed_wall_s=timed * 1.05, timed_cpu_s=timed * 0.85, untimed_cpu_s=untimed / 2),
    }


def found(gate: Gate, key: str, outcome: Outcome = Outcome.fail, **params: str | int | float) -> Finding:
    """A finding as the gate makes it (bot/verdict/gate.py)."""
    return Finding(gate=gate, outcome=outcome, key=key, params=params)


def span(delta: float, low: float, high: float, **more: str | int | float) -> dict[str, str | int | float]:
    """A latency finding's parameters: Δp50, its 95% CI and the 3% limit, formatted as the gate formats them."""
    return {"delta": f"{delta:+.2f}%", "low": f"{low:+.2f}%", "high": f"{high:+.2f}%", "limit": "3", **more}


def with_findings(case: CaseReport, *findings: Finding, **update: object) -> CaseReport:
    """The case with these findings (and the reasons rendered from them) in place of its own."""
    case = case.model_copy(update={"reasons": [], "findings": [], **update})
    for f in findings:
        add_case(case, f)
    return case


def timed(name: str, delta: float, low: float, high: float, p50: float = 4.0, **update: object) -> CaseReport:
    """A case measured on both sides: correct, Δp50 `delta` with its CI, judged like bot.gate does at 3%."""
    verdict = "fail" if low > 3.0 else "pass" if high <= 3.0 else "inconclusive"
    findings = []
    if verdict == "fail":
        findings.append(found(Gate.performance, "performance.regression", **span(delta, low, high)))
    elif verdict == "inconclusive":
        findings.append(
            found(Gate.performance, "performance.inconclusive", Outcome.undecided, **span(delta, low, high))
        )
    case = CaseReport(
        name=name,
        device="cpu",
        tolerance=0.01,
        max_abs_err=1.9e-05,
        p50_ms=p50 * (1 + delta / 100),
        base_p50_ms=p50,
        regression_pct=delta,
        ci95_pct=[low, high],
        max_regression_pct=3.0,
        samples=67,
        base_samples=67,
        processes=6,
        stop_reason="decided" if verdict != "inconclusive" else "max_seconds",
        seed="1351305928456565723",
        spot_checks=6,
        sandbox_cpu=cpu_use(),
        other_cores=0.08,
        verdict=verdict,
    )
    return with_findings(case, *findings, **update)


def skipped(name: str, device: str = "cuda", why: str = "run.no_gpu") -> CaseReport:
    """A case the runner could not run, for the catalog's reason `why` (bot/verdict/kernel.py not_run_report)."""
    case = CaseReport(name=name, device=device, tolerance=0.01, status=CaseStatus.skipped, verdict="skipped")  # type: ignore[arg-type]
    return with_findings(case, found(Gate.run, why, Outcome.undecided))


def resources(n: int, threads: int, dyn: int, blocks: int) -> list[Resource]:
    occ = Occupancy(
        blocks_per_sm=blocks,
        warps_per_sm=blocks * threads // 32,
        occupancy_pct=blocks * threads / 32 / 64 * 100,
        limited_by=["registers", "shared memory"],
        registers_per_block=216 * threads,
        smem_per_block=dyn + 1024,
    )
    return [
        Resource(
            function=FN.format(n=n, split=split),
            registers=215 + 8 * i,
            extern_smem=True,
            threads=threads,
            dynamic_smem_bytes=dyn,
            barriers=1,
            occupancy=occ,
        )
        for i, split in enumerate(("false", "true"))
    ]


def builds(kernel: KernelReport, device: str = "cpu") -> KernelReport:
    head, base = resources(128, 128, 98_304, 2), resources(128, 128, 98_304, 2)
    kernel.build = Build(ok=True, seconds=21.4, cached=False, device=device, resources=head)  # type: ignore[arg-type]
    kernel.base_build = Build(ok=True, seconds=0.0, cached=True, device=device, resources=base)  # type: ignore[arg-type]
    kernel.resource_check = ResourceCheckReport(status="ok", head=head, base=base, base_status="ok")
    return kernel


def kernel(name: str, cases: list[CaseReport], verdict: str, *findings: Finding, **kw) -> KernelReport:
    """The kernel as kernel_verdict states it: its own findings, then each failing case's, naming the case."""
    k = KernelReport(
        name=name,
        domain=kw.pop("domain", "deepgemm"),
        changed=True,
        verdict=verdict,  # type: ignore[arg-type]
        cases=cases,
        **kw,
    )
    size = Finding(gate=Gate.review, outcome=Outcome.note, key="review.change_size",
                   params={"files": 1, "added": 1, "removed": 1})  # fmt: skip
    for f in (size, *findings):
        add_kernel(k, f)
    for c in cases:
        outcome = {"fail": Outcome.fail, "error": Outcome.error, "inconclusive": Outcome.undecided}.get(c.verdict)
        if outcome is not None and (outcome != Outcome.undecided or verdict == "undecided"):
            for f in c.findings:
                add_kernel(k, f.model_copy(update={"outcome": outcome}))
    return builds(k)


CREATED = "2026-11-30T20:22:21+00:00"


def report(kernels: list[KernelReport], **update: object) -> Report:
    from bot.verdict.gate import overall

    verdict = overall(kernels)
    from bot.agent.run import OFFLINE

    agent = AgentReport(status="offline", domain="deepgemm", model="deepseek-v4", reason=OFFLINE)
    r = Report(
        base_sha=BASE,
        head_sha=HEAD,
        pr=None,
        verdict=verdict,  # type: ignore[arg-type]
        kernels=[*kernels, KernelReport(name="flashmla_decode", domain="flashmla", changed=False, verdict="skipped")],
        agents=[agent],
        agent=agent,
        environment=Machine(device="cpu", torch="2.13.0+cpu", nvcc="13.0.88", python="3.11.7"),
        isolation=Isolation(mode="bwrap", tool="bubblewrap 0.11.0"),
        health=HEALTH,
        created_at=CREATED,
        opgate_version="0.1.0",
    )
    return r.model_copy(update=update)


def demo_cases(first: CaseReport, second: CaseReport) -> list[CaseReport]:
    return [first, second, *(skipped(n) for n in CUDA_CASES)]


# -- the situations ------------------------------------------------------------------------------------------


def passing() -> Report:
    faster = timed("square_512", -7.48, -9.58, -5.11, p50=31.15)
    cases = demo_cases(faster, timed("ragged_200x328x264", 0.41, -1.2, 1.9))
    return report([kernel("deepgemm_tile", cases, "pass")])


def fail_latency() -> Report:
    """The issue's example: ragged_200x328x264 +10.53% (CI +9.73..+12.00) against the 3% limit."""
    cases = demo_cases(timed("square_512", -1.2, -2.9, 0.4, p50=31.15), timed("ragged_200x328x264", 10.53, 9.73, 12.0))
    return report([kernel("deepgemm_tile", cases, "fail")])


def fail_correctness() -> Report:
    wrong = timed("cpu_seq_8192", 0.0, 0.0, 0.0).model_copy(
        update=dict(
            status=CaseStatus.incorrect,
            max_abs_err=0.0625,
            tolerance=0.01,
            verdict="fail",
            p50_ms=None,
            base_p50_ms=None,
            regression_pct=None,
            ci95_pct=None,
            samples=0,
            base_samples=0,
            processes=0,
            stop_reason=None,
            spot_checks=0,
            sandbox_cpu={},
            other_cores=None,
        )
    )
    wrong = with_findings(wrong, found(Gate.correctness, "correctness.max_abs_err_total", value="0.0625", limit="0.01"))
    nan = with_findings(
        wrong, found(Gate.stability, "stability.nan_inf"), name="cpu_seq_4096", nan_inf=True, max_abs_err=0.0
    )
    cases = [timed("cpu_seq_2048", 1.1, -0.5, 2.4), nan, wrong, skipped("cuda_seq_8192")]
    return report([kernel("v41_attention_splitk", cases, "fail", domain="v41_attention")])


def tampered() -> Report:
    case = CaseReport(
        name="square_512",
        device="cuda",
        tolerance=0.01,
        max_abs_err=0.0,
        status=CaseStatus.tampered,
        verdict="error",
        seed="77",
        spot_checks=3,
    )
    busy = Phrase(key="measurement.gpu_busy", params={"side": "head", "ms": "4.1"})  # as the sampler says it
    rejected = found(Gate.measurement, "measurement.rejected", Outcome.error)
    case = with_findings(case, rejected.model_copy(update={"phrases": {"detail": [busy]}}))
    r = report([kernel("deepgemm_tile", [case, timed("ragged_200x328x264", 0.2, -0.8, 1.1)], "error")])
    return r.model_copy(
        update={"health": GPU_HEALTH, "environment": Machine(device="cuda", gpu="NVIDIA H200", python="3.11.7")}
    )


def crashed() -> Report:
    case = CaseReport(
        name="ragged_200x328x264",
        device="cpu",
        tolerance=0.01,
        status=CaseStatus.crashed,
        verdict="error",
        seed="99",
    )
    # as the judge says it (bot/untrusted/runner/judge.py): "killed by signal 11 (SIGSEGV) during head timing"
    how = Phrase(key="exit.signal", params={"signal": 11, "name": "SIGSEGV"})
    where = Phrase(key="where.side", params={"side": "head"}, phrases={"phase": [Phrase(key="phase.timing")]})
    why = Phrase(key="run.gone", phrases={"how": [how], "where": [where]})
    crash = found(Gate.run, "run.side_failed", Outcome.error, who="head", status="crashed")
    case = with_findings(case, crash.model_copy(update={"phrases": {"detail": [why]}}))
    return report([kernel("deepgemm_tile", demo_cases(timed("square_512", 0.3, -1.0, 1.5), case), "error")])


def noisy() -> Report:
    """A busy runner: the intervals widened, measured twice as long, and still straddle the limit (undecided)."""
    noise = found(
        Gate.performance, "performance.inconclusive_noisy", Outcome.undecided, **span(4.1, -0.8, 9.2, pairs=20)
    )
    why = Phrase(key="noisy.cores", params={"busy": "1.6", "cores": 2})  # "noisy runner: … kept 1.6 of 2 cores busy"
    busy = with_findings(
        timed("square_512", 4.1, -0.8, 9.2, other_cores=1.6), noise.model_copy(update={"phrases": {"noisy": [why]}})
    )
    k = kernel(
        "deepgemm_tile", demo_cases(busy, timed("ragged_200x328x264", 2.0, -3.5, 7.5, other_cores=1.4)), "undecided"
    )
    for f in drift_findings([k.cases[1].model_copy(update={"base_drift_pct": -55.0})]):  # as the gate makes it
        add_kernel(k, f)
    return report([k], health=HEALTH.model_copy(update={"load1": 3.7}))


def isolation_none() -> Report:
    cause = Phrase(
        key="userns.apparmor", params={"sysctl": userns.APPARMOR_SYSCTL, "bwrap": "bwrap", "fix": userns.FIX}
    )
    why = refusal(["bwrap: setting up uid map: Permission denied"], cause)  # as bot/untrusted/sandbox.py says it
    return passing().model_copy(update={"isolation": unisolated(why)})


def gpu_skipped() -> Report:
    """Every case of a kernel needs a GPU and the runner has none: nothing ran, nothing failed."""
    cases = [skipped(n) for n in CUDA_CASES]
    summary = {"summary": not_run_phrases(cases)}  # "7 cuda cases (needs a CUDA GPU; this machine has none)"
    none_ran = Finding(gate=Gate.coverage, outcome=Outcome.undecided, key="coverage.no_case_ran", phrases=summary)
    k = kernel("deepgemm_tile", cases, "undecided", none_ran)
    return report([k])


def cuda_changed() -> Report:
    """A CPU runner: the CPU twin passes, but the change edits the CUDA kernel no case here could run: not judged."""
    cases = demo_cases(timed("square_512", -0.2, -1.1, 0.7), timed("ragged_200x328x264", 0.3, -0.9, 1.4))
    k = kernel("deepgemm_tile", cases, "undecided")
    path = "kernels/deepgemm_tile/gemm_cuda.cu"
    unread = found(Gate.coverage, "coverage.not_compiled_here", Outcome.undecided, path=path, builds="[build.cuda]")
    add_kernel(k, unread.model_copy(update={"file": path}))
    return report([k])


def simulated() -> Report:
    """A CPU case whose wall time straddles the limit, its simulated cost (callgrind) reported beside it: undecided."""
    sim = SimulatedCost(
        tool="callgrind (valgrind-3.19.0)",
        head=SideCost(instructions=1_049_000_000, l1_misses=2_100_000, ll_misses=90_000, cycles=1_079_000_000, calls=3),
        base=SideCost(instructions=1_000_000_000, l1_misses=2_000_000, ll_misses=85_000, cycles=1_028_500_000, calls=3),
        ratio=1.0491,
        instructions_ratio=1.049,
        seconds=48.2,
    )
    wall = found(Gate.performance, "performance.inconclusive", Outcome.undecided, **span(2.1, -1.4, 5.7))
    wall.tail = [Phrase(key="tail.simulated", params={"ratio": "1.049", "instructions": "1.049"})]
    slower = with_findings(timed("square_512", 2.1, -1.4, 5.7, p50=31.15), wall, verdict="inconclusive", simulated=sim)
    cases = demo_cases(slower, timed("ragged_200x328x264", 0.3, -0.9, 1.4))
    return report([kernel("deepgemm_tile", cases, "undecided")])


def new_kernel() -> Report:
    """A kernel new in this change: judged by its own manifest and reference, nothing failed, a person must accept."""
    cases = demo_cases(timed("square_512", 0.0, -0.5, 0.5), timed("ragged_200x328x264", 0.1, -0.4, 0.6))
    k = kernel("deepgemm_fast", cases, "needs_accept")
    add_kernel(k, change.new_kernel())
    return report([k])


def resource_fail() -> Report:
    k = kernel(
        "deepgemm_tile",
        demo_cases(timed("square_512", 0.1, -1.0, 1.2), timed("ragged_200x328x264", 0.5, -0.5, 1.5)),
        "fail",
    )
    head = resources(256, 256, 196_608, 1)
    head[0] = head[0].model_copy(update={"spill_bytes": 16, "spill_store_bytes": 8, "spill_load_bytes": 8})
    assert k.build is not None and k.resource_check is not None
    k.build.resources, k.resource_check.head = head, head
    fn = head[0].function
    assert head[0].occupancy is not None
    why = register_phrase(head[0].registers or 0, 256, head[0].occupancy)  # as the gate explains it
    factor = {"factor": [Phrase(key="occupancy.registers_factor")], "why": [why]}
    limited = [Phrase(key="resources.limited_by", phrases=factor)]
    occupancy = {"old": "25", "new": "12.5", "old_blocks": 2, "new_blocks": 1, "old_warps": 16, "new_warps": 8}
    for f in (
        found(Gate.resources, "resources.spill", function=fn, bytes=16, stores=8, loads=8),
        found(Gate.resources, "resources.occupancy_drop", function=fn, drop="50", limit="25", **occupancy),
        found(
            Gate.resources,
            "resources.grew",
            Outcome.note,
            function=fn,
            field="dynamic_smem_bytes",
            old=98304,
            new=196608,
        ),
        found(
            Gate.resources,
            "resources.grew",
            Outcome.note,
            function=head[1].function,
            field="registers",
            old=215,
            new=223,
        ),
    ):
        if f.key == "resources.occupancy_drop":
            f.phrases["limited_by"] = limited
        add_kernel(k, f.model_copy(update={"function": f.params["function"]}))
    return report([k])


def not_resident() -> Report:
    """An occupancy failure the gate makes itself: 128 registers x 1024 threads cannot be resident on an SM."""
    from bot.config.manifest_tables import Constraints
    from bot.verdict.gate import Policy, kernel_verdict

    big = Resource(function="attn<8>", registers=128, smem_bytes=1024)
    check = ResourceCheckReport(
        status="ok", head=[big], threads={"attn<8>": 1024}, base=[Resource(function="attn<8>", registers=96)]
    )
    k = KernelReport(name="flashmla_decode", domain="flashmla", changed=True, verdict="skipped", resource_check=check)
    k = kernel_verdict(k, [], [skipped("decode_b1")], Constraints(), Policy())
    return report([k])


def base_has() -> Report:
    """What base already has (docs/review.md): a spill base's same function has alike, a launch kernel.toml sizes
    on neither side (noted), and another one whose function the change moved (undecided)."""
    from bot.config.manifest_tables import Constraints, Launch
    from bot.verdict.gate import Policy, kernel_verdict
    from bot.verdict.launch import describe

    bwd = "void conv1d_channellast_bwd<128, 4, true>(ConvParamsBwd)"
    sparse, combine = "void flash::sparse_decode<64>(Params)", "void flash::combine<8>(Params)"
    spill = Resource(function=bwd, registers=255, spill_bytes=24, spill_store_bytes=16, spill_load_bytes=8)
    head = [spill, Resource(function=sparse, registers=96, extern_smem=True),
            Resource(function=combine, registers=40, extern_smem=True)]  # fmt: skip
    base = [spill, Resource(function=sparse, registers=96, extern_smem=True),
            Resource(function=combine, registers=32, extern_smem=True)]  # fmt: skip
    bounds = {bwd: 128, sparse: 128, combine: 64}
    manifest = "csrc/kernel.toml"
    h = describe(head, bounds, Launch(), {}, manifest, arch="sm_80")
    b = describe(base, bounds, Launch(), {}, manifest, arch="sm_80")
    check = ResourceCheckReport(
        status="ok",
        arch="sm_80",
        head=h.resources,
        base=b.resources,
        threads=bounds,
        launch_errors=h.errors,
        base_launch_errors=b.errors,
    )
    k = KernelReport(name="conv1d", domain="deepgemm", changed=True, verdict="skipped", resource_check=check)
    k = kernel_verdict(k, [], [skipped("fwd_b1")], Constraints(), Policy())
    return report([k])


def launch_lines() -> Report:
    """A resource check whose launches the gate could not take as declared, every line made by bot/verdict/launch.py:
    kernel.toml's threads against the code's, an extern __shared__ nobody sized (two instantiations), a key naming no
    function, base's tunable that is no integer, a launch read back at two sizes and against kernel.toml's figure, and
    a changed launch the compiler could not read back (undecided)."""
    from bot.config.manifest_tables import Constraints, Launch
    from bot.verdict.gate import Policy, kernel_verdict
    from bot.verdict.launch import ReadBack, SiteTouch, describe, read_back, touch_phrase, undecided_launches

    folder = "kernels/flashmla_decode"
    manifest = f"{folder}/kernel.toml"
    decode, combine = "void flash::decode_kernel<64>(float*)", "void flash::combine<{}>(float const*, float*)"
    resources = [
        Resource(function=decode, registers=96, smem_bytes=1024),
        *(Resource(function=combine.format(n), registers=32, extern_smem=True) for n in (8, 16)),
    ]
    launch = Launch.model_validate(
        {"functions": {"decode_kernel": {"threads": 256, "dynamic_smem": 4096}, "gone_kernel": {"threads": 64}}}
    )
    bounds = {decode: 128, **{combine.format(n): 64 for n in (8, 16)}}
    head = describe(resources, bounds, launch, {"splits": 8}, manifest)
    base_launch = Launch.model_validate({"values": {"stages": "block // 2"}})
    base = describe(resources[:1], {decode: 128}, base_launch, {"block": "wide"}, manifest)
    decode_site, combine_site = f"{folder}/decode.cu:88 decode_kernel<<<…, 128, smem>>>", f"{folder}/combine.cu:41"
    read = [ReadBack(decode_site, "smem", "flash::decode_kernel<64>", size) for size in (8192, 16384)]
    described, read_notes = read_back(head.resources, read)
    touch = SiteTouch(touch_phrase(f"{folder}/splits.h", "defines", ("kSplits",), [combine_site]), (combine_site,),
                      "combine")  # fmt: skip
    constant = Phrase(key="launch.not_constant", params={"error": "combine.cu(41): error: expression must have a "
                                                                  "constant value"})  # fmt: skip
    unfolded = {combine_site: [Phrase(key="launch.its_smem", phrases={"why": [constant]})]}
    undecided = undecided_launches(described, [touch], unfolded)
    notes = [*head.notes, *read_notes]
    check = ResourceCheckReport(
        status="ok",
        head=described,
        base=base.resources,
        threads=bounds,
        launch_errors=head.errors,
        launch_notes=notes,
        base_launch_errors=base.errors,
        launch_undecided=undecided,
        launch_unmeasured=[combine_site],
    )
    k = KernelReport(name="flashmla_decode", domain="flashmla", changed=True, verdict="skipped", resource_check=check)
    k = kernel_verdict(k, [], [skipped("decode_b1")], Constraints(), Policy())
    return report([k])


def expectations() -> Report:
    """The agent's expected metrics held against the review: one measured and outside, three not measured (no such
    quantity, a value that is no number, a latency no case timed against base), each saying why."""
    from bot.verdict.expectations import check_kernel

    r = fail_latency()
    k = r.kernels[0]
    expected: dict[str, float | str] = {
        "latency_p50_ragged_200x328x264": -8.0,
        "bank_conflicts": 0.0,
        "registers": "fewer",
    }
    timed_only = k.model_copy(update={"cases": [c for c in k.cases if c.device == "cuda"]})  # none timed against base
    checks = [*check_kernel(k, expected), *check_kernel(timed_only, {"p50_change": -3.0})]
    agent = r.agent.model_copy(update={"status": "ok", "reason": None, "expectations": checks})
    return r.model_copy(update={"agents": [agent], "agent": agent})


CPU_PEAK = measured_peak(0.2031, 89.1, "AMD EPYC")


def with_work(c: CaseReport, flops: int, nbytes: int, peak: Peak = CPU_PEAK) -> CaseReport:
    """The case with its declared work's throughput, as the review computes it (and fails it above the peak)."""
    c = c.model_copy(deep=True)
    judge_throughput(c, flops, nbytes, peak)
    return c


def sm100_spill() -> Report:
    """Two architectures: sm_90a unchanged, sm_100a spills (a launch-bound change under __CUDA_ARCH__ >= 1000)."""
    square = with_work(timed("square_512", 0.2, -1.1, 1.4, p50=31.15), 2 * 512**3, 2 * 2 * 512 * 512 + 4 * 512 * 512)
    ragged = with_work(timed("ragged_200x328x264", 0.5, -0.5, 1.5), 34_636_800, 541_184)
    k = kernel("deepgemm_tile", demo_cases(square, ragged), "fail")
    assert k.resource_check is not None
    k.resource_check = k.resource_check.model_copy(update={"arch": "sm_90a", "unchanged": "same"})
    same = found(Gate.resources, "resources.unchanged", Outcome.note, functions=len(k.resource_check.head))
    add_kernel(k, same.model_copy(update={"arch": "sm_90a"}), once=True)
    head = resources(128, 128, 98_304, 2)
    head[0] = head[0].model_copy(update={"spill_bytes": 5016, "spill_store_bytes": 2424, "spill_load_bytes": 2592})
    base = resources(128, 128, 98_304, 2)
    k.arch_checks = [ResourceCheckReport(status="ok", arch="sm_100a", head=head, base=base, base_status="ok")]
    spill = found(Gate.resources, "resources.spill", function=head[0].function, bytes=5016, stores=2424, loads=2592)
    on = [Phrase(key="tail.arch", params={"arch": "sm_100a"})]
    add_kernel(k, spill.model_copy(update={"tail": on, "arch": "sm_100a", "function": head[0].function}))
    return report([k])


def implausible() -> Report:
    """A CPU case whose head claims more than the runner's measured peak: impossible, so it fails."""
    work = (2 * 512**3, 2 * 2 * 512 * 512 + 4 * 512 * 512)
    fast = with_work(timed("square_512", -99.9, -99.92, -99.88, p50=31.15), *work)
    ragged = with_work(timed("ragged_200x328x264", 0.5, -0.5, 1.5), 34_636_800, 541_184)
    return report([kernel("deepgemm_tile", demo_cases(fast, ragged), "fail")])


def rated_no_peak() -> Report:
    """A GPU runner whose GPU the data sheet does not know (bot/verdict/throughput.device_peak): the achieved rates,
    no share of a peak."""
    from bot.verdict.throughput import device_peak

    peak = device_peak("NVIDIA RTX PRO 6000")
    assert peak is None
    square = timed("square_512", 0.2, -1.1, 1.4, p50=0.031, device="cuda")
    ragged = timed("ragged_200x328x264", 0.5, -0.5, 1.5, p50=0.004, device="cuda")
    cases = [with_work(square, 2 * 512**3, 2 * 2 * 512 * 512, peak), with_work(ragged, 34_636_800, 541_184, peak)]
    gpu = Machine(device="cuda", gpu="NVIDIA RTX PRO 6000", python="3.11.7")
    return report([kernel("deepgemm_tile", cases, "pass")], environment=gpu, health=GPU_HEALTH)


def rated_with_incorrect() -> Report:
    """A table with the achieved-rate columns where one case was not timed (wrong): its row says so, not dashes."""
    r = fail_correctness()
    k = r.kernels[0]
    k.cases[0] = with_work(k.cases[0], 4 * 128 * 2048 * 2048, 3 * 128 * 2048 * 4)
    return r


def build_fail() -> Report:
    """Head's CPU build fails on its own new error (base builds): the first error by path and line, as the gate says."""
    cases = [
        with_findings(
            CaseReport(name=n, device="cpu", tolerance=0.01, status=CaseStatus.compile_fail, verdict="fail"),
            found(Gate.run, "run.head_fails"),
        )
        for n in ("square_512", "ragged_200x328x264")
    ]
    k = KernelReport(name="deepgemm_tile", domain="deepgemm", changed=True, verdict="fail", cases=cases)
    log = "\n".join(f"gemm_cpu.cpp:{40 + i}:12: error: 'tile_q' was not declared in this scope" for i in range(40))
    error = CompileError(
        kind="compiler",
        path="kernels/deepgemm_tile/gemm_cpu.cpp",
        line=40,
        message="'tile_q' was not declared in this scope",
    )
    k.build = Build(ok=False, seconds=3.2, cached=False, device="cpu", log_tail=log, errors=[error])
    k.base_build = Build(ok=True, seconds=0.0, cached=True, device="cpu")
    failure, _ = compile_phrases(Phrase(key="compile.step_build", params={"device": "cpu"}), [error], False, [])
    assert failure is not None
    detail = {"detail": [failure]}
    add_kernel(
        k, Finding(gate=Gate.build, outcome=Outcome.fail, key="build.failed", phrases=detail, file=error.path, line=40)
    )
    return report([k])


def review_error() -> Report:
    r = report([])
    return r.model_copy(
        update={"verdict": "error", "error": "bad input: unknown revision 'feature~3'", "kernels": r.kernels[-1:]}
    )


def no_change() -> Report:
    r = report([])
    skipped_agent = aggregate_agents([])
    return r.model_copy(update={"agents": [], "agent": skipped_agent})


def with_candidate_and_agent() -> Report:
    r = fail_latency()
    k = r.kernels[0]
    k.candidate = kernel(
        "deepgemm_tile",
        demo_cases(timed("square_512", -0.4, -1.1, 0.3), timed("ragged_200x328x264", 0.9, -0.2, 2.1)),
        "pass",
    )
    agent = AgentReport(
        status="ok",
        domain="deepgemm",
        model="deepseek-v4",
        requests=2,
        prompt_tokens=1234,
        completion_tokens=321,
        total_tokens=1555,
        usage_estimated=1,
        risk_notes=["tile_n 256 doubles the dynamic shared memory per block"],
        local_commands=["opgate review --base main --head HEAD --kernel deepgemm_tile"],
        candidate_patch="--- a/kernels/deepgemm_tile/tile_config.json\n+++ b/kernels/deepgemm_tile/tile_config.json\n"
        '@@ -1 +1 @@\n-{"tile_n": 256}\n+{"tile_n": 128}\n',
    )
    agent_inputs(agent)
    return r.model_copy(update={"agents": [agent], "agent": agent, "pr": PR})


def agent_inputs(agent: AgentReport) -> None:
    """What bot/agent/run.py `ask` writes of its prompt's materials, by the real gather, trim and inputs_of:
    deepgemm_tile's gemm_tiled changed, main's history in the ledger empty (base figures not available), and a
    per-request budget that leaves its cases and base's side of the function out for size."""
    import tempfile
    from pathlib import Path

    from bot.agent import estimate, prompt
    from bot.agent.materials import Sources
    from bot.agent.run import gather, inputs_of
    from bot.config.manifest import load_kernel
    from bot.config.settings import load_settings
    from bot.ledger import Ledger
    from bot.models.diff import FileChange
    from tests.conftest import REPO_CONFIG

    root = Path(__file__).resolve().parent.parent
    kernel = load_kernel(root / "kernels/deepgemm_tile", config=REPO_CONFIG, path="kernels/deepgemm_tile")
    path = "kernels/deepgemm_tile/gemm_cpu.cpp"
    lines = (root / path).read_text().split("\n")
    at = next(i for i, line in enumerate(lines) if "void gemm_tiled" in line) + 2  # inside gemm_tiled's body
    head = [*lines[:at], "    // reviewed: the tail rows", *lines[at:]]
    diff = f"--- a/{path}\n+++ b/{path}\n@@ -{at},1 +{at},2 @@\n {lines[at - 1]}\n+    // reviewed: the tail rows\n"
    changes = [FileChange(path=path, old_path=path, added=1, removed=0, diff=diff)]
    sources = Sources(base={path: "\n".join(lines)}, head={path: "\n".join(head)})
    settings = load_settings({"GITHUB_TOKEN": ""}, REPO_CONFIG)
    with tempfile.TemporaryDirectory() as tmp, Ledger(Path(tmp) / "ledger.sqlite") as ledger:
        pieces, missing = gather(kernel, kernel, changes, settings, ledger, sources, BASE)
    assert [why.key for _, why in missing] == ["agent.no_base_figures"]
    not_available = [line for line, _ in missing]

    def cost(text: str) -> int:  # as prompt.trim counts a diff and prompt.split a piece
        return estimate.count_messages([{"role": "user", "content": text}]) - estimate.count_messages([])

    frame = estimate.count_messages(prompt.messages(kernel, [], [path], (), [p.label for p in pieces], not_available))
    functions = [p for p in pieces if p.material == "functions"]  # gemm_tiled, head's then base's
    kept = [p for p in pieces if p.material in ("constraints", "tunables")] + functions[:1]
    budget = frame + cost(diff) + sum(cost(p.text) + prompt.PIECE_JOIN_TOKENS for p in kept)
    trimmed = prompt.trim(kernel, changes, budget, estimate.count_messages, pieces, not_available)
    assert trimmed.pieces == kept and [p.material for p in trimmed.dropped] == ["cases", "functions"]
    inputs_of(agent, trimmed, missing)


def cut_twice() -> ReplyCut:
    """The ReplyCut bot/agent/exchange.answered raises for a reply cut off at max_tokens 4096, and again at 8192."""

    class Cutting:
        def __init__(self) -> None:
            self.answered: list[ChatResult] = []

        def chat(self, messages: list[dict[str, str]], max_tokens: int | None = None) -> ChatResult:
            return ChatResult(
                request_id="r", model="deepseek-v4", content="{", prompt_tokens=1, completion_tokens=1,
                total_tokens=2, usage_reported=True, latency_ms=1.0, status_code=200, finish_reason="length",
                max_tokens=max_tokens or 4096,
            )  # fmt: skip

        def record_cached(self, model: str) -> None: ...
        def secrets(self) -> list[str]:
            return []

    try:
        answered(Cutting(), [])
    except ReplyCut as cut:
        return cut
    raise AssertionError("not cut")


def agents_not_asked() -> Report:
    """Why each domain's agent was not asked or gave no reply, as bot/agent/run.py words it: a key not set, a key
    that is not the domain's, the week's budget spent (bot/spend/budget.check's refusal), a prompt over the
    per-request budget, a reply rejected after its repair, a cached reply, a kernel without a task file."""
    from bot.agent import run
    from bot.spend import budget

    week = BudgetState(domain="v41_attention", week="2026-W48", limit=500_000, used=499_000, reserved=0)
    refused = budget.check(week, 12_000)
    cut = cut_twice()
    why = [
        ("deepgemm", "offline", run.key_unset("OPGATE_DEEPGEMM_KEY")),
        ("flashmla", "offline", run.key_mismatch("OPENAI_API_KEY", "flashmla", "OPGATE_FLASHMLA_KEY")),
        ("v41_attention", "over_budget", run.over_budget(refused.reason, refused.why)),
        ("moe", "over_budget", run.prompt_over_budget(41_234, 32_000, "moe")),
        ("sparse", "error", run.rejected("reply field risk_notes: Input should be a valid list", repaired=True)),
        ("topk", "error", run.rejected(str(cut), repaired=False, why=cut.why)),
        ("norms", "skipped", run.no_task("rmsnorm")),
    ]
    agents = [
        run.said(AgentReport(status=status, domain=domain, model="deepseek-v4"), reason)  # type: ignore[arg-type]
        for domain, status, reason in why
    ]
    lacked = {"inputs_missing": MISSING}
    agents[3] = agents[3].model_copy(update=lacked)  # what moe's prompt lacked: no history, no file read
    hit = run.said(AgentReport(status="ok", domain="scan", model="deepseek-v4", cached=True), run.cached(CREATED))
    agents.append(hit)
    r = report([])
    return r.model_copy(update={"agents": agents, "agent": aggregate_agents(agents)})


def with_ci_summary(agent: AgentReport, **summary: object) -> Report:
    """The failing review with the CI summary's section: asked and answered, or why not (bot/agent/ci_summary.py)."""
    from bot.models.agent_report import CiSummary

    agent = agent.model_copy(update={"domain": "ci_summary"})
    return fail_latency().model_copy(update={"ci_summary": CiSummary(agent=agent, **summary)})  # type: ignore[arg-type]


def ci_summary_asked(env: dict[str, str], offline: bool) -> AgentReport:
    """What the real bot/agent/ci_summary.ask reports when it asks nothing (offline, or its key not set)."""
    import tempfile
    from pathlib import Path

    from bot.agent import ci_summary
    from bot.config.settings import load_settings
    from bot.ledger import Ledger
    from bot.models.ci_summary import CiSummaryFacts
    from tests.conftest import REPO_CONFIG

    facts = CiSummaryFacts(base_sha=BASE, head_sha=HEAD, verdict="fail", kernels=[])
    settings = load_settings({"GITHUB_TOKEN": "", **env}, REPO_CONFIG)
    with tempfile.TemporaryDirectory() as tmp, Ledger(Path(tmp) / "ledger.sqlite") as ledger:
        out = ci_summary.ask(facts, settings=settings, ledger=ledger, offline=offline, candidates_dir=Path(tmp))
    return out.agent


def ci_summary_offline() -> Report:
    return with_ci_summary(ci_summary_asked({}, offline=True))


def ci_summary_key_unset() -> Report:
    agent = ci_summary_asked({}, offline=False)
    assert agent.reason is not None and phrase(agent.reason) == "TAOTOKEN_API_KEY_CI_SUMMARY is not set"
    return with_ci_summary(agent)


def ci_summary_over_budget() -> Report:
    from bot.agent import ci_summary
    from bot.agent.run import said

    agent = said(AgentReport(status="over_budget"), ci_summary.prompt_over_budget(9_120, 4_000))
    return with_ci_summary(agent, prompt_estimate=9_120, left_out=["the passing cases' figures"])


def ci_summary_failed() -> Report:
    from bot.agent import ci_summary
    from bot.agent.run import said

    error = "reply field summary: not written in Simplified Chinese (got slower on every case)"
    return with_ci_summary(
        said(AgentReport(status="error", model="deepseek-v4"), ci_summary.rejected(error, repaired=True))
    )


def ci_summary_cached() -> Report:
    from bot.agent.run import cached, said

    agent = said(AgentReport(status="ok", model="deepseek-v4", cached=True), cached(CREATED))
    return with_ci_summary(agent, summary="`deepgemm_tile` 在 `ragged_200x328x264` 上变慢 10.53%，超过 3% 限值。")


# What bot/agent/run.py says its prompt lacked: no base figures in the ledger, no file of base or head read
NO_HISTORY = Phrase(key="agent.no_history", params={"kernel": "deepgemm_tile"})
MISSING = [Phrase(key="agent.no_base_figures", phrases={"why": [NO_HISTORY]}), Phrase(key="agent.no_functions")]


def pr_for(r: Report, budget: int = 500_000, used: int = 123_456) -> PrContext:
    """What the ledger adds on a pull request: an acceptance voided by a push, the PR's spend, the week's budget."""
    rows = [
        UsageRow(
            task_id="t",
            model_name="deepseek-v4",
            prompt_tokens=900,
            completion_tokens=100,
            total_tokens=1000,
            request_id=f"req-{i}",
            domain="deepgemm",
            key_fingerprint="sha256:x",
            pr=PR,
            head_sha=OLD_HEAD,
            status="ok",
        )
        for i in range(3)
    ]
    voided = AcceptanceRow(
        pr=PR,
        head_sha=OLD_HEAD,
        login="maint-bob",
        role="maintain",
        kernels=["deepgemm_tile"],
        override=False,
        reason="",
        comment_id=7,
    )
    week = BudgetState(domain="deepgemm", week="2026-W48", limit=budget, used=used, reserved=0)
    return pr_context(r, PR, rows, [voided], {"deepgemm": week})


def biggest() -> Report:
    """The biggest realistic review: 8 changed kernels on a GPU runner, 24 cases each, 6 functions each with
    long C++ names, failing builds with full logs, agent candidates with 64 KiB patches, every coverage group."""
    kernels = []
    for i in range(8):
        cases = [
            timed(
                f"m{4096 * (j + 1)}_n{2112 + j}_k7168_case{j}",
                0.3 * j - 3,
                0.3 * j - 4,
                0.3 * j - 1.5 + (5 if j % 5 == 0 else 0),
            )
            for j in range(20)
        ]
        if i % 2:  # every other kernel regresses on its last cases
            cases[-3:] = [timed(c.name, 9.0 + j, 8.0 + j, 10.5 + j) for j, c in enumerate(cases[-3:])]
        cases += [skipped(f"hopper_only_{j}") for j in range(4)]
        k = kernel(f"kernel_{i}_{'x' * 40}", cases, "fail" if i % 2 else "pass", domain="deepgemm")
        fns = [
            r.model_copy(update={"function": r.function.replace("gemm_bf16_kernel", f"gemm_bf16_kernel_v{j}")})
            for j in range(3)
            for r in resources(128, 128, 98_304, 2)
        ]
        assert k.build is not None and k.resource_check is not None
        k.build.resources = k.resource_check.head = fns
        k.resource_check.log_tail = "\n".join(f"ptxas info : Used {200 + j} registers, {'x' * 200}" for j in range(40))
        k.base_build = Build(
            ok=False,
            seconds=12.0,
            cached=False,
            device="cuda",
            log_tail="\n".join(f"error {j}: {'y' * 280}" for j in range(40)),
        )
        k.notes += [f"note {j}: {'z' * 120}" for j in range(10)]
        k.candidate = kernel(k.name, cases[:6], "pass")
        kernels.append(k)
    patch = "\n".join(f"+line {j} {'p' * 150}" for j in range(400))[: 64 * 1024]
    agents = [
        AgentReport(
            status="ok",
            domain=d,
            model="deepseek-v4",
            requests=3,
            total_tokens=90_000,
            candidate_patch=patch,
            risk_notes=[f"risk {j}: {'r' * 200}" for j in range(10)],
        )
        for d in ("deepgemm", "flashmla", "v41_attention")
    ]
    names = [f"docs/page-{j:03d}.md" for j in range(50)]
    coverage = Coverage(
        files=5000,
        size_limit_bytes=1 << 20,
        binary=Listed(total=300, names=names),
        large=Listed(total=120, names=names),
        unmatched=Listed(total=4500, names=names),
    )
    return report(kernels, agents=agents, agent=agents[0], coverage=coverage, pr=PR, health=GPU_HEALTH)


def agent_cases() -> Report:
    """The agent's test matrix: one case head breaks (base right), one base breaks too, one passing a slower
    latency (reported, not gated), two entries refused; the kernel fails on the first one alone."""
    from bot.models.report import AgentCaseReport, AgentCasesReport, Violation
    from bot.verdict.agent_cases import fold, refusal

    outside = {"why": [Phrase(key="bound.outside", params={"value": 5000, "lo": 1, "hi": 256})]}
    from bot.verdict.gate_correctness import violation_finding

    bad = Violation(metric="max_abs_err", output="out", index=[46, 0], value=1.5, limit=1e-05, got=0.0, expected=1.5)
    tail = timed("tail_15", 0.0, 0.0, 0.0).model_copy(
        update=dict(status=CaseStatus.incorrect, verdict="fail", reasons=[], base_correct=True, p50_ms=None,
                    base_p50_ms=None, regression_pct=None, ci95_pct=None)
    )  # fmt: skip
    add_case(tail, violation_finding(bad))  # as the gate makes it
    shared = tail.model_copy(update=dict(name="tail_31", base_correct=False))
    slower = timed("rows_1", 9.0, 6.0, 12.0).model_copy(update=dict(base_correct=True))
    block = AgentCasesReport(
        agent="deepseek-v4",
        proposed=5,
        cases=[
            AgentCaseReport(name="tail_15", shape={"m": 47, "n": 16}, verdict="fail", case=tail),
            AgentCaseReport(
                name="tail_31", shape={"m": 31, "n": 16}, verdict="base_fails", case=shared, base_fails="wrong"
            ),
            AgentCaseReport(name="rows_1", shape={"m": 1, "n": 8}, verdict="pass", case=slower),
        ],
        refused=[
            refusal("huge", Phrase(key="agent.bound", params={"part": "shape", "key": "m"}, phrases=outside)),
            refusal("x|`![p](https://evil.example/p.png)", Phrase(key="agent.bad_name")),
        ],
    )  # fmt: skip
    cases = demo_cases(timed("square_512", 0.2, -1.0, 1.4), timed("ragged_200x328x264", 0.41, -1.2, 1.9))
    return report([fold(kernel("deepgemm_tile", cases, "pass", agent_cases=block))])


REPORTS: dict[str, Callable[[], Report]] = {
    "agent_cases": agent_cases,
    "pass": passing,
    "fail_latency": fail_latency,
    "fail_correctness": fail_correctness,
    "tampered": tampered,
    "crashed": crashed,
    "noisy": noisy,
    "isolation_none": isolation_none,
    "gpu_skipped": gpu_skipped,
    "cuda_changed": cuda_changed,
    "simulated": simulated,
    "new_kernel": new_kernel,
    "resource_fail": resource_fail,
    "build_fail": build_fail,
    "review_error": review_error,
    "no_change": no_change,
    "candidate_and_agent": with_candidate_and_agent,
    "agents_not_asked": agents_not_asked,
    "ci_summary_offline": ci_summary_offline,
    "ci_summary_key_unset": ci_summary_key_unset,
    "ci_summary_over_budget": ci_summary_over_budget,
    "ci_summary_failed": ci_summary_failed,
    "ci_summary_cached": ci_summary_cached,
    "biggest": biggest,
    "sm100_spill": sm100_spill,
    "implausible": implausible,
    "rated_with_incorrect": rated_with_incorrect,
    "rated_no_peak": rated_no_peak,
    "not_resident": not_resident,
    "expectations": expectations,
    "launch_lines": launch_lines,
    "base_has": base_has,
}
