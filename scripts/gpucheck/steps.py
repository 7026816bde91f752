"""Run the check's steps one after another within a time budget; never stop at the first failure.

Each step is a command run in the repository root with its output in its own log. It ends passed (exit
0), failed (any other exit, or killed at its time limit) or skipped (a step it needs did not pass, or
less time is left than it needs). A step may write a small JSON file (`GPU_CHECK_STEP_JSON`) to give its
own status, a one-line reason, details for gpu-check.json and markdown lines for the summary.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

Status = Literal["passed", "failed", "skipped"]
STATUSES: tuple[Status, ...] = ("passed", "failed", "skipped")
KILL_GRACE_S = 5.0  # after SIGTERM at the limit, SIGKILL this much later
RESERVE_S = 15.0  # kept back from every step's limit for the summary and the copy into the output folder
REASON_LIMIT = 300


@dataclass(frozen=True)
class Step:
    """One step of the check: what it proves, the command, how long it usually takes and may take."""

    name: str
    title: str
    argv: tuple[str, ...]
    estimate_s: float  # skipped when less than this is left of the budget
    limit_s: float  # killed after this long (or when the budget runs out, whichever is first)
    needs: tuple[str, ...] = ()
    quick: bool = True  # part of --quick
    env: Mapping[str, str] = field(default_factory=dict)


@dataclass
class Result:
    """What happened to one step (a row of gpu-check.md and an entry of gpu-check.json)."""

    name: str
    title: str
    status: Status
    reason: str = ""
    seconds: float = 0.0
    exit_code: int | None = None
    log: str | None = None
    details: dict[str, Any] = field(default_factory=dict)
    markdown: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def one_line(text: str, limit: int = REASON_LIMIT) -> str:
    """Whitespace folded to single spaces, cut to `limit` characters (a table cell, a log line)."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def last_line(path: Path) -> str:
    """The last non-empty line of a log (the usual place for the reason a command failed)."""
    try:
        lines = [line for line in path.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return ""
    return one_line(lines[-1]) if lines else ""


class Runner:
    """Runs steps in order against one deadline, recording a Result for each."""

    def __init__(
        self,
        root: Path,
        work: Path,
        budget_s: float,
        env: Mapping[str, str] | None = None,
        clock: Callable[[], float] = time.monotonic,
        echo: Callable[[str], None] = lambda line: None,
    ) -> None:
        self.root, self.work, self.clock, self.echo = root, work, clock, echo
        self.started = clock()
        self.deadline = self.started + budget_s
        self.env = dict(env if env is not None else os.environ)
        self.results: dict[str, Result] = {}
        (work / "logs").mkdir(parents=True, exist_ok=True)
        (work / "steps").mkdir(parents=True, exist_ok=True)

    def left(self) -> float:
        return self.deadline - self.clock()

    def skip(self, step: Step, reason: str) -> Result:
        result = Result(step.name, step.title, "skipped", one_line(reason))
        self.results[step.name] = result
        self.echo(f"[gpu-check] {step.name}: skipped ({result.reason})")
        return result

    def run(self, step: Step) -> Result:
        """Run `step` unless a step it needs did not pass or the budget cannot hold it."""
        for need in step.needs:
            got = self.results.get(need)
            if got is None or got.status != "passed":
                why = "was not run" if got is None else ("failed" if got.status == "failed" else "was skipped")
                return self.skip(step, f"needs {need}, which {why}")
        usable = self.left() - RESERVE_S
        if usable < step.estimate_s:
            return self.skip(
                step,
                f"out of time: needs about {step.estimate_s:.0f} s, {max(usable, 0):.0f} s left of the budget "
                f"(run it alone: --steps {step.name})",
            )
        limit = min(step.limit_s, usable)
        log = self.work / "logs" / f"{step.name}.log"
        report = self.work / "steps" / f"{step.name}.json"
        report.unlink(missing_ok=True)
        env = {
            **self.env,
            **step.env,
            "GPU_CHECK_STEP_JSON": str(report),
            "GPU_CHECK_WORK": str(self.work),
            "GPU_CHECK_DEADLINE": f"{time.time() + limit:.1f}",  # wall clock: the step may budget itself
            "PYTHONUNBUFFERED": "1",
        }
        self.echo(f"[gpu-check] {step.name}: {step.title} (limit {limit:.0f} s)")
        started = self.clock()
        code, timed_out = _execute(step.argv, self.root, env, log, limit)
        seconds = round(self.clock() - started, 1)
        result = Result(step.name, step.title, "passed" if code == 0 else "failed", seconds=seconds, exit_code=code)
        result.log = str(log.relative_to(self.work))
        own = _read_step_json(report)
        if timed_out:
            result.status = "failed"
            result.reason = f"stopped at its time limit of {limit:.0f} s" + (
                f"; last output: {last_line(log)}" if last_line(log) else ""
            )
        elif own.get("status") in STATUSES and code in (0, 1):
            result.status = own["status"]
        if not timed_out:
            result.reason = one_line(str(own.get("reason") or "")) or (
                "" if result.status == "passed" else f"exit {code}: {last_line(log) or 'no output'}"
            )
        details = own.get("details")
        result.details = details if isinstance(details, dict) else {}
        lines = own.get("markdown")
        result.markdown = [str(x) for x in lines] if isinstance(lines, list) else []
        self.results[step.name] = result
        self.echo(
            f"[gpu-check] {step.name}: {result.status} in {seconds:.1f} s"
            + (f" ({result.reason})" if result.reason else "")
        )
        return result


def _read_step_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _execute(argv: Sequence[str], cwd: Path, env: Mapping[str, str], log: Path, limit: float) -> tuple[int, bool]:
    """(exit code, timed out): the command in its own process group, output into `log`."""
    with log.open("wb") as out:
        try:
            proc = subprocess.Popen(
                list(argv), cwd=cwd, env=dict(env), stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        except OSError as exc:
            out.write(f"cannot start {argv[0]}: {exc}\n".encode())
            return 127, False
        try:
            return proc.wait(timeout=max(limit, 0.1)), False
        except subprocess.TimeoutExpired:
            _stop(proc)
            return proc.returncode if proc.returncode is not None else -9, True


def _stop(proc: subprocess.Popen) -> None:
    """SIGTERM the step's process group, SIGKILL it after a grace period."""
    for sig, wait in ((signal.SIGTERM, KILL_GRACE_S), (signal.SIGKILL, None)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def write_step_json(
    status: Status | None = None,
    reason: str = "",
    details: Mapping[str, Any] | None = None,
    markdown: Sequence[str] = (),
    path: str | None = None,
) -> None:
    """Called by a step's own code: its status, reason, details and summary lines (see the module doc)."""
    target = path or os.environ.get("GPU_CHECK_STEP_JSON")
    if not target:
        return
    data: dict[str, Any] = {"reason": reason, "details": dict(details or {}), "markdown": list(markdown)}
    if status is not None:
        data["status"] = status
    Path(target).write_text(json.dumps(data, indent=2, default=str) + "\n")
