"""Messages and tensor files between the judge and its workers (stdlib + torch only: the worker imports it too).

A message is a JSON object framed by its length (4 bytes, big endian). Tensors travel as one raw file
per message: the header lists each tensor's dtype, shape, offset and size. The reader trusts nothing:
dtypes come from an allow-list, sizes must add up, files must be regular files of the expected size.
"""

from __future__ import annotations

import json
import os
import stat
import struct
from typing import Any

MAX_MESSAGE = 1 << 20
DTYPES = ("float64", "float32", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool")


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
    if not isinstance(message, dict):
        raise ProtocolError("a message must be a JSON object")
    return message


def recv(fd: int) -> dict[str, Any]:
    return decode(_read_exact(fd, frame_size(_read_exact(fd, HEADER))))


def write_tensors(path: str, tensors: list[Any]) -> list[dict[str, Any]]:
    """Write contiguous CPU copies of `tensors` into one file; return their header entries."""
    entries, offset = [], 0
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
    with os.fdopen(fd, "wb") as f:
        for t in tensors:
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


def torch_uint8() -> Any:
    import torch

    return torch.uint8


def read_tensors(path: str, entries: Any, *, max_bytes: int, device: str | None = None) -> list[Any]:
    """Read the tensors a header describes, checking every field; ProtocolError on anything off.

    `device` None puts each tensor where its entry says (cpu or cuda); otherwise every tensor goes there.
    """
    import torch

    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise ProtocolError("tensor header must be a list of objects")
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
    out: list[Any] = []
    end = 0
    for e in entries:
        dtype, shape, offset, nbytes = e.get("dtype"), e.get("shape"), e.get("offset"), e.get("nbytes")
        if dtype not in DTYPES:
            raise ProtocolError(f"dtype {dtype!r} is not allowed")
        if not isinstance(shape, list) or not all(
            isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape
        ):
            raise ProtocolError(f"bad shape {shape!r}")
        if len(shape) > 8:
            raise ProtocolError(f"shape {shape} has more than 8 dimensions")
        tdtype = getattr(torch, dtype)
        numel = 1
        for d in shape:
            numel *= d
        itemsize = torch.empty((), dtype=tdtype).element_size()
        if not isinstance(offset, int) or not isinstance(nbytes, int) or offset != end or nbytes != numel * itemsize:
            raise ProtocolError(f"tensor {len(out)}: offset/size do not match its dtype and shape")
        end = offset + nbytes
        if end > len(blob):
            raise ProtocolError(f"tensor {len(out)} runs past the end of the file")
        raw = bytearray(blob[offset:end])
        t = (
            torch.frombuffer(raw, dtype=torch.uint8).view(tdtype).reshape(shape)
            if nbytes
            else torch.empty(shape, dtype=tdtype)
        )
        where = device or (e.get("device") if e.get("device") in ("cpu", "cuda") else "cpu")
        out.append(t.to(where) if where != "cpu" else t)
    if end != len(blob):
        raise ProtocolError("the tensor file has bytes no header entry describes")
    return out
