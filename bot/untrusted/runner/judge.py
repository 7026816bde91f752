"""The trusted judge of one kernel's cases: it owns the seed, the inputs, the reference, the comparison and the clock.

Runs as `python -m bot.untrusted.runner.judge JOB.json` (no secrets in its environment) and prints one JSON line per
case (a `CaseRun`). Kernel code runs only in the workers: one sandboxed zygote per side (base, head) forks
a fresh worker per measurement process, which can start no process of its own (runner/confine.py). A
worker is handed input files and asked for outputs; the judge times each batch itself (request to reply).
On the CPU it checks one call of every timed batch against the reference, reading the output from the
worker's memory while the whole sandbox is frozen at `done` (runner/freeze.py); on a GPU it fetches a
random sample. It watches how much CPU the sandbox burns outside the timed region.

This file is the judge's own flow (the reference loaded, a case checked, probed, then timed); beside it live the
side processes (`zygote.py`: `Zygote` and the `Worker` it forks), the timing loop (`sampler.py`: `Sampler`), its CPU
accounting (`cpu_accounting.py`) and a case's state and output comparison (`case.py`).
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from bot.config.manifest_tables import Limits
from bot.models.finding import Phrase
from bot.models.judging import CaseRun, Check, JudgeJob, ReferenceSource
from bot.models.report import CaseStatus, Isolation
from bot.phases import Phases
from bot.untrusted.runner import buffers, confine, protocol
from bot.untrusted.runner.blame import REFERENCE_LABEL, ReferenceFailed, blame
from bot.untrusted.runner.case import CaseState, Input, compare, right
from bot.untrusted.runner.sampler import Sampler
from bot.untrusted.runner.spawn import exit_phrase
from bot.untrusted.runner.zygote import Raised, Scalars, Timeout, Worker, WorkerGone, Zygote
from bot.untrusted.sandbox import Sandbox
from bot.verdict import metrics


@dataclass(frozen=True)
class Reference:
    """The reference module's contract, loaded: inputs, the reference itself, and its optional parts."""

    make_inputs: Any
    reference: Any
    make_probes: Any = None
    outputs: tuple[str, ...] | None = None


def load_reference(ref: ReferenceSource) -> Reference:
    """The reference module (base's, in a review): make_inputs, reference, and make_probes / OUTPUTS if it has them.

    ReferenceFailed, naming the file and line, when it does not import or lacks a function."""
    shown = ref.shown or ref.path
    loader = importlib.machinery.SourceFileLoader("opgate_reference", ref.path)
    spec = importlib.util.spec_from_file_location("opgate_reference", ref.path, loader=loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    try:
        loader.exec_module(module)
    except Exception as exc:
        raise blame(exc, ref.path, shown) from exc
    for key, name in (("inputs", ref.inputs), ("function", ref.function)):
        if not callable(getattr(module, name, None)):
            raise ReferenceFailed(f"{shown}: defines no function {name}() (kernel.toml [reference] {key})")
    outputs = getattr(module, "OUTPUTS", None)
    return Reference(
        make_inputs=getattr(module, ref.inputs),
        reference=getattr(module, ref.function),
        make_probes=getattr(module, ref.probes, None),
        outputs=tuple(str(n) for n in outputs) if isinstance(outputs, (tuple, list)) else None,
    )


def _as_list(value: Any) -> list[Any]:
    return [value] if isinstance(value, torch.Tensor) else list(value)


class Judge:
    """Runs every case of one kernel; `run_case` never raises for anything a worker does."""

    def __init__(self, job: JudgeJob, sandbox: Sandbox) -> None:
        self.job, self.sandbox = job, sandbox
        self.secret = bytes.fromhex(job.secret)
        ref = load_reference(job.reference)
        self.make_inputs, self.reference, self.make_probes = ref.make_inputs, ref.reference, ref.make_probes
        self.declared_outputs = ref.outputs
        self.root = Path(
            tempfile.mkdtemp(prefix="opgate-judge-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None)
        )
        (self.root / "in").mkdir()
        self.sides = {label: Zygote(label, job, sandbox, self.root) for label in job.sides}
        self.phases = Phases()
        for side in self.sides.values():
            side.phases = self.phases
        self.seq = 0
        self.draw_seconds = 0.0
        self.case_name = ""
        self.scalars: Scalars = ([], {})
        self.layout: buffers.Layout | None = None  # the case's call when the entry writes into its arguments
        self.device = "cpu"

    def prepare(self, case: dict[str, Any]) -> None:
        """The case's name, scalars and call layout (the buffers the judge allocates), for everything that follows."""
        self.case_name, self.scalars, self.device = case["name"], scalars(self.job, case), case["device"]
        self.layout = buffers.layout(self.job.arguments, self.job.positional, case.get("buffers") or [])

    def close(self) -> None:
        for side in self.sides.values():
            side.stop()
        shutil.rmtree(self.root, ignore_errors=True)

    def seed(self, *parts: object) -> int:
        """A 63-bit seed derived from the run's secret: nobody can know the inputs before the run."""
        digest = hashlib.sha256(self.secret + json.dumps(parts).encode()).digest()
        return int.from_bytes(digest[:8], "big") >> 1

    # -- inputs --------------------------------------------------------------------------------

    def inputs(self, case: dict[str, Any], seed: int) -> list[Input]:
        """make_inputs' set for `case` (a None in it is an optional tensor left out: the entry and the reference get
        None there, and it crosses to the worker as the protocol's NONE entry, never as a dropped argument)."""
        started = time.perf_counter()
        made = _as_list(self._call(self.make_inputs, case, case, case["device"], seed))
        if self.layout is not None and (why := buffers.input_mismatch(self.layout, len(made))) is not None:
            ref = self.job.reference
            raise ReferenceFailed(f"{ref.shown or ref.path}: {ref.inputs}() {why} (case {case['name']})")
        self.draw_seconds = time.perf_counter() - started  # what one set costs (the last one drawn)
        self.phases.add("draw", self.draw_seconds)
        return made

    def expected(self, inputs: list[Input]) -> list[torch.Tensor]:
        """The reference's outputs for `inputs` (the base's reference, run here, in the trusted process)."""
        started = time.perf_counter()
        args, kwargs = self.scalars
        refs = _as_list(self._call(self.reference, None, *inputs, *args, **kwargs))
        self.phases.add("reference", time.perf_counter() - started)
        if self.layout is not None and (why := buffers.reference_mismatch(self.layout, refs)) is not None:
            ref = self.job.reference
            raise ReferenceFailed(f"{ref.shown or ref.path}: {ref.function}() {why} (case {self.case_name})")
        return refs

    def _call(self, function: Callable[..., Any], case: dict[str, Any] | None, *args: Any, **kwargs: Any) -> Any:
        """Call a function of the reference module; what it raises becomes a ReferenceFailed naming file and line."""
        try:
            return function(*args, **kwargs)
        except Exception as exc:
            ref = self.job.reference
            raise blame(exc, ref.path, ref.shown or ref.path, (case or {}).get("name", self.case_name)) from exc

    def _guarded(self, items: Any, case: dict[str, Any]) -> Iterator[Any]:
        """Iterate what the reference module returned (a generator runs its code on each step) under `_call`."""
        it = self._call(iter, case, items)
        while True:
            try:
                yield next(it)
            except StopIteration:
                return
            except Exception as exc:
                ref = self.job.reference
                raise blame(exc, ref.path, ref.shown or ref.path, case["name"]) from exc

    def write_sets(self, sets: list[list[Input]]) -> tuple[str, list[list[dict[str, Any]]], int]:
        """One input file for the block (read-only to both sides); its header and size. With output arguments, every
        set carries fresh buffers after its inputs: outputs poisoned, scratch zeroed (runner/buffers.py)."""
        if self.layout is not None:
            sets = [[*s, *buffers.allocate(self.layout, self.device)] for s in sets]
        self.seq += 1
        name = f"in-{self.seq}.bin"
        entries = protocol.write_tensors(str(self.root / "in" / name), [t for s in sets for t in s])
        return name, protocol.grouped(entries, sets), os.path.getsize(self.root / "in" / name) + 1

    def drop(self, name: str) -> None:
        (self.root / "in" / name).unlink(missing_ok=True)

    # -- one case ------------------------------------------------------------------------------

    def run_case(self, case: dict[str, Any]) -> CaseRun:
        deadline = time.monotonic() + self.job.timeout_s
        state = CaseState(case["name"])
        self.phases.clear()
        state.phases = self.phases
        self.prepare(case)
        try:
            self._case(case, deadline, state)
        except ReferenceFailed as exc:  # the reference's fault, not a side's: named by file, line and case
            for s in self.sides.values():
                s.stop()
            state.label = REFERENCE_LABEL
            return state.result("crashed", str(exc), "")
        except Timeout:
            side = self.sides.get(state.label)
            for s in self.sides.values():
                s.stop()
            where = {"where": [state.where_phrase()]}
            timed_out = Phrase(key="run.timed_out", params={"seconds": f"{self.job.timeout_s:g}"}, phrases=where)
            return state.result("timeout", timed_out, side.output() if side else "")
        except WorkerGone as exc:
            side = self.sides[state.label]
            status = exc.status
            for s in self.sides.values():
                s.stop()
            how = exit_phrase(status) if status is not None and status != 0 else Phrase.as_written(str(exc))
            gone = Phrase(key="run.gone", phrases={"how": [how], "where": [state.where_phrase()]})
            return state.result("crashed", gone, side.output())
        except Raised as exc:  # a timed call raised (a check's raise is that check's error)
            for s in self.sides.values():
                s.stop()
            raised = Phrase(key="run.raised", params={"error": str(exc)}, phrases={"where": [state.where_phrase()]})
            return state.result("crashed", raised, "")
        except Exception as exc:  # nothing a worker sends may take the judge down: that side's error, named
            for s in self.sides.values():
                s.stop()
            what = f"{type(exc).__name__}: {str(exc)[:300]}"
            stuck = Phrase(key="run.judge_stuck", params={"error": what}, phrases={"where": [state.where_phrase()]})
            return state.result("crashed", stuck, "")
        finally:
            for name in state.files:
                self.drop(name)
        return state.result("ok", "", "")

    def launch(self) -> None:
        """Start every side's missing zygote at once, without waiting for it: their torch imports overlap each other
        and whatever the judge does next (drawing inputs, the reference); the case waits for them (`ready`) before
        its first worker."""
        for side in self.sides.values():
            if not side.alive:
                side.stop()
                side.launch()

    def worker(self, label: str, case: dict[str, Any], process: int, deadline: float) -> Worker:
        side = self.sides[label]
        if not side.alive:
            side.stop()
            with side.phases.timed("start"):
                side.start(deadline)
        placement = self.seed(case["name"], label, process, "placement")
        return Worker(side, case["device"], placement, deadline, self.scalars, self.layout)

    def _case(self, case: dict[str, Any], deadline: float, state: CaseState) -> None:
        labels: list[str] = [label for label in ("base", "head") if label in self.sides]
        self.launch()
        check_seed = self.seed(case["name"], "check")
        state.seed = check_seed
        limits = _limits(case)
        inputs = self.inputs(case, check_seed)  # the inputs and the reference's outputs while the zygotes start
        refs = self.expected(inputs)
        starting = [side for side in self.sides.values() if side.starting]
        started = time.perf_counter()
        for side in starting:
            state.enter(side.label, "start")
            side.ready(deadline)
        if starting:
            self.phases.add("start", time.perf_counter() - started)
        file, sets, size = self.write_sets([inputs])
        state.files.append(file)
        workers: dict[str, Worker] = {}
        for label in labels:
            state.enter(label, "check")
            w = workers[label] = self.worker(label, case, 0, deadline)
            w.load(file, sets, size, deadline)
            state.checks[label] = self._check(w, refs, limits, deadline).model_copy(update={"label": label})
        self.drop(file)
        started = time.perf_counter()
        self._probes(case, workers, limits, deadline, state)
        state.probe_seconds = round(time.perf_counter() - started, 4)
        if state.probe_count:
            self.phases["probes"] = state.probe_seconds
        timed = [label for label in labels if self._correct(label, state)]
        if not self.job.time or "head" not in timed:
            for label, w in workers.items():
                state.enter(label, "exit")
                w.exit(deadline)
            return
        Sampler(self, case, {label: workers[label] for label in timed}, deadline, state, inputs).run()

    def _check(self, w: Worker, refs: list[torch.Tensor], limits: Limits, deadline: float) -> Check:
        """Run the loaded input set once and compare it with `refs` under `limits` (never timed)."""
        try:
            w.go(1, deadline)
            check = compare(w.outputs(0, refs, deadline), refs, self.output_names(refs), limits)
            return _marked(check, self.layout) if self.layout is not None else check
        except Raised as exc:
            return Check(error=f"raised or returned a bad output: {exc}")

    def _probes(
        self, case: dict[str, Any], workers: dict[str, Worker], limits: Limits, deadline: float, state: CaseState
    ) -> None:
        """The reference's boundary probes (make_probes), each run once on every side in its check worker.

        A side already wrong on the random inputs is not probed: its verdict is decided, and a probe that then
        crashes it would hide the wrong answer behind a crash."""
        if not self.job.probes:
            return  # a re-measurement: the first run checked them
        state.probe_count = 0
        if self.make_probes is None:
            return
        probed = {label: w for label, w in workers.items() if right(state.checks[label])}
        probes = self._call(self.make_probes, case, case, case["device"], self.seed(case["name"], "probes"))
        for name, probe in self._guarded(probes, case):
            state.probe_count += 1
            if not probed:
                continue
            inputs = _as_list(probe)
            if self.layout is not None and (why := buffers.input_mismatch(self.layout, len(inputs))) is not None:
                ref = self.job.reference
                raise ReferenceFailed(
                    f"{ref.shown or ref.path}: probe {name} of {ref.probes}() {why} (case {case['name']})"
                )
            refs = self.expected(inputs)
            file, sets, size = self.write_sets([inputs])
            state.files.append(file)
            for label, w in probed.items():
                state.enter(label, f"probe {name}")
                w.load(file, sets, size, deadline)
                check = self._check(w, refs, limits, deadline)
                state.probes.setdefault(label, []).append(check.model_copy(update={"label": label, "probe": name}))
            self.drop(file)

    def output_names(self, refs: list[torch.Tensor]) -> list[str]:
        """The outputs' names: the output arguments kernel.toml names, else OUTPUTS, else out, out0, out1 …"""
        if self.layout is not None:
            return [b["name"] for b in self.layout.outputs]
        return metrics.output_names(len(refs), self.declared_outputs)

    def _correct(self, label: str, state: CaseState) -> bool:
        """Right on the random inputs and on every probe, within every limit: only a correct side is timed."""
        return all(right(c) for c in [state.checks[label], *state.probes.get(label, [])])


def _marked(check: Check, lay: buffers.Layout) -> Check:
    """The failure marked `unwritten` when its element of an output argument still holds the judge's poison."""
    v = check.failure
    dtypes = {b["name"]: b["dtype"] for b in lay.outputs}
    if v is None or v.output not in dtypes or not buffers.unwritten(v.got, dtypes[v.output]):
        return check
    return check.model_copy(update={"failure": v.model_copy(update={"unwritten": True})})


def scalars(job: JudgeJob, case: dict[str, Any]) -> Scalars:
    """The case's params the entry takes after its tensors ([build.DEVICE] args by position, kwargs by name)."""
    params = case.get("params") or {}
    return [params[n] for n in job.positional], {n: params[n] for n in job.keywords}


def _limits(case: dict[str, Any]) -> Limits:
    """The case's limits as the review resolved them; a job without them gates max_abs_err at the tolerance."""
    return Limits.model_validate(case.get("limits") or {"max_abs_err": case["tolerance"]})


def main(job_path: str, emit: Callable[[str], None] = print) -> None:
    job = JudgeJob.model_validate_json(Path(job_path).read_text())
    confine.dumpable(False)  # no process of the same user (a worker beside it, in a sandboxed judge) opens its memory
    # CPU cases: one thread, so the judge never competes with a timed worker; a GPU case's inputs are drawn
    # on every core (the worker's calls run on the GPU, and the judge is idle while they do).
    torch.set_num_threads((os.cpu_count() or 1) if any(c["device"] == "cuda" for c in job.cases) else 1)
    inside = Isolation(
        mode="none", reason=Phrase.as_written("the judge itself runs in the sandbox (its reference is untrusted)")
    )
    sandbox = Sandbox.detect() if job.isolate_workers else Sandbox(inside, None)
    try:
        judge = Judge(job, sandbox)
    except ReferenceFailed as exc:  # the reference does not import: every case says where, none runs
        for case in job.cases:
            run = CaseRun(status=CaseStatus.crashed, detail=Phrase.as_written(str(exc)), failed_label=REFERENCE_LABEL)
            emit(json.dumps({"case": case["name"], "run": run.model_dump()}))
        return
    try:
        for case in job.cases:
            run = judge.run_case(case)
            emit(json.dumps({"case": case["name"], "run": run.model_dump()}))
            sys.stdout.flush()
    finally:
        judge.close()


if __name__ == "__main__":
    main(sys.argv[1])
