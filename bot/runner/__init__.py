"""Run a kernel's cases: start the trusted judge (which starts the sandboxed workers) and read its verdict data.

The judge is a child process without secrets; the review process only writes its job, waits with a
timeout and parses its JSON lines. A crash or hang of anything below never takes the review down.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import logging
import os
import secrets
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from bot.report import CaseStatus, CpuUse, OutputMetrics, Violation
from bot.safe import log_safe

log = logging.getLogger(__name__)

JUDGE_SLACK_S = 120.0  # start-up of the judge and its zygotes, on top of the cases' own timeouts


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


class Timing(BaseModel):
    label: str
    samples_ms: list[float] = Field(description="per-call milliseconds, one per timed block")
    processes: list[list[float]] = Field(default_factory=list, description="the same samples, per worker process")
    calls_per_sample: int = 1


class CaseRun(BaseModel):
    """Everything the judge reported for one case, whatever happened to the workers."""

    model_config = ConfigDict(frozen=True)

    status: CaseStatus
    detail: str = ""
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
    noisy: str | None = Field(None, description="why the runner was too busy or throttled to trust latency")
    phases: dict[str, float] = Field(default_factory=dict, description="the judge's seconds per phase of the case")


class Measure(BaseModel):
    """How long and how hard the judge times each case."""

    model_config = ConfigDict(frozen=True)

    max_seconds: float = 6.0
    min_blocks: int = 5
    max_samples: int = 200
    target_pct: float = 0.5
    min_processes: int = 3
    max_processes: int = 10
    warmup_ms: float = 25.0
    warmup_calls: int = 3


class ReferenceSource(BaseModel):
    path: str
    inputs: str = "make_inputs"
    function: str = "reference"
    probes: str = "make_probes"


class Reference(BaseModel):
    """The reference module's contract, loaded: inputs, the reference itself, and its optional parts."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    make_inputs: Any
    reference: Any
    make_probes: Any = None
    outputs: tuple[str, ...] | None = None


class JudgeJob(BaseModel):
    """The judge's whole input (written to a private file; the secret never reaches a worker)."""

    kernel: str
    reference: ReferenceSource
    cases: list[dict[str, Any]]
    sides: dict[str, dict[str, str]] = Field(description="base/head -> device -> verified .so path")
    module: str
    entry: str
    measure: Measure
    timeout_s: float
    time: bool = True
    noise_limit_cores: float = 0.5
    probes: bool = Field(True, description="run the reference's boundary probes (a re-measurement skips them)")
    secret: str
    isolate_workers: bool = True


def describe_exit(returncode: int) -> str:
    if returncode < 0:
        try:
            return f"killed by signal {-returncode} ({signal.Signals(-returncode).name})"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exited with status {returncode}"


def load_reference(ref: ReferenceSource) -> Reference:
    """The reference module (base's, in a review): make_inputs, reference, and make_probes / OUTPUTS if it has them."""
    loader = importlib.machinery.SourceFileLoader("opgate_reference", ref.path)
    spec = importlib.util.spec_from_file_location("opgate_reference", ref.path, loader=loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    outputs = getattr(module, "OUTPUTS", None)
    return Reference(
        make_inputs=getattr(module, ref.inputs),
        reference=getattr(module, ref.function),
        make_probes=getattr(module, ref.probes, None),
        outputs=tuple(str(n) for n in outputs) if isinstance(outputs, (tuple, list)) else None,
    )


def new_secret() -> str:
    """The per-run secret every input seed is derived from (recorded in the report after the run)."""
    return secrets.token_hex(16)


def run_cases(job: JudgeJob, launch: Literal["plain", "sandboxed"] = "plain") -> dict[str, CaseRun]:
    """Start the judge on `job`; one CaseRun per case, an error CaseRun for every case it never reported."""
    from bot.sandbox import Bind, Sandbox, Spec, kill

    timeout = sum(job.timeout_s for _ in job.cases) + JUDGE_SLACK_S
    with tempfile.TemporaryDirectory(prefix="opgate-job-") as tmp:
        job_path = Path(tmp) / "job.json"
        job_path.write_text(job.model_dump_json())
        argv = [sys.executable, "-m", "bot.runner.judge", str(job_path)]
        sandbox = Sandbox.detect()
        if launch == "sandboxed" and sandbox.isolated:
            job_path.write_text(job.model_copy(update={"isolate_workers": False}).model_dump_json())
            # The reference itself is untrusted (a kernel new in this change): the judge runs in the sandbox
            # too, with the opgate package, the reference and the builds read-only, and its workers unwrapped.
            pkg = Path(__file__).resolve().parent.parent
            binds = [
                Bind(pkg, str(pkg)),
                Bind(Path(tmp), tmp),
                Bind(Path(job.reference.path).parent, str(Path(job.reference.path).parent)),
            ]
            binds += [Bind(Path(p), p) for sos in job.sides.values() for p in sos.values()]
            spec = Spec(
                binds=binds, env={"PYTHONPATH": str(pkg.parent), "OMP_NUM_THREADS": "1"}, gpu="cuda" in str(job.sides)
            )
            proc = sandbox.popen(spec, argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        else:
            from bot.sandbox import base_env

            env = base_env(
                {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
            )
            proc = subprocess.Popen(
                argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, start_new_session=True
            )
        try:
            out, err = proc.communicate(timeout=timeout)
            failure = None if proc.returncode == 0 else f"the judge {describe_exit(proc.returncode)}"
        except subprocess.TimeoutExpired:
            kill(proc)
            out, err = proc.communicate()
            failure = f"the judge did not finish within {timeout:g} s"
    runs = _parse(out.decode(errors="replace"))
    if failure is not None:
        tail = log_safe(err.decode(errors="replace").strip().splitlines()[-1:][0] if err.strip() else "")
        log.warning("%s%s", failure, f": {tail}" if tail else "")
        for case in job.cases:
            runs.setdefault(
                case["name"], CaseRun(status=CaseStatus.crashed, detail=failure + (f": {tail}" if tail else ""))
            )
    return runs


def _parse(stdout: str) -> dict[str, CaseRun]:
    runs: dict[str, CaseRun] = {}
    for line in stdout.splitlines():
        try:
            data = json.loads(line)
            runs[str(data["case"])] = CaseRun.model_validate(data["run"])
        except (ValueError, KeyError, TypeError, ValidationError):
            continue  # not a result line (a warning the judge's libraries printed)
    return runs


def clean_environment() -> dict[str, str]:
    """What a child of opgate that runs no repository code may inherit: os.environ without secrets."""
    return {k: v for k, v in os.environ.items() if not is_secret_variable(k)}


def is_secret_variable(name: str) -> bool:
    """Gateway keys, the GitHub token and the ledger URL: never in a process below the review."""
    return name.startswith(("TAOTOKEN_", "ANTHROPIC_", "OPENAI_")) or name in {
        "GITHUB_TOKEN",
        "GH_TOKEN",
        "OPGATE_DATABASE_URL",
        "PGPASSWORD",
    }
