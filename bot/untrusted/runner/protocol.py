"""Messages and tensor files between the judge and its workers (stdlib + torch only: the worker imports it too).

A message is a JSON object framed by its length (4 bytes, big endian), at most 1 MiB and 32 levels deep. Tensors
travel as one raw file per message, or stay in the worker's memory (a CPU batch's outputs, which the judge reads
from the frozen worker): the header lists each tensor's dtype, shape, offset (or address) and size; an absent
optional tensor (an argument passed as None) is the entry `{"none": true}` and has no bytes, allowed only where the
reader asks for it (the judge's inputs, never a worker's outputs). The reader trusts nothing: dtypes come from an
allow-list, shapes have at most 8 dimensions of bounded size, shape x itemsize must equal the size, sizes must add
up to the limit and the file, offsets must lie inside it, files must be regular files of the expected size.
"""

from __future__ import annotations

import json
import os
import stat
import struct
from typing import Any

MAX_MESSAGE = 1 << 20
MAX_DEPTH = 32  # nesting of a message (a frame of 200 KB of "[" would exhaust the reader's recursion)
MAX_TENSORS = 256  # entries in one header (an input file: up to 50 sets of 5 tensors)
MAX_DIMS = 8
MAX_ELEMENTS = 1 << 48  # of one tensor, and of any prefix of its shape (strides stay far inside int64)
ITEMSIZE = {
    "float64": 8, "float32": 4, "float16": 2, "bfloat16": 2, "int64": 8, "int32": 4, "int16": 2, "int8": 1,
    "uint8": 1, "bool": 1,
}  # fmt: skip
NONE = {"none": True}  # a header's entry for an absent optional tensor: the argument is passed as None


class ProtocolError(Exception):
    """The other side sent something that is not a well-formed message or tensor file."""


def send(fd: int, message: dict[str, Any]) -> None:
    data = json.dumps(message, separators=(",", ":")).encode()
    if len(data) > MAX_MESSAGE:
        raise ProtocolError(f"message of {len(data)} bytes is over {MAX_MESSAGE}")
    view = memoryview(struct.pack(">I", len(data)) + data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _read_exact(fd: int, n: int) -> bytes:
    chunks, left = [], n
    while left:
        chunk = os.read(fd, left)
        if not chunk:
            raise EOFError("the other side closed the channel")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


HEADER = 4  # bytes of a frame's length


def frame_size(header: bytes) -> int:
    """The length a frame's header announces (refused over MAX_MESSAGE)."""
    (size,) = struct.unpack(">I", header)
    if size > MAX_MESSAGE:
        raise ProtocolError(f"message of {size} bytes is over {MAX_MESSAGE}")
    return size


def decode(payload: bytes) -> dict[str, Any]:
    """A frame's payload as a message: a JSON object, or ProtocolError."""
    try:
        message = json.loads(payload)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ProtocolError(f"not JSON: {exc}") from exc
    except RecursionError:
        raise ProtocolError(f"not a message: nested deeper than {MAX_DEPTH} levels") from None
    if not isinstance(message, dict):
        raise ProtocolError("a message must be a JSON object")
    _check_depth(message)
    return message


def _check_depth(value: Any) -> None:
    """ProtocolError when containers nest deeper than MAX_DEPTH (iterative: no recursion of its own)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise ProtocolError(f"not a message: nested deeper than {MAX_DEPTH} levels")
        if isinstance(item, dict):
            stack += [(v, depth + 1) for v in item.values()]
        elif isinstance(item, list):
            stack += [(v, depth + 1) for v in item]


def recv(fd: int) -> dict[str, Any]:
    return decode(_read_exact(fd, frame_size(_read_exact(fd, HEADER))))


def write_tensors(path: str, tensors: list[Any]) -> list[dict[str, Any]]:
    """Write contiguous CPU copies of `tensors` into one file; return their header entries (at most MAX_TENSORS: the
    reader refuses more, so the writer says so first). A None (an optional tensor left out) is the entry NONE."""
    if len(tensors) > MAX_TENSORS:
        raise ProtocolError(f"{len(tensors)} tensors for one file, over {MAX_TENSORS}")
    entries: list[dict[str, Any]] = []
    offset = 0
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
    with os.fdopen(fd, "wb") as f:
        for t in tensors:
            if t is None:
                entries.append(dict(NONE))
                continue
            host = t.detach().to("cpu").contiguous()
            data = host.view(-1).view(torch_uint8()).numpy().tobytes() if host.numel() else b""
            f.write(data)
            entries.append(
                {
                    "dtype": str(host.dtype).removeprefix("torch."),
                    "shape": list(host.shape),
                    "device": t.device.type,
                    "offset": offset,
                    "nbytes": len(data),
                }
            )
            offset += len(data)
    return entries


def grouped(flat: list[Any], groups: list[list[Any]]) -> list[list[Any]]:
    """`flat` cut into consecutive runs as long as each of `groups` (an input file's tensors, set by set)."""
    out, i = [], 0
    for g in groups:
        out.append(flat[i : i + len(g)])
        i += len(g)
    return out


def torch_uint8() -> Any:
    import torch

    return torch.uint8


def _int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def check_entries(
    entries: Any, *, max_bytes: int, at: str = "offset", nones: bool = False
) -> list[tuple[str, list[int], int, int]]:
    """A tensor header, checked field by field: (dtype, shape, offset or address, nbytes) per tensor.

    `at` is "offset" (a tensor file: each tensor right after the one before, from 0) or "address" (the worker's
    memory: any address, each range inside the 64-bit space). The sizes add up to at most `max_bytes`. With `nones`
    an entry may be exactly NONE (an absent optional tensor: no bytes), left out of the result; without, it is
    refused like any malformed entry."""
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise ProtocolError("tensor header must be a list of objects")
    if len(entries) > MAX_TENSORS:
        raise ProtocolError(f"tensor header has {len(entries)} entries, over {MAX_TENSORS}")
    checked, end, total = [], 0, 0
    for i, e in enumerate(entries):
        if "none" in e:
            if not nones:
                raise ProtocolError(f"tensor {i}: none where a tensor must be")
            if e.keys() != NONE.keys() or e["none"] is not True:
                raise ProtocolError(f'tensor {i}: a none entry is exactly {{"none": true}}')
            continue
        dtype, shape, pos, nbytes = e.get("dtype"), e.get("shape"), e.get(at), e.get("nbytes")
        if not isinstance(dtype, str) or dtype not in ITEMSIZE:
            raise ProtocolError(f"tensor {i}: dtype {str(dtype)[:40]!r} is not allowed")
        if not isinstance(shape, list) or not all(_int(d) and d >= 0 for d in shape):
            raise ProtocolError(f"tensor {i}: bad shape {str(shape)[:80]}")
        if len(shape) > MAX_DIMS:
            raise ProtocolError(f"tensor {i}: shape has {len(shape)} dimensions, over {MAX_DIMS}")
        numel, span = 1, 1
        for d in shape:
            numel *= d
            span *= max(d, 1)
            if span > MAX_ELEMENTS:
                raise ProtocolError(f"tensor {i}: shape {str(shape)[:80]} is larger than any tensor can be")
        if not _int(pos) or not _int(nbytes) or pos < 0 or nbytes != numel * ITEMSIZE[dtype]:
            raise ProtocolError(f"tensor {i}: {at}/size do not match its dtype and shape")
        if at == "offset" and pos != end:
            raise ProtocolError(f"tensor {i}: offset {pos} is not where tensor {i - 1} ends ({end})")
        if pos + nbytes > (1 << 63):
            raise ProtocolError(f"tensor {i}: {at} and size run past the 64-bit space")
        total += nbytes
        if total > max_bytes:
            raise ProtocolError(f"tensors of {total} bytes or more, over the limit of {max_bytes}")
        end = pos + nbytes
        checked.append((dtype, list(shape), pos, nbytes))
    return checked


def tensor(raw: bytes, dtype: str, shape: list[int]) -> Any:
    """A CPU tensor of `dtype` and `shape` over a copy of `raw` (whose size the header check already matched)."""
    import torch

    tdtype = getattr(torch, dtype)
    if not raw:
        return torch.empty(shape, dtype=tdtype)
    return torch.frombuffer(bytearray(raw), dtype=torch.uint8).view(tdtype).reshape(shape)


def read_tensors(
    path: str, entries: Any, *, max_bytes: int, device: str | None = None, nones: bool = False
) -> list[Any]:
    """Read the tensors a header describes, checking every field; ProtocolError on anything off.

    `device` None puts each tensor where its entry says (cpu or cuda); otherwise every tensor goes there. `nones`:
    the header may hold NONE entries (the judge's input sets), each read as None in its place.
    """
    checked = check_entries(entries, max_bytes=max_bytes, nones=nones)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as exc:
        raise ProtocolError(f"cannot open the tensor file: {exc.strerror}") from exc
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise ProtocolError("the tensor file is not a regular file")
        if info.st_size > max_bytes:
            raise ProtocolError(f"the tensor file has {info.st_size} bytes, over the limit of {max_bytes}")
        blob = f.read(info.st_size + 1)
    if len(blob) != info.st_size:
        raise ProtocolError("the tensor file changed while it was read")
    end = checked[-1][2] + checked[-1][3] if checked else 0
    if end > len(blob):
        raise ProtocolError(f"tensor {len(checked) - 1} runs past the end of the file")
    if end != len(blob):
        raise ProtocolError("the tensor file has bytes no header entry describes")
    out: list[Any] = []
    tensors = iter(checked)
    for e in entries:
        if "none" in e:  # check_entries allowed it: exactly NONE, and only with `nones`
            out.append(None)
            continue
        dtype, shape, offset, nbytes = next(tensors)
        t = tensor(blob[offset : offset + nbytes], dtype, shape)
        where = device or (e.get("device") if e.get("device") in ("cpu", "cuda") else "cpu")
        out.append(t.to(where) if where != "cpu" else t)
    return out
