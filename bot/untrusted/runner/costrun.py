"""Inside the sandbox, under callgrind: each case's calls between two client requests, for the simulated cost.

Runs as `valgrind --tool=callgrind --instr-atstart=no … python costrun.py SPEC IN_DIR OUT_DIR` with `entry.py` and
`protocol.py` beside it (valgrind refuses a guest's seccomp filter, so unlike the worker this process is not
confined: see docs/security.md). Nothing here is trusted: the kernel shares this process. Per case it loads the
judge's input file, calls the entry once uninstrumented (lazy binding, first-touch pages), then `calls` times
between the shim's begin (start instrumentation, zero the counters) and end (dump the counters as `opgate:<index>`),
and writes the last output for the judge to compare with the reference. The judge reads the dumps and the outputs as
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
        inputs = protocol.read_tensors(
            path, case["tensors"], max_bytes=int(case["max_bytes"]), device="cpu", nones=True
        )
        args, kwargs = list(case.get("args") or []), dict(case.get("kwargs") or {})  # the case's scalars
        call, writes = case.get("call"), list(case.get("writes") or [])  # an entry that writes into its arguments
        if call is None:
            positional, warm, scalars = inputs, inputs, args
        else:  # the warm call writes copies: the counted calls start from the judge's poisoned output arguments
            copies = {k: inputs[k].clone() for k in writes}
            positional = [inputs[k] if kind == "t" else args[k] for kind, k in call]
            warm, scalars = [copies.get(k, inputs[k]) if kind == "t" else args[k] for kind, k in call], []
        entry(*warm, *scalars, **kwargs)  # warm: not counted
        shim.opgate_cost_begin()
        for _ in range(int(case["calls"])):
            out = entry(*positional, *scalars, **kwargs)
        shim.opgate_cost_end(f"opgate:{i}".encode())
        written = [inputs[k] for k in writes] if call is not None else _as_tensors(out)
        entries = protocol.write_tensors(os.path.join(out_dir, f"out-{i}.bin"), written)
        with open(os.path.join(out_dir, f"out-{i}.json"), "w") as f:
            json.dump(entries, f)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3])
