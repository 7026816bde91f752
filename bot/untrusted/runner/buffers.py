"""The arguments the judge allocates for an entry that writes into them: the call's layout, poisoned outputs, scratch.

kernel.toml's `[build.DEVICE] arguments` lists the entry's positional arguments; `outputs` and `scratch` name some of
them, and `[buffers.NAME]` gives each its shape over the case's shape (resolved per case: `case["buffers"]`).
The judge appends, to every input set it writes, fresh buffers: outputs filled with a poison (NaN for floats, bytes of
0x5A for integers, True for bool) so an element the kernel never writes stays visible, scratch zeroed. Every timed
call has a set of its own (runner/sampler.py), so every call starts from poisoned outputs and zeroed scratch, and
scratch a call leaves non-zero is seen (`left_nonzero`). The worker calls
the entry with them in `arguments`' order and hands back the output arguments; the judge reads the buffers it named.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

POISON_BYTE = 0x5A  # every byte of an integer output before the call
OUTPUT = "output"


@dataclass(frozen=True)
class Layout:
    """How one case calls the entry: each positional argument a tensor of the set ("t", index: make_inputs' tensors,
    then the buffers) or one of `args` ("a", index); `writes`: the output buffers' places in the set."""

    call: list[tuple[str, int]]
    writes: list[int]
    inputs: list[str]  # the names `arguments` gives make_inputs' tensors, in order
    buffers: list[dict[str, Any]]  # name, role, shape, dtype: outputs first, then scratch

    @property
    def outputs(self) -> list[dict[str, Any]]:
        return [b for b in self.buffers if b["role"] == OUTPUT]

    @property
    def scratch(self) -> list[dict[str, Any]]:
        return [b for b in self.buffers if b["role"] != OUTPUT]

    @property
    def scratch_places(self) -> list[int]:
        """The scratch buffers' places in a set (after make_inputs' tensors and the outputs)."""
        return [len(self.inputs) + i for i, b in enumerate(self.buffers) if b["role"] != OUTPUT]

    def message(self) -> dict[str, Any]:
        """What the worker is told at spawn (JSON)."""
        return {"call": [list(c) for c in self.call], "writes": self.writes, "scratch": self.scratch_places}


def layout(arguments: list[str], positional: list[str], buffers: list[dict[str, Any]]) -> Layout | None:
    """The case's call layout; None when kernel.toml names no `arguments` (then the call is entry(*inputs, *args))."""
    if not arguments:
        return None
    by_name = {b["name"]: i for i, b in enumerate(buffers)}
    inputs = [n for n in arguments if n not in by_name and n not in positional]
    call: list[tuple[str, int]] = []
    next_input = 0
    for name in arguments:
        if name in by_name:
            call.append(("t", len(inputs) + by_name[name]))
        elif name in positional:
            call.append(("a", positional.index(name)))
        else:
            call.append(("t", next_input))
            next_input += 1
    writes = [len(inputs) + i for i, b in enumerate(buffers) if b["role"] == OUTPUT]
    return Layout(call=call, writes=writes, inputs=inputs, buffers=buffers)


def poison(dtype: torch.dtype) -> float | int | bool:
    """The value an output holds before the call: NaN, or the integer whose every byte is 0x5A."""
    if dtype.is_floating_point:
        return math.nan
    if dtype == torch.bool:
        return True
    size = torch.empty((), dtype=dtype).element_size()
    value = int.from_bytes(bytes([POISON_BYTE]) * size, "little")
    return value - (1 << (8 * size)) if dtype != torch.uint8 and value >= 1 << (8 * size - 1) else value


def allocate(lay: Layout, device: str) -> list[torch.Tensor]:
    """Fresh buffers for one input set: outputs poisoned, scratch zeroed, on the case's device."""
    made = []
    for b in lay.buffers:
        dtype = getattr(torch, b["dtype"])
        if b["role"] == OUTPUT:
            made.append(torch.full(b["shape"], poison(dtype), dtype=dtype, device=device))
        else:
            made.append(torch.zeros(b["shape"], dtype=dtype, device=device))
    return made


def unwritten(got: float | None, dtype: str) -> bool:
    """Whether an output element still holds the poison (NaN for floats; for integers, their poison value)."""
    if got is None:
        return False
    tdtype = getattr(torch, dtype)
    if tdtype.is_floating_point:
        return math.isnan(got)
    return got == float(poison(tdtype))


def input_mismatch(lay: Layout, count: int) -> str | None:
    """Why make_inputs' tensors do not fit `arguments`, or None."""
    if count == len(lay.inputs):
        return None
    return (
        f"returned {count} tensor(s), but kernel.toml's arguments name {len(lay.inputs)} input(s) "
        f"({', '.join(lay.inputs) or 'none'}): the rest are outputs, scratch or args"
    )


def reference_mismatch(lay: Layout, refs: list[torch.Tensor]) -> str | None:
    """Why the reference's outputs do not match the output arguments kernel.toml names, or None."""
    outs = lay.outputs
    if len(refs) != len(outs):
        names = ", ".join(b["name"] for b in outs)
        return f"returned {len(refs)} tensor(s), but kernel.toml names {len(outs)} output argument(s) ({names})"
    for b, r in zip(outs, refs, strict=True):
        if list(r.shape) != list(b["shape"]):
            return f"returned {b['name']} of shape {list(r.shape)}, but [buffers.{b['name']}] gives {b['shape']}"
    return None


def named_header(lay: Layout, addresses: Any, j: int, role: str = OUTPUT) -> list[dict[str, Any]]:
    """Set `j`'s output arguments (or, with another `role`, its scratch) as a memory header: dtype, shape and size the
    judge named, each address the one the worker reported when it loaded the set (before any call ran); ValueError
    when it reported none."""
    what = "output argument" if role == OUTPUT else "scratch"
    if not isinstance(addresses, list) or not 0 <= j < len(addresses) or not isinstance(addresses[j], list):
        raise ValueError(f"no addresses of input set {j}'s {what} buffers in the reply to the load")
    at = addresses[j]
    outs = lay.outputs if role == OUTPUT else lay.scratch
    if len(at) != len(outs):
        raise ValueError(f"{len(at)} {what} address(es) for input set {j}, {len(outs)} named")
    header = []
    for b, e in zip(outs, at, strict=True):
        address = e.get("address") if isinstance(e, dict) else None
        itemsize = torch.empty((), dtype=getattr(torch, b["dtype"])).element_size()
        header.append(
            {"dtype": b["dtype"], "shape": b["shape"], "address": address, "nbytes": math.prod(b["shape"]) * itemsize}
        )
    return header


def as_named(lay: Layout, outs: list[torch.Tensor], role: str = OUTPUT) -> str | None:
    """Why fetched outputs (or, with another `role`, scratch) are not the buffers the judge named (dtype, shape), or
    None."""
    named, what = (lay.outputs, "output argument") if role == OUTPUT else (lay.scratch, "scratch buffer")
    if len(outs) != len(named):
        return f"handed back {len(outs)} {what}(s), {len(named)} named"
    for b, o in zip(named, outs, strict=True):
        dtype = str(o.dtype).removeprefix("torch.")
        if dtype != b["dtype"] or list(o.shape) != list(b["shape"]):
            return f"handed back {b['name']} as {dtype} {list(o.shape)}; the judge allocated {b['dtype']} {b['shape']}"
    return None


def left_nonzero(lay: Layout, scratch: list[torch.Tensor]) -> str | None:
    """Where a set's scratch was left non-zero after its call ("workspace[0] = 3786": the first such element), or
    None when every scratch buffer is all zero again."""
    for b, t in zip(lay.scratch, scratch, strict=True):
        flat = t.reshape(-1)
        nonzero = torch.nonzero(flat != 0)
        if nonzero.numel():
            i = int(nonzero[0, 0])
            index = [int(x) for x in torch.unravel_index(torch.tensor(i), tuple(t.shape))] if t.dim() else []
            value = flat[i].item()
            shown = f"{value:g}" if isinstance(value, float) else str(value)
            return f"{b['name']}[{', '.join(map(str, index))}] = {shown}"
    return None
