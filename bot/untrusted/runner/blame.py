"""Where a reference module failed: its file, function and line, and the case, in one line the user can act on."""

from __future__ import annotations

import os
import traceback

from bot.text.safe import one_line

REFERENCE_LABEL = "the reference"  # who failed, when make_inputs, reference or make_probes raised


class ReferenceFailed(Exception):
    """The reference module (make_inputs, reference, make_probes, or its import) raised; the message names where."""


def where(exc: BaseException, path: str, shown: str) -> str:
    """ "ops/reference.py line 12, in make_inputs" — the innermost frame of `exc` in the file at `path`."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if _same(f.filename, path)]
    if isinstance(exc, SyntaxError) and exc.lineno is not None and _same(exc.filename or "", path):
        return f"{shown} line {exc.lineno}"
    if not frames:
        return shown
    frame = frames[-1]
    inside = "" if frame.name == "<module>" else f", in {frame.name}"
    return f"{shown} line {frame.lineno}{inside}"


def blame(exc: BaseException, path: str, shown: str, case: str | None = None) -> ReferenceFailed:
    """The ReferenceFailed to raise for `exc`: where in the reference module, which case, what it raised."""
    during = f" (case {case})" if case else ""
    what = one_line(f"{type(exc).__name__}: {exc}", limit=300)
    return ReferenceFailed(f"{where(exc, path, shown)}{during}: {what}")


def _same(a: str, b: str) -> bool:
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.abspath(a) == os.path.abspath(b)
