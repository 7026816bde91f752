"""The `report.json` contract (schema opgate.report/3; /1 and /2 reports still read) as pydantic models."""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from bot.models.agent_report import AgentReport, CiSummary
from bot.models.before3 import phrase_of, phrases_of
from bot.models.cost import CpuUse, SimulatedCost, Throughput
from bot.models.finding import Finding, Phrase

# Schema history: /2 = findings per kernel and case (bot/models/finding.py); /3 = the English twin fields removed
# (`launch_notes` beside `launch_notes_why`, `reason` beside `why` …), their phrases kept under the plain names.
SCHEMA: Literal["opgate.report/3"] = "opgate.report/3"


class CaseStatus(StrEnum):
    """What happened when a case ran (the measurement, not the judgement)."""

    ok = "ok"
    compile_fail = "compile_fail"
    incorrect = "incorrect"
    timeout = "timeout"
    crashed = "crashed"
    tampered = "tampered"  # the worker broke the measurement rules (work outside the timed region …)
    skipped = "skipped"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Occupancy(_Model):
    """Theoretical occupancy of one function at its launch, per SM (bot/occupancy.py, as cuda_occupancy.h)."""

    arch: str = "sm_90"
    blocks_per_sm: int
    warps_per_sm: int
    max_warps_per_sm: int = 64
    occupancy_pct: float = Field(description="warps_per_sm / max_warps_per_sm, in %")
    limited_by: list[str] = Field(description="registers | shared memory | threads | blocks | barriers (ties: all)")
    limits: dict[str, int | None] = Field(
        default_factory=dict, description="blocks per SM each resource alone allows; null: no limit"
    )
    registers_per_block: int = Field(0, description="allocated: per warp rounded up to 256, times warps")
    smem_per_block: int = Field(
        0,
        description="allocated: static + dynamic + the architecture's reserve (1 KiB from sm_80, none on sm_75), "
        "rounded up to its granule (128 B; 256 B on sm_75)",
    )


class Resource(_Model):
    """One compiled GPU function as ptxas reports it, with its launch (kernel.toml [launch]) and occupancy."""

    function: str
    registers: int
    spill_bytes: int = 0
    spill_store_bytes: int = 0
    spill_load_bytes: int = 0
    smem_bytes: int = Field(0, description="static shared memory per block (ptxas)")
    stack_bytes: int = 0
    barriers: int | None = Field(None, description="named barriers (ptxas `used N barriers`)")
    extern_smem: bool = Field(False, description="its PTX uses `extern __shared__` memory, sized at launch")
    threads: int | None = Field(None, description="threads per block: kernel.toml [launch], else __launch_bounds__")
    dynamic_smem_bytes: int | None = Field(None, description="dynamic shared memory per block; null: not described")
    occupancy: Occupancy | None = None
    launch_from: Literal["declared", "read back"] = Field(
        "declared",
        description="where threads and dynamic_smem_bytes come from: kernel.toml [launch] (declared) or the code's "
        "launches folded by the compiler, per instantiation (read back)",
    )
    declared_threads: int | None = Field(None, description="kernel.toml [launch]'s threads, shown beside a read-back")
    declared_dynamic_smem_bytes: int | None = Field(None, description="kernel.toml [launch]'s dynamic_smem, likewise")


class CompileError(_Model):
    """The first error of one failed compile, named as the repository names it (never the sandbox's /opgate/… path).

    kind: missing_header (an `#include` the compiler could not find: `header`, asked for at path:line), compiler
    (any other error the compiler or ptxas printed), manifest (kernel.toml names a source or folder the build
    cannot use: a configuration problem, no compiler ran)."""

    kind: Literal["missing_header", "compiler", "manifest"]
    path: str = Field("", description="repository path of the file the error is in; empty when none is named")
    line: int | None = None
    message: str
    header: str | None = Field(None, description="missing_header: the header the #include asked for")


class Build(_Model):
    ok: bool
    seconds: float
    cached: bool
    device: Literal["cpu", "cuda"]
    resources: list[Resource] = Field(default_factory=list)
    key: str = ""
    log_tail: str = ""
    errors: list[CompileError] = Field(default_factory=list, description="the first error of each failed unit")


ResourceStatus = Literal["ok", "no_nvcc", "compile_fail", "unsupported_arch"]


class UnitCompile(_Model):
    """One translation unit of a resource check, for its architecture: the key it is cached under (its preprocessed
    text, flags, architecture and toolchain: a comment leaves it alone), the sides whose build has it, and whether it
    was read from the cache or compiled by this review (once, whichever sides share it)."""

    source: str = Field(description="the unit's repository path")
    key: str = Field(description="the first 16 hex digits of its cache key")
    sides: list[str] = Field(description="head, base: the sides whose unit preprocesses to this text")
    cached: bool = Field(description="read from the cache: no compiler ran for it")
    seconds: float = Field(0.0, description="the compile's wall time; 0 when cached")
    step: Literal["resources", "launches"] = Field(
        "resources", description="resources: the ptxas -v compile; launches: the read-back's, to PTX, launches marked"
    )


class ResourceCheckReport(_Model):
    """The compile-only ptxas check of the kernel's .cu files for one architecture (wherever nvcc is, GPU or not).

    unsupported_arch: this runner's nvcc cannot compile for `arch` (the check did not run there).
    """

    status: ResourceStatus
    arch: str = "sm_90a"
    head: list[Resource] = Field(default_factory=list)
    base: list[Resource] = Field(default_factory=list)
    base_status: ResourceStatus | None = None
    threads: dict[str, int] = Field(default_factory=dict, description="function -> max threads per block")
    launch_errors: list[Phrase] = Field(
        default_factory=list, description="head's kernel.toml [launch] could not describe a launch (fails), one a line"
    )
    launch_notes: list[Phrase] = Field(
        default_factory=list,
        description="about the launch descriptions, resources unchanged from base (not fatal), one a line",
    )
    base_launch_errors: list[Phrase] = Field(
        default_factory=list,
        description="base's kernel.toml [launch] errors: what head shares of them is base's, noted, never this "
        "change's failure",
    )
    unchanged: Literal["same", "unread"] | None = Field(
        None,
        description="same: every compiled function has base's registers, spills, stack, shared memory and occupancy; "
        "unread: the same, but changed files the check does not read are not judged (a finding, not a note line)",
    )
    launch_undecided: list[Phrase] = Field(
        default_factory=list,
        description="launches a changed file can move whose figures are declared, not measured or read back: their "
        "shared memory and occupancy are undecided (one a line)",
    )
    launch_sites: list[str] = Field(
        default_factory=list, description="the changed files that hold a launch or what its size is computed from"
    )
    launch_unmeasured: list[str] = Field(
        default_factory=list, description="the launches (`path:line kernel<<<…>>>`) left undecided, for the status"
    )
    seconds: float = 0.0
    cached: bool = False
    units: list[UnitCompile] = Field(
        default_factory=list, description="every unit of head and base once: compiled by this review or cached"
    )
    log_tail: str = Field("", description="head's compile log when head does not compile")
    base_log_tail: str = Field("", description="base's compile log when base does not compile")
    errors: list[CompileError] = Field(default_factory=list, description="head's first error of each failed unit")
    base_errors: list[CompileError] = Field(default_factory=list, description="base's first error of each failed unit")

    @model_validator(mode="before")
    @classmethod
    def _before_3(cls, data: Any) -> Any:
        """/1, /2: each launch list in English beside its phrases (`launch_errors_why` …); base's as phrases only."""
        for name in ("launch_errors", "launch_notes", "launch_undecided"):
            data = phrases_of(data, name, f"{name}_why")
        if isinstance(data, dict) and "base_launch_errors_why" in data:
            data = dict(data)
            data["base_launch_errors"] = data.pop("base_launch_errors_why")
        return data


class NsightKernel(_Model):
    """One kernel launch of a case as Nsight Compute measured it (`ncu --csv`; bot/nsight.py parses it)."""

    function: str
    duration_us: float | None = None
    achieved_occupancy_pct: float | None = Field(None, description="sm__warps_active, % of peak sustained active")
    theoretical_occupancy_pct: float | None = Field(None, description="sm__maximum_warps_per_active_cycle_pct")
    dram_throughput_pct: float | None = Field(None, description="dram__throughput, % of peak sustained elapsed")
    dram_bytes: float | None = Field(None, description="bytes read from plus written to device memory")
    registers: int | None = Field(None, description="launch__registers_per_thread")
    local_bytes: float | None = Field(
        None, description="local-memory bytes loaded and stored (register spills, stack arrays); 0 when none"
    )


class NsightMetrics(_Model):
    """Nsight Compute metrics of one case, where the runner has `ncu` (optional; never gating)."""

    tool: str = Field("ncu", description="the ncu version that measured them")
    kernels: list[NsightKernel] = Field(default_factory=list)


class OutputMetrics(_Model):
    """The error metrics of one output tensor against the reference (bot/metrics.py)."""

    name: str = Field(description="the reference's OUTPUTS name (out, lse …), else out0, out1 …")
    max_abs_err: float | None = Field(None, description="max |out - ref| over elements finite in both")
    max_rel_err: float | None = Field(None, description="max |out - ref| / max(|ref|, 1% of the RMS of ref)")
    cos_diff: float | None = Field(None, description="1 - 2 sum(out ref) / sum(out^2 + ref^2) (DeepGEMM calc_diff)")
    nan_inf: bool = Field(False, description="NaN/Inf positions differ from the reference's")
    worst_index: list[int] | None = Field(None, description="where |out - ref| is largest")


class Violation(_Model):
    """The first limit an output broke: which metric, where (row-major first bad element) and by how much."""

    metric: Literal["nan_inf", "max_abs_err", "max_rel_err", "cos_diff"]
    output: str
    index: list[int] = Field(description="first bad element (cos_diff: first bad row, the last dimension left out)")
    value: float = Field(description="the metric over the whole output (nan_inf: 1.0)")
    limit: float | None = None
    got: float | None = Field(None, description="the output's element at `index` (not for cos_diff)")
    expected: float | None = Field(None, description="the reference's element at `index` (not for cos_diff)")
    probe: str | None = Field(None, description="the boundary probe whose inputs showed it; None: the random inputs")
    unwritten: bool = Field(
        False, description="an output argument's element that still holds the judge's poison: the kernel never wrote it"
    )


class ProbeReport(_Model):
    """Head on one boundary probe (inputs the reference module built so a one-off error shows)."""

    name: str
    verdict: Literal["pass", "fail"]
    max_abs_err: float | None = None
    nan_inf: bool = False
    error: str | None = None
    outputs: list[OutputMetrics] = Field(default_factory=list)
    failure: Violation | None = None


class CaseReport(_Model):
    name: str
    device: Literal["cpu", "cuda"] = "cpu"
    arch: str | None = Field(None, description="the GPU architecture it ran on (sm_90); None on a CPU")
    gpu: str | None = Field(None, description="the GPU model it ran on (a merged review may hold several)")
    status: CaseStatus = CaseStatus.ok
    max_abs_err: float | None = None
    tolerance: float
    nan_inf: bool = False
    p50_ms: float | None = None
    base_p50_ms: float | None = None
    regression_pct: float | None = None
    ci95_pct: list[float] | None = None
    max_regression_pct: float | None = Field(None, description="the latency limit the case was judged against, in %")
    cpu_ms: float | None = Field(
        None, description="CPU case: head's CPU ms per call, every thread of its sandbox (base's × the paired ratio)"
    )
    base_cpu_ms: float | None = Field(None, description="CPU case: the median of base's CPU ms per call per block")
    cpu_regression_pct: float | None = Field(None, description="CPU case: Δ CPU time per call, head / base − 1, in %")
    cpu_ci95_pct: list[float] | None = Field(None, description="the 95 % interval of cpu_regression_pct")
    samples: int = 0
    base_samples: int = 0
    calls_per_sample: int | None = Field(
        None, description="the calls a sample averages: one timing block's, each call on an input set of its own"
    )
    stop_reason: str | None = None
    attempts: int = Field(1, description="measurements of the case (one sequential measurement; 2 from older opgate)")
    base_drift_pct: float | None = Field(
        None, description="base p50 now vs the first measurement of the same base binary on this device"
    )
    seed: str | None = Field(None, description="seed of the check inputs, drawn from the run's secret (revealed after)")
    spot_checks: int = Field(0, description="outputs of timed calls of head compared with the reference")
    sandbox_cpu: dict[str, CpuUse] = Field(default_factory=dict, description="base/head -> CPU the judge saw")
    processes: int = Field(0, description="fresh worker processes per side the latency comes from")
    other_cores: float | None = Field(None, description="cores other processes kept busy while this case was timed")
    judge_seconds: dict[str, float] = Field(
        default_factory=dict,
        description="where the case's wall time went: start, spawn, draw, reference, load, warmup, timed, fetch, exit",
    )
    nsight: NsightMetrics | None = Field(None, description="Nsight Compute metrics, where the runner collected them")
    simulated: SimulatedCost | None = Field(None, description="simulated cost under callgrind (CPU cases)")
    throughput: Throughput | None = Field(None, description="achieved TFLOP/s, GB/s and peak share (declared work)")
    outputs: list[OutputMetrics] = Field(default_factory=list, description="head's metrics per output, random inputs")
    failure: Violation | None = Field(None, description="the first limit head broke (random inputs, then probes)")
    probes: list[ProbeReport] = Field(default_factory=list, description="head on each boundary probe")
    probe_count: int | None = Field(None, description="boundary probes the reference built for this case")
    probe_seconds: float | None = Field(None, description="judge wall time of the probes, both sides")
    case_seconds: float | None = Field(
        None, description="judge wall time of the whole case, probes and a re-measurement included"
    )
    verdict: Literal["pass", "fail", "inconclusive", "skipped", "error"]
    reasons: list[str] = Field(
        default_factory=list,
        description="its findings in English, written with report.json (bot/verdict/written.py)",
    )
    findings: list[Finding] = Field(
        default_factory=list, description="what the gates found on this case, as data: the one record of it"
    )
    log_tail: str = Field("", description="the workers' last output when a side crashed or hung (PR code: untrusted)")
    base_correct: bool | None = Field(
        None, description="base right on the same inputs and probes (None: base was not checked on them)"
    )


class DiffStat(_Model):
    """How much of a kernel the change touches: files, lines added and removed, the first paths."""

    files: int = 0
    added: int = 0
    removed: int = 0
    binary: int = 0
    paths: list[str] = Field(default_factory=list, description="the first 20 changed paths, in diff order")


# A kernel's verdict. pass: every gate judged and passed. fail: a gate failed. error: it could not be judged
# (a crash, a lost part). skipped: the change does not touch it. undecided: nothing failed, but something changed
# was not decided or not run (a latency interval straddling the limit, cases that need a GPU, sources no build
# compiles): never counted as a pass. needs_accept: judged and nothing failed, but only a person can accept it (a
# new kernel judged by its own reference, an implausible speedup).
KernelVerdict = Literal["pass", "fail", "error", "skipped", "undecided", "needs_accept"]
ReportVerdict = Literal["pass", "fail", "error", "undecided", "needs_accept"]
VERDICT_ORDER = ("error", "fail", "needs_accept", "undecided", "pass", "skipped")  # the worst first


AgentCaseVerdict = Literal["pass", "fail", "base_fails", "not_judged"]


class AgentCaseReport(_Model):
    """One agent case the judge ran: pass, fail (head wrong where base is right), base fails too, or not judged."""

    name: str
    shape: dict[str, int]
    params: dict[str, Any] = Field(default_factory=dict)
    verdict: AgentCaseVerdict
    reasons: list[str] = Field(
        default_factory=list,
        description="why, in English: its case's findings but latency and plausibility, then `base_fails`; written "
        "with report.json (bot/verdict/written.py)",
    )
    base_fails: Literal["same", "unbuilt", "wrong"] | None = Field(
        None, description="verdict base_fails: base is the same build, does not build, or is wrong on it too"
    )
    case: CaseReport = Field(description="the judge's evidence, as for any case (its latency reported, not gated)")


class AgentCaseRefusal(_Model):
    name: str
    reason: Phrase = Field(description="why base's [agent_cases] refused it")

    @model_validator(mode="before")
    @classmethod
    def _before_3(cls, data: Any) -> Any:
        """/1, /2: `reason` in English, its phrase beside it under `why`."""
        return phrase_of(data, "reason", empty=True)


class AgentCasesReport(_Model):
    """The agent's test matrix for one kernel: what base's [agent_cases] admitted and refused, and the verdicts."""

    agent: str = Field(description="who proposed them (the task's model)")
    proposed: int
    cases: list[AgentCaseReport] = Field(default_factory=list)
    refused: list[AgentCaseRefusal] = Field(default_factory=list)
    note: str = Field("", description="why none ran (no [agent_cases] in base's manifest …)")


class KernelReport(_Model):
    name: str
    domain: str
    changed: bool
    verdict: KernelVerdict
    reasons: list[str] = Field(default_factory=list, description="why it failed or could not be judged")
    undecided: list[str] = Field(
        default_factory=list, description="what was not decided or not run, each with its reason (verdict undecided)"
    )
    accept_needed: list[str] = Field(
        default_factory=list, description="why only a person's /accept can pass it (verdict needs_accept)"
    )
    notes: list[str] = Field(default_factory=list, description="reported, never fatal (the change's size…)")
    findings: list[Finding] = Field(
        default_factory=list,
        description="what the gates found, as data: the one record of it. reasons, undecided, accept_needed and "
        "notes are its English lines, written with report.json (bot/verdict/written.py)",
    )
    build: Build | None = None
    base_build: Build | None = None
    resource_check: ResourceCheckReport | None = Field(None, description="the first architecture the kernel ships for")
    arch_checks: list[ResourceCheckReport] = Field(
        default_factory=list, description="the resource check of every further architecture, in configured order"
    )
    cases: list[CaseReport] = Field(default_factory=list)
    candidate: KernelReport | None = Field(
        None, description="--try-candidates: the agent's patch on top of head, through the same gates"
    )
    diff: DiffStat | None = Field(None, description="the change to the kernel's files (the CI summary reads it)")
    agent_cases: AgentCasesReport | None = Field(
        None, description="the agent's test matrix, run after the manifest's cases (only adds evidence)"
    )

    def resource_checks(self) -> list[ResourceCheckReport]:
        """The resource check of every architecture, the first one first."""
        return ([self.resource_check] if self.resource_check is not None else []) + list(self.arch_checks)


class Listed(_Model):
    """Some changed files: how many, and the first of their names (a PR can change thousands)."""

    total: int = 0
    names: list[str] = Field(default_factory=list, description="the first LISTED_NAMES, in diff order")


class Coverage(_Model):
    """What no gate read: changed files that are binary, over the size limit, or in no kernel's globs."""

    files: int = Field(0, description="files the diff changes")
    size_limit_bytes: int
    binary: Listed = Field(default_factory=Listed)
    large: Listed = Field(default_factory=Listed, description="over size_limit_bytes in head")
    unmatched: Listed = Field(default_factory=Listed, description="matched by no kernel's globs: no gate ran")
    kernel_sources: Listed = Field(
        default_factory=Listed,
        description="unmatched files that look like kernel sources (*.cu, *.cuh): the review fails until a manifest "
        "claims them or the configuration ignores them",
    )


class Machine(_Model):
    device: Literal["cpu", "cuda"]
    gpu: str | None = None
    arch: str | None = Field(None, description="the GPU's architecture from its compute capability (sm_90)")
    torch: str | None = None
    nvcc: str | None = None
    python: str


class RunnerHealth(_Model):
    """The machine while it measured: load, CPU governor and clock; on a GPU runner clocks and throttling."""

    cores: int
    load1: float | None = None
    governor: str | None = None
    cpu_mhz: float | None = None
    gpu_sm_mhz: int | None = None
    gpu_mem_mhz: int | None = None
    gpu_temp_c: int | None = None
    gpu_throttle: list[str] = Field(default_factory=list)
    gpu_other_processes: int = 0


class Isolation(_Model):
    """How processes running repository code were isolated in this review."""

    mode: Literal["bwrap", "none"]
    reason: Phrase | None = Field(None, description="why it ran without a sandbox")
    tool: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _before_3(cls, data: Any) -> Any:
        """/1, /2: `reason` in English, its phrase beside it under `why`."""
        return phrase_of(data, "reason")


class Report(_Model):
    schema_: Literal["opgate.report/1", "opgate.report/2", "opgate.report/3"] = Field(SCHEMA, alias="schema")
    base_sha: str
    head_sha: str
    pr: int | None = None
    verdict: ReportVerdict
    kernels: list[KernelReport]
    agents: list[AgentReport] = Field(default_factory=list)
    agent: AgentReport
    environment: Machine
    isolation: Isolation | None = None
    health: RunnerHealth | None = None
    created_at: str
    opgate_version: str
    coverage: Coverage | None = None
    error: str | None = Field(None, description="why the review itself could not run (verdict error)")
    ci_summary: CiSummary | None = Field(
        None, description="the agent's summary of what was measured (asked when a kernel did not pass); not gating"
    )

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    def to_json(self) -> str:
        return self.model_dump_json(by_alias=True, indent=2) + "\n"
