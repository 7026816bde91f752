"""A CPU batch's outputs, committed: the side's whole sandbox frozen at `done`, its outputs read by the judge itself.

When a worker reports a batch done it names, for every input set, where that set's outputs lie in its own
memory. Before anything else the judge stops every process of the side's sandbox (SIGSTOP), reads the set
it checks straight from the worker's memory (/proc/PID/mem: it is the sandbox's ancestor and owns its user
namespace), and lets the sandbox go on (SIGCONT). So what the judge compares is what the batch left behind
when it said `done`: a kernel that returns at once and computes later (when a file is fetched, in a thread,
in a child) has nothing there to show.

Once kill(SIGSTOP) has returned, every thread of the process has the stop pending: a thread that sleeps,
waits for a CPU or runs in the kernel takes it before it next returns to user mode, and one running user
code on another CPU is interrupted by the kernel at once. So no user code of the sandbox runs from then
on; the judge waits until every thread reads as stopped, or FREEZE_GRACE_S, whichever comes first (on a
loaded machine a woken thread may wait milliseconds for a CPU just to enter the stopped state).
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any

from bot.untrusted.runner import protocol
from bot.untrusted.sandbox import tree_pids

FREEZE_GRACE_S = 0.0005  # the longest wait for threads (with the stop pending) to read as stopped
STOPPED = frozenset("TtZX")  # /proc state letters of a task that runs no code


class Unfrozen(Exception):
    """A process of the sandbox could not be stopped in time (or its outputs could not be read)."""


def host_pid(root_pid: int, ns_pid: int) -> int | None:
    """The host pid of the process below `root_pid` whose own pid namespace knows it as `ns_pid` (NSpid's last)."""
    for pid in tree_pids(root_pid):
        try:
            with open(f"/proc/{pid}/status") as f:
                line = next((x for x in f if x.startswith("NSpid:")), "")
        except OSError:
            continue
        ids = line.split()[1:]
        if ids and ids[-1] == str(ns_pid):
            return pid
    return None


def seccomp_mode(pid: int) -> int | None:
    """The `Seccomp:` field of the process's status (2: a filter is on), from the kernel, not from the worker."""
    try:
        with open(f"/proc/{pid}/status") as f:
            line = next((x for x in f if x.startswith("Seccomp:")), "")
    except OSError:
        return None
    value = line.split()[1:]
    return int(value[0]) if value and value[0].isdigit() else None


def _all_stopped(pids: list[int]) -> bool:
    for pid in pids:
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue  # gone: it runs nothing either
        for tid in tids:
            try:
                with open(f"/proc/{pid}/task/{tid}/stat") as f:
                    text = f.read()
            except OSError:
                continue
            state = text[text.rfind(")") + 2 : text.rfind(")") + 3]
            if state not in STOPPED:
                return False
    return True


@contextmanager
def frozen(root_pid: int, grace_s: float = FREEZE_GRACE_S) -> Iterator[list[int]]:
    """Every process of the tree under `root_pid` stopped (SIGSTOP) inside the block, continued after it."""
    stopped: list[int] = []
    try:
        for _ in range(4):  # until no new process appears (none can: the workers' filter refuses them)
            new = [pid for pid in tree_pids(root_pid) if pid not in stopped]
            if not new:
                break
            for pid in new:
                try:
                    os.kill(pid, signal.SIGSTOP)
                except ProcessLookupError:
                    continue
                except OSError as exc:
                    raise Unfrozen(f"cannot stop the sandbox: {exc.strerror}") from exc
                stopped.append(pid)
        until = time.monotonic() + grace_s
        while not _all_stopped(stopped) and time.monotonic() < until:
            pass  # a busy wait: yielding the CPU here costs a whole scheduling round on a loaded machine
        yield stopped
    finally:
        for pid in reversed(stopped):
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)


def read_outputs(pid: int, header: Any, *, max_bytes: int) -> list[Any]:
    """The tensors `header` places in the (frozen) process's memory; ProtocolError for a bad header or range."""
    checked = protocol.check_entries(header, max_bytes=max_bytes, at="address")
    try:
        fd = os.open(f"/proc/{pid}/mem", os.O_RDONLY)
    except OSError as exc:
        raise Unfrozen(f"cannot read the worker's memory: {exc.strerror}") from exc
    try:
        out = []
        for i, (dtype, shape, address, nbytes) in enumerate(checked):
            chunks, done = [], 0
            while done < nbytes:
                try:
                    chunk = os.pread(fd, min(nbytes - done, 1 << 24), address + done)
                except OSError as exc:
                    raise protocol.ProtocolError(f"tensor {i}: not in the worker's memory ({exc.strerror})") from exc
                if not chunk:
                    raise protocol.ProtocolError(f"tensor {i}: not in the worker's memory")
                chunks.append(chunk)
                done += len(chunk)
            out.append(protocol.tensor(b"".join(chunks), dtype, shape))
        return out
    finally:
        os.close(fd)
