"""The judge's job and what it reports back: pydantic models only (the review, the gate and the judge share them)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from bot.models.cost import CpuUse
from bot.models.finding import Phrase
from bot.models.report import CaseStatus, OutputMetrics, Violation


class MeasureSettings(BaseModel):
    """How long and how hard the judge times each case (OPGATE_MEASURE_*; one definition for settings and job)."""

    model_config = ConfigDict(frozen=True)

    max_seconds: float = Field(6.0, gt=0)
    min_blocks: int = Field(5, ge=2)
    max_samples: int = Field(200, ge=3)
    min_processes: int = Field(3, ge=1)  # one: a side alone (no base) needs no second process
    max_processes: int = Field(30, ge=1)  # with max_seconds the time cap binds first on the 2-core runner
    target_pct: float = Field(0.5, gt=0)
    warmup_ms: float = 25.0
    warmup_calls: int = 3


class Check(BaseModel):
    """One build's output on the judge's check inputs (or one boundary probe), compared with the reference."""

    label: str = ""
    probe: str | None = Field(None, description="the boundary probe's name; None: the case's random inputs")
    max_abs_err: float | None = None
    nan_inf: bool = False
    error: str | None = None
    outputs: list[OutputMetrics] = Field(default_factory=list)
    failure: Violation | None = Field(None, description="the first limit broken (when the judge had limits)")


class Spot(BaseModel):
    """Outputs of timed calls the judge checked (random calls of random blocks)."""

    label: str
    checked: int = 0
    failed: int = 0
    worst_abs_err: float = 0.0
    first_failure: str | None = None
    scratch_checked: int = Field(0, description="timed calls whose scratch buffers the judge read after their block")
    scratch_left: int = Field(0, description="of those, calls that left their scratch non-zero")
    scratch_first: str | None = Field(None, description='the first element left non-zero: "workspace[0] = 3786"')


class Timing(BaseModel):
    label: str
    samples_ms: list[float] = Field(description="per-call milliseconds, one per timed block")
    processes: list[list[float]] = Field(default_factory=list, description="the same samples, per worker process")
    first: list[list[bool]] = Field(
        default_factory=list, description="per process and sample: this side ran first in its block (A B or B A)"
    )
    calls_per_sample: int = 1
    cpu_processes: list[list[float]] = Field(
        default_factory=list,
        description="CPU case: per process and block, the CPU ms per call of every thread of the side's sandbox "
        "(the kernel's accounting, read by the judge), the blocks of `processes`",
    )


class CaseRun(BaseModel):
    """Everything the judge reported for one case, whatever happened to the workers."""

    model_config = ConfigDict(frozen=True)

    status: CaseStatus
    detail: Phrase | None = Field(
        None,
        description="why it did not finish, or what a dry run did, as a phrase of the catalog (text it has no message "
        "for, an exception's or a worker's words: as written)",
    )
    failed_label: str | None = Field(None, description="side that was running when it crashed or hung")
    checks: dict[str, Check] = Field(default_factory=dict)
    probes: dict[str, list[Check]] = Field(default_factory=dict, description="side -> its boundary-probe checks")
    probe_count: int | None = Field(None, description="probes the reference built (None: the judge never got there)")
    probe_seconds: float | None = None
    case_seconds: float | None = None
    timings: dict[str, Timing] = Field(default_factory=dict)
    spots: dict[str, Spot] = Field(default_factory=dict)
    cpu: dict[str, CpuUse] = Field(default_factory=dict)
    stop_reason: str | None = None
    seed: str | None = None
    notes: list[str] = Field(default_factory=list)
    output_tail: str = ""
    other_cores: float | None = Field(None, description="cores other processes kept busy during the timing")
    noisy: Phrase | None = Field(
        None, description="why the runner was busy or throttled (it measured longer), a phrase of the findings' catalog"
    )
    phases: dict[str, float] = Field(default_factory=dict, description="the judge's seconds per phase of the case")


class ReferenceSource(BaseModel):
    path: str
    shown: str = Field("", description="the module as the user knows it (kernels/gemm/reference.py) in messages")
    inputs: str = "make_inputs"
    function: str = "reference"
    probes: str = "make_probes"


class SideEntry(BaseModel):
    """The module and function a side's own build names (base's from base's manifest, head's from head's)."""

    module: str
    entry: str


class JudgeJob(BaseModel):
    """The judge's whole input (written to a private file; the secret never reaches a worker)."""

    kernel: str
    reference: ReferenceSource
    cases: list[dict[str, Any]]
    sides: dict[str, dict[str, str]] = Field(description="base/head -> device -> verified .so path")
    module: str
    entry: str
    entries: dict[str, SideEntry] = Field(
        default_factory=dict, description="side -> its own module and entry (a side not here: module, entry)"
    )
    positional: list[str] = Field(default_factory=list, description="case params passed after the tensors, in order")
    keywords: list[str] = Field(default_factory=list, description="case params passed by name")
    arguments: list[str] = Field(
        default_factory=list,
        description="the entry's positional arguments in order, when it writes into some (each case's `buffers`)",
    )
    measure: MeasureSettings
    timeout_s: float
    time: bool = True
    noise_limit_cores: float = 0.5
    probes: bool = Field(True, description="run the reference's boundary probes (a re-measurement skips them)")
    secret: str
    isolate_workers: bool = True
