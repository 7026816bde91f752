"""Where a reference module failed (bot/untrusted/runner/blame.py): its file, line and function and the case, in
one line, for an error raised inside it, for a syntax error in it, and for one raised outside it."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from bot.untrusted.runner.blame import ReferenceFailed, blame

REFERENCE = """import math


def make_inputs(shape):
    if shape["n"] < 0:
        raise ValueError(f"n must be >= 0, got {shape['n']}")
    return [math.nan] * shape["n"]
"""


def load(path: Path):
    spec = importlib.util.spec_from_file_location("reference_under_test", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_an_error_inside_the_reference_names_its_line_function_and_case(tmp_path: Path) -> None:
    path = tmp_path / "reference.py"
    path.write_text(REFERENCE)
    module = load(path)
    with pytest.raises(ValueError) as raised:
        module.make_inputs({"n": -1})
    failed = blame(raised.value, str(path), "ops/reference.py", case="square_512")
    assert isinstance(failed, ReferenceFailed)
    assert str(failed) == (
        "ops/reference.py line 6, in make_inputs (case square_512): ValueError: n must be >= 0, got -1"
    )


def test_a_syntax_error_names_its_line(tmp_path: Path) -> None:
    path = tmp_path / "reference.py"
    path.write_text("def make_inputs(shape):\n    return [\n\n\ndef reference(x):\n    pass\n")
    with pytest.raises(SyntaxError) as raised:
        load(path)
    message = str(blame(raised.value, str(path), "ops/reference.py"))
    assert message.startswith("ops/reference.py line ") and ": SyntaxError: " in message
    assert "(case" not in message


def test_an_error_outside_the_reference_names_the_file_only(tmp_path: Path) -> None:
    try:
        int("twelve")
    except ValueError as exc:
        message = str(blame(exc, str(tmp_path / "reference.py"), "ops/reference.py", case="c"))
    assert message == "ops/reference.py (case c): ValueError: invalid literal for int() with base 10: 'twelve'"
