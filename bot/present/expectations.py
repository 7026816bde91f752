"""One agent expectation beside what was measured, as the comment shows it (pure)."""

from __future__ import annotations

from bot.models.agent_report import ExpectationCheck
from bot.text.i18n import N_
from bot.text.i18n import gettext as _
from bot.text.safe import Safe, code, untrusted
from bot.wording import spoken

MINUS = "\u2212"
OUTCOME_WORDS = {
    "inside": N_("inside the measured interval"),
    "outside": N_("outside it"),
    "not_measured": N_("not measured"),
}


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
    metric, subject = f"`{code(c.metric)}`", f"`{code(c.subject)}`"
    name = _("%(metric)s on %(subject)s", metric=metric, subject=subject) if c.subject else metric
    if c.outcome == "not_measured" or c.measured is None:
        why = f" ({untrusted(spoken.phrase(c.note))})" if c.note is not None else ""
        shown = c.expected if isinstance(c.expected, str) else f"{c.expected:g}"
        return Safe(_("%(name)s: expected %(shown)s, not measured%(why)s", name=name, shown=untrusted(shown), why=why))
    expected = c.expected_value if c.expected_value is not None else 0.0
    change = c.unit == "%"
    measured = _figure(c.measured, c.unit, signed=change)
    if c.low is not None and c.high is not None:
        fmt = (lambda x: _signed(x)) if change else (lambda x: f"{x:.4g}")
        measured += f" ({fmt(c.low)}..{fmt(c.high)})"
    what = _(c.quantity) if c.quantity else _("value")  # bot/verdict/expectations.py's quantity names
    read = c.note is not None and c.note.key == "expect.speedup_read"  # the only note beside a measured figure
    note = f"; {untrusted(spoken.phrase(c.note))}" if read and c.note is not None else ""
    line = _(
        "%(name)s: expected %(what)s %(expected)s, measured %(measured)s — %(outcome)s%(note)s",
        name=name, what=what, expected=_figure(expected, c.unit, signed=change), measured=measured,
        outcome=_(OUTCOME_WORDS[c.outcome]), note=note,
    )  # fmt: skip
    return Safe(line)
