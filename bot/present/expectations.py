"""One agent expectation beside what was measured, as the comment shows it (pure)."""

from __future__ import annotations

from bot.models.report import ExpectationCheck
from bot.text.safe import Safe, code, untrusted

MINUS = "\u2212"
OUTCOME_WORDS = {"inside": "inside the measured interval", "outside": "outside it", "not_measured": "not measured"}


def _signed(x: float, digits: int = 1) -> str:
    return f"{x:+.{digits}f}".replace("-", MINUS)


def _figure(x: float, unit: str, *, signed: bool) -> str:
    if unit == "%":
        return f"{_signed(x) if signed else f'{x:.1f}'} %"
    if unit == "ms":
        return f"{x:.4g} ms"
    if unit == "% occupancy":
        return f"{x:.1f} %"
    if unit:
        return f"{x:g} {unit}"
    return f"{x:.3g}"


def expected_line(c: ExpectationCheck) -> Safe:
    """`latency_p50` on `square_512`: expected p50 −8.0 %, measured +7.9 % (+6.1..+9.6) — outside it."""
    name = f"`{code(c.metric)}`" + (f" on `{code(c.subject)}`" if c.subject else "")
    if c.outcome == "not_measured" or c.measured is None:
        why = f" ({untrusted(c.note)})" if c.note else ""
        shown = c.expected if isinstance(c.expected, str) else f"{c.expected:g}"
        return Safe(f"{name}: expected {untrusted(shown)}, not measured{why}")
    expected = c.expected_value if c.expected_value is not None else 0.0
    change = c.unit == "%"
    measured = _figure(c.measured, c.unit, signed=change)
    if c.low is not None and c.high is not None:
        fmt = (lambda x: _signed(x)) if change else (lambda x: f"{x:.4g}")
        measured += f" ({fmt(c.low)}..{fmt(c.high)})"
    what = c.quantity or "value"
    note = f"; {untrusted(c.note)}" if c.note and c.quantity == "p50 change" and "speedup" in c.note else ""
    return Safe(
        f"{name}: expected {what} {_figure(expected, c.unit, signed=change)}, measured {measured}"
        f" — {OUTCOME_WORDS[c.outcome]}{note}"
    )
