"""The trusted judge of one kernel's cases: it owns the seed, the inputs, the reference, the comparison and the clock.

Runs as `python -m bot.untrusted.runner.judge JOB.json` (no secrets in its environment) and prints one JSON line per
case (a `CaseRun`). Kernel code runs only in the workers: one sandboxed zygote per side (base, head) forks
a fresh worker per measurement process, which can start no process of its own (runner/confine.py). A
worker is handed input files and asked for outputs; the judge times each batch itself (request to reply).
On the CPU it checks one call of every timed batch against the reference, reading the output from the
worker's memory while the whole sandbox is frozen at `done` (runner/freeze.py); on a GPU it fetches a
random sample. It watches how much CPU the sandbox burns outside the timed region.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import json
import os
import random
import select
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from bot.config.manifest import Limits
from bot.models.judging import CaseRun, Check, JudgeJob, ReferenceSource, Spot, Timing
from bot.models.report import CaseStatus, CpuUse, Isolation
from bot.phases import Phases
from bot.text.safe import log_safe
from bot.untrusted.runner import confine, protocol
from bot.untrusted.runner.blame import ReferenceFailed, blame
from bot.untrusted.runner.freeze import Unfrozen, frozen, host_pid, read_outputs, seccomp_mode
from bot.untrusted.runner.health import busy_ticks, noisy, snapshot
from bot.untrusted.runner.spawn import describe_exit
from bot.untrusted.sandbox import Bind, Sandbox, Spec, kill, tree_cpu_seconds
from bot.verdict import metrics
from bot.verdict.stats import Paired, decide, paired

RUN, IN, OUT, EXT = "/opgate/run", "/opgate/in", "/opgate/out", "/opgate/ext"
WORKER_FILES = ("worker.py", "protocol.py", "confine.py")
LOG_KEEP = 8192  # bytes of a side's output kept for the report
THROTTLE_FRACTION = 0.95  # a block measured below 95% of the highest SM clock seen is discarded
BLOCK_MS = 20.0  # a timing block lasts about this long per side
DRAW_PER_BLOCK_S = 0.25  # fewer distinct input sets per block where drawing them would take longer than this
DRAW_FLOOR_S = 2.0  # input drawing may always take this long per case; beyond it, no longer than the timing
MAX_SETS = 16  # distinct input sets per block (each call of a block gets its own, up to this many)
SPOT_PROBABILITY = 0.25  # share of GPU blocks whose outputs are fetched and checked (a CPU case checks every block)
# The sandbox may use this much CPU outside its timed calls (reading inputs, writing outputs, replies; the
# counters tick every 10 ms) …
UNTIMED_CPU_SLACK_S, UNTIMED_CPU_PER_BLOCK_S, UNTIMED_CPU_PER_MB_S, UNTIMED_CPU_SHARE = 0.05, 0.002, 0.004, 0.10
# … and inside them at most one core's worth (the CPU runner measures single-threaded kernels).
TIMED_CPU_RATIO, TIMED_CPU_SLACK_S = 1.15, 0.15
GPU_BUSY_MS = 2.0  # the judge's own tiny kernel waiting longer than this means the worker left work running
BUSY_FACTOR = 2  # a busy runner measures this many times longer (processes, samples, seconds) before the last look
REFERENCE_LABEL = "the reference"  # who failed, when make_inputs, reference or make_probes raised
Scalars = tuple[list[Any], dict[str, Any]]  # a case's non-tensor arguments of the entry: by position, by name


class Timeout(Exception):
    pass


class WorkerGone(Exception):
    """The worker (or its zygote) died or broke the protocol; `status` is its exit status when known."""

    def __init__(self, detail: str, status: int | None = None) -> None:
        super().__init__(detail)
        self.status = status


class Raised(Exception):
    """The kernel raised inside a call."""


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


class _Log(threading.Thread):
    """Drains a side's stdout/stderr so it never blocks, keeping the last LOG_KEEP bytes."""

    def __init__(self, stream: Any) -> None:
        super().__init__(daemon=True)
        self.stream, self.tail = stream, b""

    def run(self) -> None:
        for chunk in iter(lambda: self.stream.read1(65536), b""):
            self.tail = (self.tail + chunk)[-LOG_KEEP:]

    def text(self) -> str:
        return log_safe(self.tail.decode(errors="replace")).strip()


class Zygote:
    """One side's sandboxed zygote (base or head): started lazily, killed on a timeout, restarted for the next case."""

    def __init__(self, label: str, job: JudgeJob, sandbox: Sandbox, root: Path) -> None:
        self.label, self.job, self.sandbox = label, job, sandbox
        self.phases = Phases()  # shared with the judge: seconds per phase of the current case
        self.out_dir = root / f"out-{label}"
        self.out_dir.mkdir()
        self.in_dir = root / "in"
        self.proc: subprocess.Popen | None = None
        self.log: _Log | None = None
        self.cmd_w = self.rep_r = -1
        self.buffer = b""
        here = Path(__file__).resolve().parent
        sos = job.sides[label]
        binds = [Bind(here / name, f"{RUN}/{name}") for name in WORKER_FILES]
        binds += [Bind(self.in_dir, IN), Bind(self.out_dir, OUT, writable=True)]
        binds += [Bind(Path(path), f"{EXT}/{device}.so") for device, path in sos.items()]
        # pid1: the zygote is its namespace's init, so no bwrap reaper (dumpable, unfiltered) is there to write into
        env = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
        self.spec = Spec(binds=binds, env=env, gpu="cuda" in sos, pid1=True)

    def path(self, inside: str) -> str:
        return self.sandbox.localize(self.spec, inside)

    def start(self, deadline: float) -> None:
        self.launch()
        self.ready(deadline)

    def launch(self) -> None:
        """Start the zygote (it imports torch: seconds); `ready` waits for it, so sides can start together."""
        cmd_r, self.cmd_w = os.pipe()
        self.rep_r, rep_w = os.pipe()
        argv = [sys.executable, self.path(f"{RUN}/worker.py"), str(cmd_r), str(rep_w), self.path(IN), self.path(OUT)]
        self.proc = self.sandbox.popen(
            self.spec, argv, pass_fds=(cmd_r, rep_w), stdout=subprocess.PIPE, stderr=subprocess.STDOUT
        )
        os.close(cmd_r)
        os.close(rep_w)
        self.log = _Log(self.proc.stdout)
        self.log.start()
        self.buffer = b""

    def ready(self, deadline: float) -> None:
        self.expect("zygote", deadline)

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> None:
        if self.proc is not None:
            kill(self.proc)
            self.proc.wait()
            if self.log is not None:
                self.log.join(timeout=5)
        for fd in (self.cmd_w, self.rep_r):
            if fd >= 0:
                os.close(fd)
        self.cmd_w = self.rep_r = -1
        self.proc = None

    def cpu(self) -> float:
        return tree_cpu_seconds(self.proc.pid) if self.proc is not None else 0.0

    def output(self) -> str:
        return self.log.text() if self.log is not None else ""

    # -- the channel ----------------------------------------------------------------------------

    def send(self, message: dict[str, Any]) -> None:
        try:
            protocol.send(self.cmd_w, message)
        except OSError as exc:
            raise WorkerGone(f"the worker stopped reading ({exc.strerror})") from exc

    def _read(self, n: int, deadline: float) -> bytes:
        while len(self.buffer) < n:
            left = deadline - time.monotonic()
            if left <= 0:
                raise Timeout()
            ready, _, _ = select.select([self.rep_r], [], [], left)
            if not ready:
                raise Timeout()
            chunk = os.read(self.rep_r, 1 << 16)
            if not chunk:
                raise WorkerGone("the sandbox closed its channel", self._exit_status())
            self.buffer += chunk
        data, self.buffer = self.buffer[:n], self.buffer[n:]
        return data

    def _exit_status(self) -> int | None:
        if self.proc is None:
            return None
        try:
            return self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            return None

    def recv(self, deadline: float) -> dict[str, Any]:
        try:
            size = protocol.frame_size(self._read(protocol.HEADER, deadline))
            return protocol.decode(self._read(size, deadline))
        except protocol.ProtocolError as exc:
            raise WorkerGone(f"protocol broken: {exc}") from exc

    def expect(self, event: str, deadline: float) -> dict[str, Any]:
        message = self.recv(deadline)
        got = message.get("event")
        if got == event:
            return message
        if got == "raised":
            raise Raised(str(message.get("error", ""))[:2000])
        if got == "exited":
            status = message.get("status")
            raise WorkerGone("the worker exited", status if isinstance(status, int) else None)
        raise WorkerGone(f"protocol broken: expected {event!r}, got {str(got)[:40]!r}")


class Worker:
    """One fresh worker process of a side (forked by its zygote)."""

    def __init__(
        self, side: Zygote, device: str, placement_seed: int, deadline: float, scalars: Scalars | None = None
    ) -> None:
        self.side, self.scalars = side, scalars or ([], {})
        self.gpu = device == "cuda"
        self.pid = 0  # the worker's pid on this machine (its memory is read from /proc)
        self.done: dict[str, Any] = {}  # the last batch's reply
        self.captured: dict[int, list[torch.Tensor]] = {}
        with side.phases.timed("spawn"):
            self._spawn(device, placement_seed, deadline)
        self.fetches = 0

    def _spawn(self, device: str, placement_seed: int, deadline: float) -> None:
        side = self.side
        own = side.job.entries.get(side.label)  # each side runs the entry its own build names
        side.send(
            {
                "op": "spawn",
                "device": device,
                "so": side.path(f"{EXT}/{device}.so"),
                "module": own.module if own is not None else side.job.module,
                "entry": own.entry if own is not None else side.job.entry,
                "args": self.scalars[0],
                "kwargs": self.scalars[1],
                "placement_seed": placement_seed,
            }
        )
        ready = side.expect("ready", deadline)
        ns_pid = ready.get("pid")
        found = host_pid(side.proc.pid, ns_pid) if isinstance(ns_pid, int) and side.proc is not None else None
        if found is None:
            raise WorkerGone(f"protocol broken: the worker's pid {str(ns_pid)[:20]} is not in its sandbox")
        self.pid = found
        if confine.supported() is None and seccomp_mode(found) != 2:
            why = ready.get("unconfined")
            raise WorkerGone(f"the worker is not confined (seccomp){f': {str(why)[:200]}' if why else ''}")

    def load(self, file: str, sets: list[list[dict[str, Any]]], max_bytes: int, deadline: float) -> None:
        with self.side.phases.timed("load"):
            self.side.send({"op": "load", "file": file, "sets": sets, "max_bytes": max_bytes})
            self.side.expect("loaded", deadline)

    def go(self, calls: int, deadline: float) -> None:
        self.side.send({"op": "go", "calls": calls})
        self.done = self.side.expect("done", deadline)
        self.captured = {}

    def capture(self, j: int, refs: list[torch.Tensor]) -> None:
        """CPU: freeze the side's sandbox and copy set `j`'s outputs out of the worker's memory, as `done` left them."""
        where = self.done.get("outputs")
        header = where[j] if isinstance(where, list) and 0 <= j < len(where) else None
        if header is None:
            raise WorkerGone(f"protocol broken: no outputs of input set {j} in the reply to the batch")
        proc = self.side.proc
        assert proc is not None
        try:
            with self.side.phases.timed("capture"), frozen(proc.pid):
                self.captured[j] = read_outputs(self.pid, header, max_bytes=_output_limit(refs))
        except protocol.ProtocolError as exc:
            raise WorkerGone(f"protocol broken: {exc}") from exc
        except Unfrozen as exc:
            raise WorkerGone(str(exc)) from exc

    def outputs(self, j: int, refs: list[torch.Tensor], deadline: float) -> list[torch.Tensor]:
        """Set `j`'s outputs of the last batch: captured at `done` on the CPU, fetched as a file on a GPU."""
        if self.gpu:
            return self.fetch(j, refs, deadline)
        if j not in self.captured:
            self.capture(j, refs)
        return self.captured[j]

    def fetch(self, j: int, refs: list[torch.Tensor], deadline: float) -> list[torch.Tensor]:
        with self.side.phases.timed("fetch"):
            return self._fetch(j, refs, deadline)

    def _fetch(self, j: int, refs: list[torch.Tensor], deadline: float) -> list[torch.Tensor]:
        self.fetches += 1
        self.side.send({"op": "fetch", "set": j, "seq": self.fetches})
        reply = self.side.expect("fetched", deadline)
        name = f"out-{self.fetches}.bin"
        if reply.get("file") != name:
            raise WorkerGone("protocol broken: an output file it was not asked for")
        try:
            outs = protocol.read_tensors(
                str(self.side.out_dir / name), reply.get("tensors"), max_bytes=_output_limit(refs), device="cpu"
            )
        except protocol.ProtocolError as exc:
            raise Raised(f"bad output: {exc}") from exc
        finally:
            (self.side.out_dir / name).unlink(missing_ok=True)
        return outs

    def exit(self, deadline: float) -> None:
        with self.side.phases.timed("exit"):
            self._exit(deadline)

    def _exit(self, deadline: float) -> None:
        self.side.send({"op": "exit"})
        message = self.side.recv(deadline)
        if message.get("event") != "exited" or message.get("status") != 0:
            raise WorkerGone("the worker did not exit cleanly", message.get("status"))


def _output_limit(refs: list[torch.Tensor]) -> int:
    return sum(r.numel() * 8 for r in refs) + 4096  # up to float64 of every reference element


def compare(
    outs: list[torch.Tensor],
    refs: list[torch.Tensor],
    names: list[str] | None = None,
    limits: Limits | None = None,
) -> Check:
    """Every metric of every output (bot/metrics.py); NaN/Inf must sit exactly where the reference has them.

    `max_abs_err` is the worst over all outputs (the users' gate); given `limits`, `failure` is the first one
    broken, with its first bad element."""
    if len(outs) != len(refs):
        return Check(error=f"returned {len(outs)} tensors, the reference {len(refs)}")
    for i, (o, r) in enumerate(zip(outs, refs, strict=True)):
        if tuple(o.shape) != tuple(r.shape):
            return Check(error=f"output {i} has shape {tuple(o.shape)}, the reference {tuple(r.shape)}")
    names = names if names is not None and len(names) == len(refs) else metrics.output_names(len(refs))
    outputs, failure = metrics.evaluate(outs, refs, names, limits)
    worst = max((m.max_abs_err or 0.0 for m in outputs), default=0.0)
    return Check(max_abs_err=worst, nan_inf=any(m.nan_inf for m in outputs), outputs=outputs, failure=failure)


def _as_list(value: Any) -> list[torch.Tensor]:
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

    def close(self) -> None:
        for side in self.sides.values():
            side.stop()
        shutil.rmtree(self.root, ignore_errors=True)

    def seed(self, *parts: object) -> int:
        """A 63-bit seed derived from the run's secret: nobody can know the inputs before the run."""
        digest = hashlib.sha256(self.secret + json.dumps(parts).encode()).digest()
        return int.from_bytes(digest[:8], "big") >> 1

    # -- inputs --------------------------------------------------------------------------------

    def inputs(self, case: dict[str, Any], seed: int) -> list[torch.Tensor]:
        started = time.perf_counter()
        made = _as_list(self._call(self.make_inputs, case, case, case["device"], seed))
        self.draw_seconds = time.perf_counter() - started  # what one set costs (the last one drawn)
        self.phases.add("draw", self.draw_seconds)
        return made

    def expected(self, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        """The reference's outputs for `inputs` (the base's reference, run here, in the trusted process)."""
        started = time.perf_counter()
        args, kwargs = self.scalars
        refs = _as_list(self._call(self.reference, None, *inputs, *args, **kwargs))
        self.phases.add("reference", time.perf_counter() - started)
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

    def write_sets(self, sets: list[list[torch.Tensor]]) -> tuple[str, list[list[dict[str, Any]]], int]:
        """One input file for the block (read-only to both sides); its header and size."""
        self.seq += 1
        name = f"in-{self.seq}.bin"
        entries = protocol.write_tensors(str(self.root / "in" / name), [t for s in sets for t in s])
        grouped, i = [], 0
        for s in sets:
            grouped.append(entries[i : i + len(s)])
            i += len(s)
        return name, grouped, os.path.getsize(self.root / "in" / name) + 1

    def drop(self, name: str) -> None:
        (self.root / "in" / name).unlink(missing_ok=True)

    # -- one case ------------------------------------------------------------------------------

    def run_case(self, case: dict[str, Any]) -> CaseRun:
        deadline = time.monotonic() + self.job.timeout_s
        state = _CaseState(case["name"])
        self.phases.clear()
        state.phases = self.phases
        self.case_name, self.scalars = case["name"], scalars(self.job, case)
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
            return state.result(
                "timeout",
                f"timed out after {self.job.timeout_s:g} s during {state.where()}",
                side.output() if side else "",
            )
        except WorkerGone as exc:
            side = self.sides[state.label]
            status = exc.status
            for s in self.sides.values():
                s.stop()
            how = describe_exit(status) if status is not None and status != 0 else str(exc)
            return state.result("crashed", f"{how} during {state.where()}", side.output())
        except Raised as exc:  # a timed call raised (a check's raise is that check's error)
            for s in self.sides.values():
                s.stop()
            return state.result("crashed", f"raised during {state.where()}: {exc}", "")
        except Exception as exc:  # nothing a worker sends may take the judge down: that side's error, named
            for s in self.sides.values():
                s.stop()
            what = f"{type(exc).__name__}: {str(exc)[:300]}"
            return state.result("crashed", f"the judge could not go on ({what}) during {state.where()}", "")
        finally:
            for name in state.files:
                self.drop(name)
        return state.result("ok", "", "")

    def _worker(self, label: str, case: dict[str, Any], process: int, deadline: float) -> Worker:
        side = self.sides[label]
        if not side.alive:
            side.stop()
            with side.phases.timed("start"):
                side.start(deadline)
        placement = self.seed(case["name"], label, process, "placement")
        return Worker(side, case["device"], placement, deadline, self.scalars)

    def _case(self, case: dict[str, Any], deadline: float, state: _CaseState) -> None:
        labels: list[str] = [label for label in ("base", "head") if label in self.sides]
        idle = [side for side in self.sides.values() if not side.alive]
        started = time.perf_counter()
        for side in idle:  # start every missing zygote at once: their torch imports overlap
            side.stop()
            side.launch()
        for side in idle:
            state.enter(side.label, "start")
            side.ready(deadline)
        if idle:
            self.phases.add("start", time.perf_counter() - started)
        check_seed = self.seed(case["name"], "check")
        state.seed = check_seed
        limits = _limits(case)
        inputs = self.inputs(case, check_seed)
        refs = self.expected(inputs)
        file, sets, size = self.write_sets([inputs])
        state.files.append(file)
        workers: dict[str, Worker] = {}
        for label in labels:
            state.enter(label, "check")
            w = workers[label] = self._worker(label, case, 0, deadline)
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
            names = metrics.output_names(len(refs), self.declared_outputs)
            return compare(w.outputs(0, refs, deadline), refs, names, limits)
        except Raised as exc:
            return Check(error=f"raised or returned a bad output: {exc}")

    def _probes(
        self, case: dict[str, Any], workers: dict[str, Worker], limits: Limits, deadline: float, state: _CaseState
    ) -> None:
        """The reference's boundary probes (make_probes), each run once on every side in its check worker.

        A side already wrong on the random inputs is not probed: its verdict is decided, and a probe that then
        crashes it would hide the wrong answer behind a crash."""
        if not self.job.probes:
            return  # a re-measurement: the first run checked them
        state.probe_count = 0
        if self.make_probes is None:
            return
        probed = {label: w for label, w in workers.items() if _right(state.checks[label])}
        probes = self._call(self.make_probes, case, case, case["device"], self.seed(case["name"], "probes"))
        for name, probe in self._guarded(probes, case):
            state.probe_count += 1
            if not probed:
                continue
            inputs = _as_list(probe)
            refs = self.expected(inputs)
            file, sets, size = self.write_sets([inputs])
            state.files.append(file)
            for label, w in probed.items():
                state.enter(label, f"probe {name}")
                w.load(file, sets, size, deadline)
                check = self._check(w, refs, limits, deadline)
                state.probes.setdefault(label, []).append(check.model_copy(update={"label": label, "probe": name}))
            self.drop(file)

    def _correct(self, label: str, state: _CaseState) -> bool:
        """Right on the random inputs and on every probe, within every limit: only a correct side is timed."""
        return all(_right(c) for c in [state.checks[label], *state.probes.get(label, [])])


def scalars(job: JudgeJob, case: dict[str, Any]) -> Scalars:
    """The case's params the entry takes after its tensors ([build.DEVICE] args by position, kwargs by name)."""
    params = case.get("params") or {}
    return [params[n] for n in job.positional], {n: params[n] for n in job.keywords}


def _right(check: Check) -> bool:
    return check.error is None and not check.nan_inf and check.failure is None


def _limits(case: dict[str, Any]) -> Limits:
    """The case's limits as the review resolved them; a job without them gates max_abs_err at the tolerance."""
    return Limits.model_validate(case.get("limits") or {"max_abs_err": case["tolerance"]})


class _CaseState:
    """What is known about a case so far; where it was when something went wrong."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.label, self.phase = "setup", "setup"
        self.checks: dict[str, Check] = {}
        self.probes: dict[str, list[Check]] = {}
        self.probe_count: int | None = None
        self.probe_seconds: float | None = None
        self.started = time.perf_counter()
        self.timings: dict[str, Timing] = {}
        self.spots: dict[str, Spot] = {}
        self.cpu: dict[str, CpuUse] = {}
        self.notes: list[str] = []
        self.files: list[str] = []
        self.seed: int | None = None
        self.stop_reason: str | None = None
        self.tampered: str | None = None
        self.other_cores: float | None = None
        self.noisy: str | None = None
        self.phases = Phases()

    def enter(self, label: str, phase: str) -> None:
        self.label, self.phase = label, phase

    def where(self) -> str:
        return f"{self.label} {self.phase}" if self.label != "setup" else "setup"

    def result(self, status: str, detail: str, output: str) -> CaseRun:
        if status == "ok" and self.tampered:
            status, detail = "tampered", self.tampered
        if output:
            detail = f"{detail}: {output.splitlines()[-1][:300]}" if detail else detail
        return CaseRun(
            status=status,  # type: ignore[arg-type]
            detail=detail,
            failed_label=self.label if status in ("timeout", "crashed") else None,
            checks=self.checks,
            probes=self.probes,
            probe_count=self.probe_count,
            probe_seconds=self.probe_seconds,
            case_seconds=round(time.perf_counter() - self.started, 4),
            timings=self.timings,
            spots=self.spots,
            cpu=self.cpu,
            stop_reason=self.stop_reason,
            seed=str(self.seed) if self.seed is not None else None,
            notes=self.notes,
            output_tail=output[-2000:],
            other_cores=self.other_cores,
            noisy=self.noisy,
            phases={
                **{k: round(v, 3) for k, v in self.phases.items()},
                "total": round(time.perf_counter() - self.started, 3),
            },
        )


class Sampler:
    """Interleaved timing of the correct sides over several fresh process pairs, with spot checks and CPU accounting.

    Each pair is one new worker per side (forked from the side's zygote, placed afresh): warm-up, then
    `min_blocks` blocks A B, B A, … of fresh inputs. After each pair the paired statistic is looked at
    (`bot.verdict.stats.decide`): it stops early when its 99.9 % interval clears the limit, else at the last look —
    a cap, or a 95 % interval narrow enough — where the 95 % interval decides. A busy runner (other processes
    over `noise_limit_cores`) raises the caps by BUSY_FACTOR: noise buys measurement, it never vetoes a verdict.
    """

    def __init__(
        self,
        judge: Judge,
        case: dict[str, Any],
        workers: dict[str, Worker],
        deadline: float,
        state: _CaseState,
        warm: list[torch.Tensor],
    ) -> None:
        self.judge, self.case, self.workers, self.deadline, self.state = judge, case, workers, deadline, state
        self.warm = warm  # the check inputs: warm-ups run on them (drawing inputs can cost seconds on a GPU case)
        self.draw_per_set = judge.draw_seconds
        self.drawn_seconds = 0.0
        self.current: tuple[str, list[list[dict[str, Any]]], int, list[list[torch.Tensor]]] | None = None
        self.loaded: dict[str, str] = {}
        self.m = judge.job.measure
        self.labels = list(workers)
        self.processes: dict[str, list[list[float]]] = {label: [] for label in self.labels}
        self.firsts: dict[str, list[list[bool]]] = {label: [] for label in self.labels}  # ran first in its block
        self.busy: str | None = None  # why the runner is busy, as far as measured so far
        self.load0 = (time.monotonic(), busy_ticks(), 0.0)
        self.timed_wall = dict.fromkeys(self.labels, 0.0)
        self.timed_cpu = dict.fromkeys(self.labels, 0.0)
        self.untimed_cpu = dict.fromkeys(self.labels, 0.0)
        self.blocks = 0
        self.bytes_in = 0
        self.calls = 0
        self.throttled = 0
        self.clocks: list[float] = []
        self.rng = random.Random(judge.seed(case["name"], "spots"))
        self.gpu = case["device"] == "cuda"
        self.refs_of, self.refs = "", dict[int, list[torch.Tensor]]()

    def _timed(self, label: str, calls: int, capture: tuple[int, list[torch.Tensor]] | None = None) -> float:
        """One batch of `calls`, timed by the judge from request to reply (and the GPU idle again); on the CPU,
        `capture` (set, its reference) copies that set's outputs out of the frozen sandbox right at `done`."""
        w = self.workers[label]
        self.state.enter(label, "timing")
        cpu0 = w.side.cpu() if not self.gpu else 0.0
        t0 = time.perf_counter_ns()
        w.go(calls, self.deadline)
        if self.gpu:
            busy = _gpu_busy_ms()
            if busy > GPU_BUSY_MS:
                self.state.tampered = (
                    f"{label}: the GPU was still busy {busy:.1f} ms after the worker reported its calls done "
                    "(work left running outside the timed region)"
                )
        t1 = time.perf_counter_ns()
        if capture is not None and not self.gpu:
            w.capture(*capture)  # first thing after the clock: nothing of the sandbox runs until it is copied
        if not self.gpu:
            self.timed_cpu[label] += w.side.cpu() - cpu0
        wall = (t1 - t0) / 1e6
        self.timed_wall[label] += wall / 1e3
        self.judge.phases.add("timed", wall / 1e3)
        return wall / calls

    def run(self) -> None:
        labels = self.labels
        started, busy0, ours0 = time.monotonic(), busy_ticks(), self._ours()
        self.load0 = (started, busy0, ours0)
        stop, pair = None, 0
        while stop is None:
            if pair > 0:  # a fresh process per side; which side starts alternates from pair to pair
                self.workers = {
                    label: self.judge._worker(label, self.case, pair, self.deadline)
                    for label in block_order(pair, labels)
                }
            self._pair(pair)
            pair += 1
            stop = self._stop(pair, time.monotonic() - started)
        self.state.other_cores = self._other_cores()
        self.state.noisy = noisy(self.state.other_cores, self.judge.job.noise_limit_cores, snapshot())
        self._account()
        for label in labels:
            flat = [x for p in self.processes[label] for x in p]
            self.state.timings[label] = Timing(
                label=label,
                samples_ms=flat,
                processes=self.processes[label],
                first=self.firsts[label],
                calls_per_sample=self.calls,
            )
        self.state.stop_reason = stop
        if self.throttled:
            self.state.notes.append(
                f"{self.throttled} block(s) measured below {THROTTLE_FRACTION:.0%} of the top SM clock were discarded"
            )

    def _other_cores(self) -> float:
        """Cores other processes kept busy since the timing began (the machine's busy ticks less our own CPU)."""
        started, busy0, ours0 = self.load0
        wall = time.monotonic() - started
        other = ((busy_ticks() - busy0) / os.sysconf("SC_CLK_TCK") - (self._ours() - ours0)) / max(wall, 1e-9)
        return round(max(0.0, other), 2)

    def _ours(self) -> float:
        """CPU seconds of the judge and every sandbox it runs (to tell the machine's other load apart)."""
        own = os.times()
        return own.user + own.system + sum(side.cpu() for side in self.judge.sides.values())

    def _pair(self, pair: int) -> None:
        """One process per side: warm-up, `min_blocks` interleaved blocks with spot checks, then exit."""
        labels, m = self.labels, self.m
        file, header, size = self.judge.write_sets([self.warm])
        self.state.files.append(file)
        for label in labels:  # warm-up: at least warmup_ms and warmup_calls of calls
            self.workers[label].load(file, header, size, self.deadline)
            self.loaded[label] = file
        call_ms = max(self._warm_up(label) for label in labels)
        self.judge.drop(file)
        if not self.calls:  # the block length is fixed by the first pair, so every sample means the same
            self.calls = max(1, min(50, int(BLOCK_MS / max(call_ms, 1e-3))))
        calls = self.calls
        # Distinct input sets per block: one per call up to MAX_SETS, fewer where drawing one costs more than
        # DRAW_PER_BLOCK_S (big GPU cases draw hundreds of MB per set on the CPU).
        n_sets = max(1, min(calls, MAX_SETS, int(DRAW_PER_BLOCK_S / max(self.draw_per_set, 1e-6))))
        cpu_start = {label: self.workers[label].side.cpu() for label in labels}
        timed_start = dict(self.timed_cpu)
        samples: dict[str, list[float]] = {label: [] for label in labels}
        firsts: dict[str, list[bool]] = {label: [] for label in labels}
        forced = self.rng.randrange(m.min_blocks)  # every process is checked at least once, at a random block
        for b in range(m.min_blocks):
            file, header, size, inputs = self._inputs(pair, b, n_sets)
            order = block_order(pair + b, labels)
            for label in order:
                if self.loaded.get(label) != file:
                    self.workers[label].load(file, header, size, self.deadline)
                    self.loaded[label] = file
                    self.bytes_in += size
            # Whether, and which call, to check is drawn before the calls run; half the time it is the last call
            # of the block (the one whose work could still be running when the batch reports done). A CPU block is
            # always checked: its outputs are read from the frozen worker, so a check costs the reference alone.
            spot = not self.gpu or b == forced or self.rng.random() < SPOT_PROBABILITY
            j = (calls - 1) % n_sets if self.rng.random() < 0.5 else self.rng.randrange(n_sets)
            refs = self._expected(file, j, inputs) if spot else []
            block = {}
            for label in order:
                block[label] = self._timed(label, calls, (j, refs) if spot else None)
                if spot:  # at once, before the other side runs
                    self._spot_check(label, refs, j)
            self.blocks += 1
            clock = _sm_clock_mhz() if self.gpu else None
            if clock is not None:
                self.clocks.append(clock)
            if clock is not None and clock < THROTTLE_FRACTION * max(self.clocks):
                self.throttled += 1
            else:
                for label in labels:
                    samples[label].append(block[label])
                    firsts[label].append(order[0] == label)
        for label in labels:
            total = self.workers[label].side.cpu() - cpu_start[label]
            self.untimed_cpu[label] += max(0.0, total - (self.timed_cpu[label] - timed_start[label]))
            self.state.enter(label, "exit")
            self.workers[label].exit(self.deadline)
            self.processes[label].append(samples[label])
            self.firsts[label].append(firsts[label])

    def _inputs(self, pair: int, block: int, n_sets: int) -> tuple[str, list[list[dict[str, Any]]], int, list]:
        """Fresh input sets for this block — or, where drawing them would cost more than the timing itself
        (big GPU cases), the sets of an earlier block again; every worker process still gets fresh ones first."""
        timed = sum(self.timed_wall.values())
        cost = n_sets * self.draw_per_set
        fresh = self.current is None or block == 0 or self.drawn_seconds + cost <= max(DRAW_FLOOR_S, timed)
        if fresh or self.current is None:
            seeds = [self.judge.seed(self.case["name"], "block", pair, block, i) for i in range(n_sets)]
            started = time.perf_counter()
            inputs = [self.judge.inputs(self.case, s) for s in seeds]
            self.drawn_seconds += time.perf_counter() - started
            if self.current is not None:
                self.judge.drop(self.current[0])
            file, header, size = self.judge.write_sets(inputs)
            self.state.files.append(file)
            self.current = (file, header, size, inputs)
        return self.current

    def _stop(self, pairs: int, elapsed: float) -> str | None:
        """Why to stop after `pairs` process pairs, or None to add one more (the sequential rule, docs/review.md)."""
        m = self.m
        if pairs < m.min_processes:  # a floor: the caps below never leave fewer processes than this
            return None
        if self.busy is None and (cores := self._other_cores()) > self.judge.job.noise_limit_cores:
            self.busy = f"other processes kept {cores:.1f} cores busy"
        scale = BUSY_FACTOR if self.busy else 1
        cap = None
        if pairs >= m.max_processes * scale:
            cap = "max_processes"
        elif sum(len(p) for p in self.processes[self.labels[0]]) >= m.max_samples * scale:
            cap = "max_samples"
        elif elapsed >= m.max_seconds * scale:
            cap = "max_seconds"
        if len(self.labels) == 1:
            return "no_base"
        if (stats := self._paired()) is None:
            return cap
        precise = (stats.interval()[1] / stats.interval()[0] - 1.0) * 50.0 <= m.target_pct
        last = cap is not None or precise
        if decide(stats, self.case["max_regression_pct"], last=last) != "inconclusive" and not last:
            return "decided"
        return cap or ("precision" if precise else None)

    def _paired(self) -> Paired | None:
        """The paired statistic over the pairs with two or more blocks on both sides so far; None below two pairs."""
        head, base = self.labels.index("head"), self.labels.index("base")
        sides = [self.processes[label] for label in self.labels]
        full = [i for i, p in enumerate(zip(*sides, strict=True)) if min(map(len, p)) >= 2]
        if len(full) < 2:
            return None
        return paired(
            [sides[head][i] for i in full],
            [sides[base][i] for i in full],
            [self.firsts["base"][i] for i in full],
        )

    def _warm_up(self, label: str) -> float:
        times: list[float] = []
        wall, cpu = self.timed_wall[label], self.timed_cpu[label]
        started = time.perf_counter()
        while len(times) < self.m.warmup_calls or (time.perf_counter() - started) * 1e3 < self.m.warmup_ms:
            times.append(self._timed(label, 1))
        self.timed_wall[label], self.timed_cpu[label] = wall, cpu  # the accounting leaves warm-ups out
        spent = time.perf_counter() - started
        self.judge.phases["timed"] -= sum(times) / 1e3
        self.judge.phases.add("warmup", spent)
        times.sort()
        return times[len(times) // 2]

    def _expected(self, file: str, j: int, inputs: list[list[torch.Tensor]]) -> list[torch.Tensor]:
        """The reference's outputs for set `j` of the input file `file` (kept while the file is: blocks reuse it)."""
        if self.refs_of != file:
            self.refs_of, self.refs = file, {}
        if j not in self.refs:
            self.refs[j] = self.judge.expected(inputs[j])
        return self.refs[j]

    def _spot_check(self, label: str, refs: list[torch.Tensor], j: int) -> None:
        """Compare the output of call set `j` of the batch that just ran with the reference."""
        self.state.enter(label, "spot check")
        spot = self.state.spots.setdefault(label, Spot(label=label))
        try:
            check = compare(self.workers[label].outputs(j, refs, self.deadline), refs)
        except Raised as exc:
            check = Check(error=str(exc))
        spot.checked += 1
        spot.worst_abs_err = max(spot.worst_abs_err, check.max_abs_err or 0.0)
        if check.error or check.nan_inf or (check.max_abs_err or 0.0) > self.case["tolerance"]:
            spot.failed += 1
            spot.first_failure = spot.first_failure or _what_failed(check)

    def _account(self) -> None:
        """Flag a side whose sandbox burned CPU outside its timed calls, or more than one core inside them."""
        if self.gpu:
            return
        for label in self.labels:
            timed_cpu, timed_wall, untimed = self.timed_cpu[label], self.timed_wall[label], self.untimed_cpu[label]
            allowed = UNTIMED_CPU_SLACK_S + UNTIMED_CPU_PER_BLOCK_S * self.blocks + UNTIMED_CPU_SHARE * timed_wall
            allowed += UNTIMED_CPU_PER_MB_S * self.bytes_in / 1e6
            self.state.cpu[label] = CpuUse(
                timed_wall_s=round(timed_wall, 3), timed_cpu_s=round(timed_cpu, 3), untimed_cpu_s=round(untimed, 3)
            )
            if untimed > allowed:
                self.state.tampered = (
                    f"{label}: the sandbox used {untimed:.2f} s of CPU outside its timed calls "
                    f"(allowed {allowed:.2f} s): work done outside the timed region"
                )
            elif timed_cpu > TIMED_CPU_RATIO * timed_wall + TIMED_CPU_SLACK_S:
                self.state.tampered = (
                    f"{label}: {timed_cpu:.2f} s of CPU in {timed_wall:.2f} s of timed calls: more than one thread "
                    "(the CPU runner measures single-threaded kernels)"
                )


def block_order(index: int, labels: list[str]) -> list[str]:
    """A B, B A, A B, …: each side runs first as often as second, so drift hits both alike."""
    return labels if index % 2 == 0 else labels[::-1]


def _what_failed(check: Check) -> str:
    if check.error:
        return check.error
    if check.nan_inf:
        return "NaN/Inf where the reference has none"
    return f"max_abs_err {check.max_abs_err:.3g}"


def _gpu_busy_ms() -> float:
    """How long the judge's own tiny kernel waits: near zero on an idle GPU."""
    t0 = time.perf_counter()
    torch.zeros(1, device="cuda").add_(1)
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) * 1e3


def _sm_clock_mhz() -> float | None:
    try:
        return float(torch.cuda.clock_rate())
    except Exception:  # pynvml missing or NVML refused: record nothing rather than guess
        return None


def main(job_path: str, emit: Callable[[str], None] = print) -> None:
    job = JudgeJob.model_validate_json(Path(job_path).read_text())
    confine.dumpable(False)  # no process of the same user (a worker beside it, in a sandboxed judge) opens its memory
    # CPU cases: one thread, so the judge never competes with a timed worker; a GPU case's inputs are drawn
    # on every core (the worker's calls run on the GPU, and the judge is idle while they do).
    torch.set_num_threads((os.cpu_count() or 1) if any(c["device"] == "cuda" for c in job.cases) else 1)
    inside = Isolation(mode="none", reason="the judge itself runs in the sandbox (its reference is untrusted)")
    sandbox = Sandbox.detect() if job.isolate_workers else Sandbox(inside, None)
    try:
        judge = Judge(job, sandbox)
    except ReferenceFailed as exc:  # the reference does not import: every case says where, none runs
        for case in job.cases:
            run = CaseRun(status=CaseStatus.crashed, detail=str(exc), failed_label=REFERENCE_LABEL)
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
