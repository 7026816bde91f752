"""A side's sandboxed processes, as the judge drives them: the zygote (one per side) and the worker it forks.

A `Zygote` (base or head) runs `worker.py` in the sandbox with the files it imports beside it (WORKER_FILES), imports
torch once and forks a fresh `Worker` per measurement process, which can start no process of its own
(runner/confine.py). The judge talks to both over two pipes (runner/protocol.py): it hands a worker input files and
asks for outputs; on the CPU it reads them from the worker's memory while the sandbox is frozen (runner/freeze.py).
"""

from __future__ import annotations

import math
import os
import select
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import torch

from bot.models.judging import JudgeJob
from bot.phases import Phases
from bot.text.safe import log_safe
from bot.untrusted.runner import confine, protocol
from bot.untrusted.runner.buffers import Layout, as_named, named_header
from bot.untrusted.runner.freeze import Unfrozen, frozen, host_pid, read_outputs, seccomp_mode
from bot.untrusted.runner.spawn import EXT, IN, OUT, RUN
from bot.untrusted.sandbox import Bind, Sandbox, Spec, kill, tree_cpu_seconds

WORKER_FILES = ("worker.py", "entry.py", "protocol.py", "confine.py")
LOG_KEEP = 8192  # bytes of a side's output kept for the report
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
        self.starting = False  # launched, its "zygote" line not read yet (`ready`)
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
        self.starting = True

    def ready(self, deadline: float) -> None:
        self.expect("zygote", deadline)
        self.starting = False

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
        self.starting = False

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
        self,
        side: Zygote,
        device: str,
        placement_seed: int,
        deadline: float,
        scalars: Scalars | None = None,
        layout: Layout | None = None,
    ) -> None:
        self.side, self.scalars, self.layout = side, scalars or ([], {}), layout
        self.addresses: Any = None  # CPU, output arguments: where each loaded set's outputs lie, reported at `loaded`
        self.scratch_at: Any = None  # CPU: where each loaded set's scratch buffers lie, reported at `loaded`
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
                **(self.layout.message() if self.layout is not None else {}),
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
            loaded = self.side.expect("loaded", deadline)
            self.addresses, self.scratch_at = loaded.get("written"), loaded.get("scratch")

    def go(self, calls: int, deadline: float) -> None:
        self.side.send({"op": "go", "calls": calls})
        self.done = self.side.expect("done", deadline)
        self.captured = {}

    def capture(self, j: int, refs: list[torch.Tensor]) -> None:
        """CPU: freeze the side's sandbox and copy set `j`'s outputs out of the worker's memory, as `done` left them."""
        where = self.done.get("outputs")
        header = where[j] if isinstance(where, list) and 0 <= j < len(where) else None
        if self.layout is not None and self.layout.writes:
            # The buffers the judge named: its own dtypes and shapes at the addresses the worker reported when the
            # set was loaded, before any call ran (what `done` says about outputs is not read).
            try:
                header = named_header(self.layout, self.addresses, j)
            except ValueError as exc:
                raise WorkerGone(f"protocol broken: {exc}") from exc
        if header is None:
            raise WorkerGone(f"protocol broken: no outputs of input set {j} in the reply to the batch")
        self.captured[j] = self._read_frozen({j: header}, _output_limit(refs))[j]

    def _read_frozen(self, headers: dict[int, Any], max_bytes: int) -> dict[int, list[torch.Tensor]]:
        """Per set, the tensors its header places in the worker's memory, read with the side's sandbox frozen; a bad
        header or range, or a sandbox that would not freeze, is the worker's (WorkerGone)."""
        proc = self.side.proc
        assert proc is not None
        try:
            with self.side.phases.timed("capture"), frozen(proc.pid):
                return {j: read_outputs(self.pid, header, max_bytes=max_bytes) for j, header in headers.items()}
        except protocol.ProtocolError as exc:
            raise WorkerGone(f"protocol broken: {exc}") from exc
        except Unfrozen as exc:
            raise WorkerGone(str(exc)) from exc

    def scratch(self, sets: list[int], deadline: float) -> dict[int, list[torch.Tensor]]:
        """The scratch buffers of the loaded sets `sets` as the last batch left them: on the CPU read from the
        worker's memory with the sandbox frozen, at the addresses it reported when the sets were loaded (before any
        call ran); on a GPU fetched as a file, one set at a time."""
        assert self.layout is not None
        if self.gpu:
            limit = sum(math.prod(b["shape"]) * 8 for b in self.layout.scratch) + 4096
            with self.side.phases.timed("fetch"):
                fetched = {j: self._fetch(j, limit, deadline, scratch=True) for j in sets}
            for got in fetched.values():
                if (why := as_named(self.layout, got, role="scratch")) is not None:
                    raise Raised(f"bad scratch: {why}")
            return fetched
        try:
            headers = {j: named_header(self.layout, self.scratch_at, j, role="scratch") for j in sets}
        except ValueError as exc:
            raise WorkerGone(f"protocol broken: {exc}") from exc
        return self._read_frozen(headers, sum(h["nbytes"] for header in headers.values() for h in header) + 4096)

    def outputs(self, j: int, refs: list[torch.Tensor], deadline: float) -> list[torch.Tensor]:
        """Set `j`'s outputs of the last batch: captured at `done` on the CPU, fetched as a file on a GPU."""
        if self.gpu:
            outs = self.fetch(j, refs, deadline)
            if self.layout is not None and (why := as_named(self.layout, outs)) is not None:
                raise Raised(f"bad output: {why}")
            return outs
        if j not in self.captured:
            self.capture(j, refs)
        return self.captured[j]

    def fetch(self, j: int, refs: list[torch.Tensor], deadline: float) -> list[torch.Tensor]:
        with self.side.phases.timed("fetch"):
            return self._fetch(j, _output_limit(refs), deadline)

    def _fetch(self, j: int, max_bytes: int, deadline: float, *, scratch: bool = False) -> list[torch.Tensor]:
        """Set `j`'s outputs (or its scratch buffers) as the worker writes them into a file, read back bounded."""
        what = "scratch" if scratch else "output"
        self.fetches += 1
        self.side.send({"op": "fetch", "set": j, "seq": self.fetches, **({"scratch": True} if scratch else {})})
        reply = self.side.expect("fetched", deadline)
        name = f"out-{self.fetches}.bin"
        if reply.get("file") != name:
            raise WorkerGone(f"protocol broken: {'a scratch' if scratch else 'an output'} file it was not asked for")
        try:
            outs = protocol.read_tensors(
                str(self.side.out_dir / name), reply.get("tensors"), max_bytes=max_bytes, device="cpu"
            )
        except protocol.ProtocolError as exc:
            raise Raised(f"bad {what}: {exc}") from exc
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
