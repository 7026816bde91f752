"""`opgate check`'s dry run: the judge draws every case's inputs and runs the smallest case once, nothing timed.

Runs as `python -m bot.untrusted.runner.dry JOB.json` (in the sandbox: the reference is the working tree's,
untrusted) and prints one JSON line per case, like the judge: the smallest case's CaseRun from the judge's own
check, the others "skipped" once their inputs were drawn, and the first reference failure, naming its file, line
and case, as a crashed run of "the reference" (nothing after it runs). A job without sides (nothing built that
this machine runs) runs the reference alone once on the smallest case: a "skipped" run whose detail starts with
"reference ran".
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from bot.models.finding import Phrase
from bot.models.judging import CaseRun, JudgeJob
from bot.models.report import CaseStatus, Isolation
from bot.untrusted.runner.blame import REFERENCE_LABEL, ReferenceFailed
from bot.untrusted.runner.judge import Judge
from bot.untrusted.sandbox import Sandbox


def _emit(emit: Callable[[str], None], name: str, run: CaseRun) -> None:
    emit(json.dumps({"case": name, "run": run.model_dump()}))
    sys.stdout.flush()


def _failed(detail: str) -> CaseRun:
    return CaseRun(status=CaseStatus.crashed, detail=Phrase.as_written(detail), failed_label=REFERENCE_LABEL)


def main(job_path: str, emit: Callable[[str], None] = print) -> None:
    job = JudgeJob.model_validate_json(Path(job_path).read_text())
    job = job.model_copy(update={"time": False, "probes": False})
    torch.set_num_threads(1)
    inside = Isolation(
        mode="none", reason=Phrase.as_written("the judge itself runs in the sandbox (its reference is untrusted)")
    )
    sandbox = Sandbox.detect() if job.isolate_workers else Sandbox(inside, None)
    try:
        judge = Judge(job, sandbox)
    except ReferenceFailed as exc:
        _emit(emit, job.cases[0]["name"], _failed(str(exc)))
        return
    try:
        judge.launch()  # the zygote imports torch while every case's inputs are drawn
        sizes: dict[str, int] = {}
        for case in job.cases:
            judge.prepare(case)  # its scalars and, for an entry that writes into its arguments, the inputs it names
            try:
                inputs = judge.inputs(case, judge.seed(case["name"], "check"))
            except ReferenceFailed as exc:
                _emit(emit, case["name"], _failed(str(exc)))
                return
            odd = [f"{i} ({type(t).__name__})" for i, t in enumerate(inputs) if not _tensor_or_none(t)]
            if odd:
                ref = job.reference.shown or job.reference.path
                what = f"{ref}: {job.reference.inputs}() returned a non-tensor input {', '.join(odd)}"
                why = "inputs are tensors (or None for an optional tensor left out); scalars go in the case's params"
                _emit(emit, case["name"], _failed(f"{what} (case {case['name']}): {why}"))
                return
            sizes[case["name"]] = sum(t.numel() for t in inputs if t is not None)
            shapes = ", ".join(_shape(t) for t in inputs)
            drawn = Phrase(key="dry.inputs_drawn", params={"seconds": f"{judge.draw_seconds:.2f}", "shapes": shapes})
            _emit(emit, case["name"], CaseRun(status=CaseStatus.skipped, detail=drawn))
        smallest = min(job.cases, key=lambda c: sizes[c["name"]])
        _emit(emit, smallest["name"], judge.run_case(smallest) if job.sides else _reference(judge, smallest))
    finally:
        judge.close()


def _tensor_or_none(value: object) -> bool:
    """An input the judge can pass: a tensor, or None for an optional tensor argument the case leaves out."""
    return value is None or isinstance(value, torch.Tensor)


def _shape(t: torch.Tensor | None) -> str:
    return "None" if t is None else f"{tuple(t.shape)} {str(t.dtype).removeprefix('torch.')}"


def _reference(judge: Judge, case: dict[str, Any]) -> CaseRun:
    """The reference alone, once, on the case's inputs: what it returns, or where it raised."""
    judge.prepare(case)
    try:
        started = time.perf_counter()
        outputs = judge.expected(judge.inputs(case, judge.seed(case["name"], "check")))
    except ReferenceFailed as exc:
        return _failed(str(exc))
    if odd := [f"{i} ({type(t).__name__})" for i, t in enumerate(outputs) if not isinstance(t, torch.Tensor)]:
        ref = judge.job.reference.shown or judge.job.reference.path
        return _failed(f"{ref}: {judge.job.reference.function}() returned a non-tensor output {', '.join(odd)}")
    shapes = ", ".join(_shape(t) for t in outputs)
    seconds = time.perf_counter() - started
    ran = Phrase(key="dry.reference_ran", params={"seconds": f"{seconds:.2f}", "shapes": shapes})
    return CaseRun(status=CaseStatus.skipped, detail=ran)


if __name__ == "__main__":
    main(sys.argv[1])
