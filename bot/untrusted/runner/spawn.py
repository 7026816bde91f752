"""Run a kernel's cases: start the trusted judge (which starts the sandboxed workers) and read its verdict data.

The judge is a child process without secrets; the review process only writes its job, waits with a
timeout and parses its JSON lines. A crash or hang of anything below never takes the review down.
"""

from __future__ import annotations

import json
import logging
import secrets
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Literal

from pydantic import ValidationError

from bot.models.finding import Phrase
from bot.models.judging import CaseRun, JudgeJob
from bot.models.report import CaseStatus
from bot.text.safe import log_safe
from bot.untrusted.sandbox import Bind, Sandbox, Spec, base_env, kill
from bot.wording.messages import phrase

log = logging.getLogger(__name__)

JUDGE = "bot.untrusted.runner.judge"
DRY_RUN = "bot.untrusted.runner.dry"  # opgate check: draw every case's inputs, run the smallest case once
JUDGE_SLACK_S = 120.0  # start-up of the judge and its zygotes, on top of the cases' own timeouts
RUN, IN, OUT, EXT = "/opgate/run", "/opgate/in", "/opgate/out", "/opgate/ext"  # a side's files in its sandbox


def describe_exit(returncode: int) -> str:
    return phrase(exit_phrase(returncode))


def exit_phrase(returncode: int) -> Phrase:
    """How a process ended ("killed by signal 11 (SIGSEGV)") as a phrase of the findings' catalog."""
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            return Phrase(key="exit.signal_plain", params={"signal": -returncode})
        return Phrase(key="exit.signal", params={"signal": -returncode, "name": name})
    return Phrase(key="exit.status", params={"status": returncode})


def new_secret() -> str:
    """The per-run secret every input seed is derived from (recorded in the report after the run)."""
    return secrets.token_hex(16)


def run_cases(
    job: JudgeJob, launch: Literal["plain", "sandboxed"] = "plain", runner: str = JUDGE
) -> dict[str, CaseRun]:
    """Start the judge on `job` (or another trusted runner module that speaks its output, `opgate check`'s
    dry run); one CaseRun per case, an error CaseRun for every case it never reported."""
    timeout = sum(job.timeout_s for _ in job.cases) + JUDGE_SLACK_S
    out, err, failure = run_trusted(job, runner, launch, timeout)
    runs = _parse(out)
    if failure is not None:
        tail = log_safe(err.strip().splitlines()[-1:][0] if err.strip() else "")
        log.warning("%s%s", failure, f": {tail}" if tail else "")
        for case in job.cases:
            runs.setdefault(
                case["name"],
                CaseRun(status=CaseStatus.crashed, detail=Phrase.as_written(failure + (f": {tail}" if tail else ""))),
            )
    return runs


def run_trusted(
    job: JudgeJob, module: str, launch: Literal["plain", "sandboxed"], timeout: float, who: str = "the judge"
) -> tuple[str, str, str | None]:
    """Run `python -m module JOB.json` as the judge runs (no secrets; in the sandbox when the reference is untrusted):
    (stdout, stderr, why it failed or None)."""
    with tempfile.TemporaryDirectory(prefix="opgate-job-") as tmp:
        job_path = Path(tmp) / "job.json"
        job_path.write_text(job.model_dump_json())
        argv = [sys.executable, "-P", "-m", module, str(job_path)]  # -P: never the cwd's bot/ (a repository's)
        sandbox = Sandbox.detect()
        if launch == "sandboxed" and sandbox.isolated:
            job_path.write_text(job.model_copy(update={"isolate_workers": False}).model_dump_json())
            # The reference itself is untrusted (a kernel new in this change): the judge runs in the sandbox
            # too, with the opgate package, the reference and the builds read-only, and its workers unwrapped.
            pkg = Path(__file__).resolve().parents[2]  # the bot package
            binds = [
                Bind(pkg, str(pkg)),
                Bind(Path(tmp), tmp),
                Bind(Path(job.reference.path).parent, str(Path(job.reference.path).parent)),
            ]
            binds += [Bind(Path(p), p) for sos in job.sides.values() for p in sos.values()]
            spec = Spec(  # pid1: the judge is its sandbox's init (no bwrap reaper a worker could write into)
                binds=binds,
                env={"PYTHONPATH": str(pkg.parent), "OMP_NUM_THREADS": "1"},
                gpu="cuda" in str(job.sides),
                pid1=True,
            )
            proc = sandbox.popen(spec, argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        else:
            env = base_env(
                {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONPATH": str(Path(__file__).resolve().parents[3])}
            )
            proc = subprocess.Popen(
                argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, start_new_session=True
            )
        try:
            out, err = proc.communicate(timeout=timeout)
            failure = None if proc.returncode == 0 else f"{who} {describe_exit(proc.returncode)}"
        except subprocess.TimeoutExpired:
            kill(proc)
            out, err = proc.communicate()
            failure = f"{who} did not finish within {timeout:g} s"
    return out.decode(errors="replace"), err.decode(errors="replace"), failure


def _parse(stdout: str) -> dict[str, CaseRun]:
    runs: dict[str, CaseRun] = {}
    for line in stdout.splitlines():
        try:
            data = json.loads(line)
            runs[str(data["case"])] = CaseRun.model_validate(data["run"])
        except (ValueError, KeyError, TypeError, ValidationError):
            continue  # not a result line (a warning the judge's libraries printed)
    return runs
