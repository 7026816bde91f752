"""The sandboxed side of a case: a zygote that imports torch once and forks one fresh worker per request.

Runs as `python worker.py CMD_FD REPLY_FD IN_DIR OUT_DIR` inside the sandbox with `entry.py`, `protocol.py`
and `confine.py` beside it, reading commands on one inherited pipe and answering on the other. Nothing here
is trusted once the extension is loaded: the kernel shares the worker's process and may rewrite any of
it. So the extension is loaded only in the forked worker, after its seccomp filter is on (no process can
be started from then on, module-init code included), never in the zygote, which is undumpable (a worker
cannot open its memory). A worker is given inputs (files the judge wrote); on the CPU its `done` names
where each set's outputs lie in its memory, which the judge reads itself with the sandbox frozen; on a
GPU the judge fetches them as files. The judge owns the seed, the reference, the comparison and the clock.
"""

from __future__ import annotations

import mmap
import os
import random
import sys
import traceback
from typing import Any

import confine  # the files beside this one (bound into the sandbox with it)
import protocol
from entry import load_entry

CMD_FD, REPLY_FD, IN_DIR, OUT_DIR = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]


def _as_tensors(value: Any) -> list[Any]:
    import torch

    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)) and value and all(isinstance(v, torch.Tensor) for v in value):
        return list(value)
    raise TypeError(f"expected a tensor or a tuple of tensors, got {type(value).__name__}")


def _placement(seed: int) -> list[Any]:
    """Shift where this fork maps the extension and allocates its data, as a fresh process would."""
    rng = random.Random(seed)
    keep: list[Any] = [mmap.mmap(-1, rng.randrange(1, 257) * mmap.PAGESIZE)]
    keep.append(bytearray(rng.randrange(64, 1 << 16)))
    return keep


def _where(outputs: dict[int, list[Any]], n_sets: int) -> list[Any]:
    """Each set's outputs as a header of addresses in this process (contiguous CPU tensors), None for a set not run."""
    return [
        [
            {
                "dtype": str(t.dtype).removeprefix("torch."),
                "shape": list(t.shape),
                "address": t.data_ptr(),
                "nbytes": t.numel() * t.element_size(),
            }
            for t in outputs[j]
        ]
        if j in outputs
        else None
        for j in range(n_sets)
    ]


def worker(request: dict[str, Any]) -> None:
    """One fresh worker process: confine it, load the extension, then serve load / go / fetch until exit."""
    import torch

    confine.dumpable(True)  # the judge reads this process's memory (the zygote stays undumpable)
    keep = _placement(int(request.get("placement_seed", 0)))
    device = request["device"]
    torch.set_num_threads(1)
    if device == "cuda":
        torch.cuda.init()
    try:
        confine.install()  # from here on no process can start: the extension's own init runs under the filter
        unconfined = None
    except OSError as exc:
        unconfined = str(exc)
    # The worker's own functions, bound before any kernel code is imported: a kernel that replaces protocol's or this
    # module's names at import (to work while inputs load, where no clock runs) replaces what nothing here calls.
    # What they call in turn (torch) it can still replace: the sampler counts a load's CPU as the block's (sampler.py).
    recv, send = protocol.recv, protocol.send
    read_tensors, write_tensors, group = protocol.read_tensors, protocol.write_tensors, protocol.grouped
    as_tensors, where_in_memory = _as_tensors, _where
    entry = load_entry(request["so"], request["module"], request["entry"])
    args, kwargs = list(request.get("args") or []), dict(request.get("kwargs") or {})  # the case's scalars
    call, writes = request.get("call"), list(request.get("writes") or [])  # an entry that writes into arguments
    scratch = list(request.get("scratch") or [])  # and the scratch buffers it is given (zeroed, to be left zeroed)
    sets: list[list[Any]] = []
    named: list[list[Any]] = []  # per set, its output arguments as loaded: other tensors over the same memory

    def run(j: int) -> list[Any]:
        """One call on set `j`; its outputs: what the entry returned, or (with `call`) the output buffers it was given
        (a kernel that points its argument at other memory, or returns a tensor, does not change which)."""
        tensors = sets[j]
        if call is None:
            return as_tensors(entry(*tensors, *args, **kwargs))
        entry(*[tensors[i] if kind == "t" else args[i] for kind, i in call], **kwargs)
        return named[j]

    send(REPLY_FD, {"event": "ready", "pid": os.getpid(), "unconfined": unconfined})
    outputs: dict[int, list[Any]] = {}
    while True:
        msg = recv(CMD_FD)
        op = msg.get("op")
        if op == "load":
            entries = msg["sets"]
            flat = read_tensors(
                os.path.join(IN_DIR, os.path.basename(str(msg["file"]))),
                [e for s in entries for e in s],
                max_bytes=msg["max_bytes"],
                nones=True,  # an optional tensor the case leaves out: passed to the entry as None
            )
            sets, outputs = group(flat, entries), {}
            # Output arguments: where each set's buffers lie, before any call (on the CPU the judge reads them there)
            named = [[s[i].view(s[i].shape) for i in writes] for s in sets]
            addresses = {}
            if writes and device != "cuda":
                addresses["written"] = where_in_memory(dict(enumerate(named)), len(sets))
            if scratch and device != "cuda":  # where each set's scratch lies: the judge reads it after the block
                held = {j: [s[i] for i in scratch] for j, s in enumerate(sets)}
                addresses["scratch"] = where_in_memory(held, len(sets))
            send(REPLY_FD, {"event": "loaded", "sets": len(sets), **addresses})
        elif op == "go":
            try:
                for n in range(int(msg["calls"])):
                    j = n % len(sets)
                    outputs[j] = run(j)
                if device == "cuda":
                    torch.cuda.synchronize()
                else:  # committed: where the judge reads them, in this process's memory, before the clock stops
                    outputs = {j: [t.contiguous() for t in ts] for j, ts in outputs.items()}
            except Exception as exc:  # the kernel raised: the judge decides what that means
                send(REPLY_FD, {"event": "raised", "error": f"{type(exc).__name__}: {exc}"[:2000]})
                continue
            where = {} if device == "cuda" else {"outputs": where_in_memory(outputs, len(sets))}
            send(REPLY_FD, {"event": "done", **where})
        elif op == "fetch":  # a GPU set's outputs (or, with "scratch", its scratch buffers) as a file
            j = int(msg["set"])
            name = f"out-{int(msg['seq'])}.bin"
            fetched = [sets[j][i] for i in scratch] if msg.get("scratch") else outputs[j]
            entries = write_tensors(os.path.join(OUT_DIR, name), fetched)
            send(REPLY_FD, {"event": "fetched", "file": name, "tensors": entries})
        elif op == "exit":
            del keep
            os._exit(0)
        else:
            send(REPLY_FD, {"event": "error", "error": f"unknown op {op!r}"})


def zygote() -> None:
    """Import torch once; fork a fresh worker for every `spawn`, report how it ended, repeat."""
    import torch

    confine.dumpable(False)  # its forked workers (kernel code) cannot open this process's memory
    torch.set_num_threads(1)
    protocol.send(REPLY_FD, {"event": "zygote", "torch": torch.__version__})
    while True:
        try:
            msg = protocol.recv(CMD_FD)
        except EOFError:
            return
        if msg.get("op") != "spawn":
            return
        pid = os.fork()
        if pid == 0:
            try:
                worker(msg)
            except BaseException:  # a worker must never fall back into the zygote's loop
                traceback.print_exc()
                sys.stderr.flush()
                os._exit(70)
            os._exit(0)
        _, status = os.waitpid(pid, 0)
        code = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
        protocol.send(REPLY_FD, {"event": "exited", "pid": pid, "status": code})


if __name__ == "__main__":
    zygote()
