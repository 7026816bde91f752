"""The sandboxed side of a case: a zygote that imports torch once and forks one fresh worker per request.

Runs as `python worker.py CMD_FD REPLY_FD IN_DIR OUT_DIR` inside the sandbox with `protocol.py` beside
it, reading commands on one inherited pipe and answering on the other. Nothing here is trusted: the
kernel it loads shares this process and may rewrite any of it. It is given inputs (files the judge
wrote) and hands back outputs (files the judge checks); the judge owns the seed, the reference, the
comparison and the clock.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import mmap
import os
import random
import sys
import traceback
from typing import Any

import protocol  # the file beside this one (bound into the sandbox with it)

CMD_FD, REPLY_FD, IN_DIR, OUT_DIR = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
TORCH_OPS = "torch.ops."  # an entry naming a registered op (the worker imports nothing of opgate)


def _load_extension(path: str, module: str) -> Any:
    loader = importlib.machinery.ExtensionFileLoader(module, path)
    spec = importlib.util.spec_from_file_location(module, path, loader=loader)
    assert spec is not None
    ext = importlib.util.module_from_spec(spec)
    loader.exec_module(ext)
    return ext


def _load_entry(path: str, module: str, entry: str) -> Any:
    """The callable a case calls: `torch.ops.NS.OP[.OVERLOAD]` from the library (its TORCH_LIBRARY registrations),
    or a function of the built pybind module."""
    import torch

    if entry.startswith(TORCH_OPS):
        torch.ops.load_library(path)
        target: Any = torch.ops
        for part in entry.removeprefix(TORCH_OPS).split("."):
            try:
                target = getattr(target, part)
            except (AttributeError, RuntimeError):
                raise AttributeError(f"the built library registers no op {entry} (entry in kernel.toml)") from None
        return target
    try:
        ext = _load_extension(path, module)
    except ImportError as exc:
        if f"PyInit_{module}" not in str(exc):
            raise
        raise ImportError(
            f"the built library is no Python module {module} (it defines no PyInit_{module}); a TORCH_LIBRARY op "
            'is called as entry = "torch.ops.NAMESPACE.OP" in kernel.toml'
        ) from None
    if not hasattr(ext, entry):
        raise AttributeError(f"the built module has no function {entry!r} (entry in kernel.toml)")
    return getattr(ext, entry)


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


def worker(request: dict[str, Any]) -> None:
    """One fresh worker process: load the extension, then serve load / go / fetch until exit."""
    import torch

    keep = _placement(int(request.get("placement_seed", 0)))
    device = request["device"]
    torch.set_num_threads(1)
    if device == "cuda":
        torch.cuda.init()
    entry = _load_entry(request["so"], request["module"], request["entry"])
    args, kwargs = list(request.get("args") or []), dict(request.get("kwargs") or {})  # the case's scalars
    protocol.send(REPLY_FD, {"event": "ready", "pid": os.getpid()})
    sets: list[list[Any]] = []
    outputs: dict[int, list[Any]] = {}
    while True:
        msg = protocol.recv(CMD_FD)
        op = msg.get("op")
        if op == "load":
            entries = msg["sets"]
            flat = protocol.read_tensors(
                os.path.join(IN_DIR, os.path.basename(str(msg["file"]))),
                [e for s in entries for e in s],
                max_bytes=msg["max_bytes"],
            )
            sets, outputs, i = [], {}, 0
            for s in entries:
                sets.append(flat[i : i + len(s)])
                i += len(s)
            protocol.send(REPLY_FD, {"event": "loaded", "sets": len(sets)})
        elif op == "go":
            try:
                for call in range(int(msg["calls"])):
                    j = call % len(sets)
                    outputs[j] = _as_tensors(entry(*sets[j], *args, **kwargs))
                if device == "cuda":
                    torch.cuda.synchronize()
            except Exception as exc:  # the kernel raised: the judge decides what that means
                protocol.send(REPLY_FD, {"event": "raised", "error": f"{type(exc).__name__}: {exc}"[:2000]})
                continue
            protocol.send(REPLY_FD, {"event": "done"})
        elif op == "fetch":
            j = int(msg["set"])
            name = f"out-{int(msg['seq'])}.bin"
            entries = protocol.write_tensors(os.path.join(OUT_DIR, name), outputs[j])
            protocol.send(REPLY_FD, {"event": "fetched", "file": name, "tensors": entries})
        elif op == "exit":
            del keep
            os._exit(0)
        else:
            protocol.send(REPLY_FD, {"event": "error", "error": f"unknown op {op!r}"})


def zygote() -> None:
    """Import torch once; fork a fresh worker for every `spawn`, report how it ended, repeat."""
    import torch

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
