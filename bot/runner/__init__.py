"""Run one case in a spawned child process with a timeout; a crash or hang never takes the review down."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from bot.report import CaseStatus

log = logging.getLogger(__name__)


class Check(BaseModel):
    """One build's output compared with the reference."""

    label: str
    max_abs_err: float | None = None
    nan_inf: bool = False
    error: str | None = None


class Timing(BaseModel):
    label: str
    samples_ms: list[float]


class CaseRun(BaseModel):
    """Everything one child reported, whatever happened to it."""

    model_config = ConfigDict(frozen=True)

    status: CaseStatus
    detail: str = ""
    failed_label: str | None = Field(None, description="build that was running when it crashed")
    checks: dict[str, Check] = Field(default_factory=dict)
    timings: dict[str, Timing] = Field(default_factory=dict)
    stop_reason: str | None = None


def is_secret_variable(name: str) -> bool:
    """Kernel code under test (and its compiler) never sees gateway keys, the GitHub token or the ledger."""
    return name.startswith(("TAOTOKEN_", "ANTHROPIC_", "OPENAI_")) or name in {
        "GITHUB_TOKEN",
        "GH_TOKEN",
        "OPGATE_DATABASE_URL",
        "PGPASSWORD",
    }


def clean_environment() -> dict[str, str]:
    """os.environ without secrets: what builds and case runs of PR code get."""
    return {k: v for k, v in os.environ.items() if not is_secret_variable(k)}


def describe_exit(returncode: int) -> str:
    if returncode < 0:
        try:
            return f"killed by signal {-returncode} ({signal.Signals(-returncode).name})"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exited with status {returncode}"


def run_case(job: dict[str, Any], timeout_s: float) -> CaseRun:
    """Spawn `python -m bot.runner.child` on `job`; read its event log even if it died."""
    with tempfile.TemporaryDirectory(prefix="opgate-case-") as tmp:
        events_path = Path(tmp) / "events.jsonl"
        job_path = Path(tmp) / "job.json"
        job_path.write_text(json.dumps({**job, "events": str(events_path)}))
        env = clean_environment()
        env.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", PYTHONWARNINGS="ignore")
        proc = subprocess.Popen(
            [sys.executable, "-m", "bot.runner.child", str(job_path)],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
            start_new_session=True,
        )
        try:
            output, _ = proc.communicate(timeout=timeout_s)
            timed_out = False
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            output, _ = proc.communicate()
            timed_out = True
        events = _read_events(events_path)
    return _summarise(events, proc.returncode, timed_out, timeout_s, output or "")


def _read_events(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    events = []
    for line in path.read_text().splitlines():
        try:
            events.append(json.loads(line))
        except json.JSONDecodeError:  # a line cut short by a crash
            break
    return events


def _summarise(
    events: list[dict[str, Any]], returncode: int, timed_out: bool, timeout_s: float, output: str
) -> CaseRun:
    checks: dict[str, Check] = {}
    timings: dict[str, Timing] = {}
    current: str | None = None
    phase: Literal["setup", "check", "timing"] = "setup"
    stop_reason = None
    finished = False
    for event in events:
        kind = event["event"]
        if kind == "start":
            current, phase = event.get("label"), event["phase"]
        elif kind == "check":
            checks[event["label"]] = Check.model_validate({k: v for k, v in event.items() if k != "event"})
        elif kind == "timing":
            for label, samples in event["samples_ms"].items():
                timings[label] = Timing(label=label, samples_ms=samples)
            stop_reason = event["stop_reason"]
        elif kind == "done":
            finished = True
    where = f"{current or 'setup'} {phase}" if phase != "setup" else "setup"
    if timed_out:
        return CaseRun(
            status=CaseStatus.timeout,
            detail=f"timed out after {timeout_s:g} s during {where}",
            failed_label=current,
            checks=checks,
        )
    if not finished:
        tail = " | ".join(output.strip().splitlines()[-3:])
        return CaseRun(
            status=CaseStatus.crashed,
            detail=f"{describe_exit(returncode)} during {where}" + (f": {tail}" if tail else ""),
            failed_label=current,
            checks=checks,
        )
    return CaseRun(status=CaseStatus.ok, checks=checks, timings=timings, stop_reason=stop_reason)
