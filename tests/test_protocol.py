"""The judge's channel to its worker (bot/untrusted/runner/protocol.py): framed JSON messages over a pipe and
tensors in a file, each read back checked; what the fuzz tests throw at it is in tests/test_fuzz.py."""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest
import torch

from bot.untrusted.runner import protocol
from bot.untrusted.runner.protocol import ProtocolError


def test_a_message_sent_down_a_pipe_is_received_as_sent():
    r, w = os.pipe()
    try:
        protocol.send(w, {"op": "run", "case": "square_512", "shape": [4, 8]})
        protocol.send(w, {"op": "stop"})
        assert protocol.recv(r) == {"op": "run", "case": "square_512", "shape": [4, 8]}
        assert protocol.recv(r) == {"op": "stop"}
        os.close(w)
        w = -1
        with pytest.raises(EOFError):
            protocol.recv(r)
    finally:
        os.close(r)
        if w >= 0:
            os.close(w)


def test_a_frame_over_the_limit_not_json_not_an_object_or_nested_too_deep_is_refused():
    with pytest.raises(ProtocolError, match="over"):
        protocol.frame_size(struct.pack(">I", protocol.MAX_MESSAGE + 1))
    assert protocol.frame_size(struct.pack(">I", 12)) == 12
    with pytest.raises(ProtocolError, match="not JSON"):
        protocol.decode(b"{nope")
    with pytest.raises(ProtocolError, match="a JSON object"):
        protocol.decode(b"[1, 2]")
    deep = b'{"a": ' + b"[" * protocol.MAX_DEPTH + b"]" * protocol.MAX_DEPTH + b"}"
    with pytest.raises(ProtocolError, match="nested deeper"):
        protocol.decode(deep)
    assert protocol.decode(b'{"a": [[1]]}') == {"a": [[1]]}


def test_tensors_written_to_a_file_are_read_back_equal_with_their_dtypes_and_shapes(tmp_path: Path):
    path = str(tmp_path / "out.bin")
    tensors = [torch.arange(6, dtype=torch.float32).reshape(2, 3), torch.tensor([1, -2], dtype=torch.int64),
               torch.zeros(0, 4, dtype=torch.bfloat16)]  # fmt: skip
    entries = protocol.write_tensors(path, tensors)
    assert [(e["dtype"], e["shape"], e["offset"], e["nbytes"]) for e in entries] == [
        ("float32", [2, 3], 0, 24), ("int64", [2], 24, 16), ("bfloat16", [0, 4], 40, 0)
    ]  # fmt: skip
    back = protocol.read_tensors(path, entries, max_bytes=1 << 20)
    assert all(torch.equal(a, b) and a.dtype == b.dtype for a, b in zip(back, tensors, strict=True))


def test_a_tensor_file_that_does_not_match_its_header_is_refused(tmp_path: Path):
    path = tmp_path / "out.bin"
    entries = protocol.write_tensors(str(path), [torch.ones(4)])
    with pytest.raises(ProtocolError, match="over the limit"):
        protocol.read_tensors(str(path), entries, max_bytes=8)
    with path.open("ab") as f:
        f.write(b"\0")
    with pytest.raises(ProtocolError, match="bytes no header entry describes"):
        protocol.read_tensors(str(path), entries, max_bytes=1 << 20)
    path.write_bytes(b"\0" * 8)
    with pytest.raises(ProtocolError, match="past the end"):
        protocol.read_tensors(str(path), entries, max_bytes=1 << 20)
    (tmp_path / "link.bin").symlink_to(path)
    with pytest.raises(ProtocolError, match="cannot open"):
        protocol.read_tensors(str(tmp_path / "link.bin"), entries, max_bytes=1 << 20)


def test_the_writer_refuses_more_tensors_than_one_header_may_hold(tmp_path: Path):
    """The worker refuses a header over MAX_TENSORS; the judge must say so before writing one, not after a crash."""
    many = [torch.zeros(1)] * (protocol.MAX_TENSORS + 1)
    with pytest.raises(ProtocolError, match=f"{protocol.MAX_TENSORS + 1} tensors for one file, over"):
        protocol.write_tensors(str(tmp_path / "in.bin"), many)
    entries = protocol.write_tensors(str(tmp_path / "ok.bin"), many[:-1])
    assert len(protocol.check_entries(entries, max_bytes=1 << 20)) == protocol.MAX_TENSORS


def test_an_absent_optional_tensor_crosses_as_an_explicit_none_entry_where_the_reader_allows_it(tmp_path: Path):
    """make_inputs' None (an optional `Tensor?` left out) reaches the worker as None in its place, never dropped."""
    path = str(tmp_path / "in.bin")
    x, bias = torch.arange(4, dtype=torch.float32), torch.ones(2, dtype=torch.float64)
    entries = protocol.write_tensors(path, [x, None, bias])
    assert entries[1] == {"none": True} and entries[2]["offset"] == 16  # no bytes of its own
    back = protocol.read_tensors(path, entries, max_bytes=1 << 20, nones=True)
    assert len(back) == 3 and back[1] is None
    assert torch.equal(back[0], x) and torch.equal(back[2], bias)
    with pytest.raises(ProtocolError, match="tensor 1: none where a tensor must be"):
        protocol.read_tensors(path, entries, max_bytes=1 << 20)  # a worker's outputs: a None there is its error


def test_a_none_entry_with_anything_else_in_it_is_refused(tmp_path: Path):
    path = str(tmp_path / "in.bin")
    entries = protocol.write_tensors(path, [torch.ones(2)])
    for odd in ({"none": 1}, {"none": False}, {"none": True, "dtype": "float32"}, {"none": "yes"}):
        with pytest.raises(ProtocolError, match="a none entry is exactly"):
            protocol.read_tensors(path, [odd, *entries], max_bytes=1 << 20, nones=True)
    with pytest.raises(ProtocolError, match="none where a tensor must be"):
        protocol.check_entries([{"none": True}], max_bytes=1 << 20, at="address")  # a frozen worker's outputs
