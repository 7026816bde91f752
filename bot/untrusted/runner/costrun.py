"""Inside the sandbox, under callgrind: each case's calls between two client requests, for the simulated cost.

Runs as `valgrind --tool=callgrind --instr-atstart=no … python costrun.py SPEC IN_DIR OUT_DIR` with `entry.py` and
`protocol.py` beside it (valgrind refuses a guest's seccomp filter, so unlike the worker this process is not
confined: see docs/security.md). Nothing here is trusted: the kernel shares this process. Per case it loads the
judge's input file, calls the entry once uninstrumented (lazy binding, first-touch pages) on its first set, then once
on each further set between the shim's begin (start instrumentation, zero the counters) and end (dump the counters
as `opgate:<index>`): every counted call on inputs, outputs and scratch no call saw before. It writes the last
call's outputs for the judge to compare with the reference. The judge reads the dumps and the outputs as
data.
"""

from __future__ import annotations

import ctypes
import json
import os
import sys
from typing import Any

import protocol  # the files beside this one (bound into the sandbox with it)
from entry import load_entry


def _as_tensors(value: Any) -> list[Any]:
    import torch

    return [value] if isinstance(value, torch.Tensor) else list(value)


def main(spec_path: str, in_dir: str, out_dir: str) -> None:
    import torch

    torch.set_num_threads(1)
    with open(spec_path) as f:
        spec = json.load(f)
    shim = ctypes.CDLL(spec["shim"])
    shim.opgate_cost_end.argtypes = [ctypes.c_char_p]
    entry = load_entry(spec["so"], spec["module"], spec["entry"])
    for i, case in enumerate(spec["cases"]):
        path = os.path.join(in_dir, os.path.basename(str(case["file"])))
        grouped = case["sets"]  # the warm call's set, then one per counted call (each its own buffers)
        flat = protocol.read_tensors(
            path, [e for s in grouped for e in s], max_bytes=int(case["max_bytes"]), device="cpu", nones=True
        )
        sets = protocol.grouped(flat, grouped)
        args, kwargs = list(case.get("args") or []), dict(case.get("kwargs") or {})  # the case's scalars
        call, writes = case.get("call"), list(case.get("writes") or [])  # an entry that writes into its arguments
        scalars = args if call is None else []
        calls = [t if call is None else [t[k] if kind == "t" else args[k] for kind, k in call] for t in sets]
        entry(*calls[0], *scalars, **kwargs)  # warm: not counted
        shim.opgate_cost_begin()
        for positional in calls[1:]:
            out = entry(*positional, *scalars, **kwargs)
        shim.opgate_cost_end(f"opgate:{i}".encode())
        written = [sets[-1][k] for k in writes] if call is not None else _as_tensors(out)
        entries = protocol.write_tensors(os.path.join(out_dir, f"out-{i}.bin"), written)
        with open(os.path.join(out_dir, f"out-{i}.json"), "w") as f:
            json.dump(entries, f)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3])
