"""The agent's `expected_metrics` held against what the review measured (pure: a kernel's report in, checks out)."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from bot.models.agent_report import ExpectationCheck
from bot.models.finding import Phrase
from bot.models.report import CaseReport, KernelReport, Report, Resource, ResourceCheckReport
from bot.text.i18n import N_

# A metric name is the agent's free text (at most 100 characters): it is read as words. Each quantity is named by
# the words any of its spellings holds; the first row that matches wins (so "spill" before "registers": the users'
# `register_spill_bytes` is a spill).
_WORDS = re.compile(r"[a-z0-9]+")
_NUMBER = re.compile(r"[-+\u2212]?\s*(?:\d+(?:\.\d*)?|\.\d+)(?:e[-+]?\d+)?", re.IGNORECASE)
OCCUPANCY_SLACK_PCT = 0.5  # an occupancy the agent rounded to a whole percent still matches
CHANGE_WORDS = {"regression", "change", "delta", "diff", "pct", "percent", "speedup", "slowdown"}
LATENCY_WORDS = {"latency", "p50", "time", "runtime", "duration", "ms"}


@dataclass(frozen=True)
class _Quantity:
    name: str  # as the comment names it
    words: frozenset[str]
    unit: str


QUANTITIES = (
    _Quantity(N_("spill bytes"), frozenset({"spill", "spills", "spilled"}), "bytes"),
    _Quantity(N_("registers"), frozenset({"registers", "register", "regs", "reg"}), "registers"),
    _Quantity(N_("shared memory"), frozenset({"smem", "shared", "shmem"}), "bytes"),
    _Quantity(N_("occupancy"), frozenset({"occupancy"}), "% occupancy"),
    _Quantity("max_abs_err", frozenset({"err", "error", "abs"}), ""),
    _Quantity("p50", frozenset(LATENCY_WORDS | CHANGE_WORDS), "%"),
)


def _words(name: str) -> list[str]:
    return _WORDS.findall(name.lower().replace("_", " "))


def _number(value: float | str) -> tuple[float, bool] | None:
    """The value as a number and whether it was written as a percentage ("-8%", "−8 %"); None when it holds none."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return (float(value), False) if math.isfinite(value) else None
    match = _NUMBER.search(value)
    if match is None:
        return None
    try:
        number = float(match.group(0).replace("\u2212", "-").replace(" ", ""))
    except ValueError:
        return None
    return (number, "%" in value[match.end() :]) if math.isfinite(number) else None


def _subject(name: str, candidates: Iterable[str]) -> str | None:
    """The longest candidate (a case, a function, an architecture) the name holds as a whole word; None."""
    lowered = name.lower()
    for candidate in sorted(set(candidates), key=len, reverse=True):
        c = candidate.lower()
        if c and re.search(rf"(?<![a-z0-9]){re.escape(c)}(?![a-z0-9])", lowered):
            return candidate
    return None


def _quantity(name: str) -> _Quantity | None:
    words = set(_words(name))
    return next((q for q in QUANTITIES if words & q.words), None)


def check_kernel(kernel: KernelReport, expected: Mapping[str, float | str]) -> list[ExpectationCheck]:
    """Every expected metric beside the measured figure(s) its name matches (one check per case or function when
    the name names none), or `not_measured` when this review measured nothing that matches."""
    checks: list[ExpectationCheck] = []
    for metric, value in expected.items():
        checks.extend(_check(kernel, metric, value))
    return checks


def _not_measured(metric: str, value: float | str, why: Phrase, quantity: str = "") -> ExpectationCheck:
    """Why nothing measured matches, a phrase of the catalog."""
    return ExpectationCheck(metric=metric, expected=value, quantity=quantity, outcome="not_measured", note=why)


def _without_subjects(kernel: KernelReport, metric: str) -> str:
    """The name with the case, function and architecture it names taken out (a case called `long_time` names no
    latency)."""
    names = [c.name for c in kernel.cases] + [
        x for check in kernel.resource_checks() for x in [check.arch, *(r.function for r in check.head)]
    ]
    rest = metric
    while (named := _subject(rest, names)) is not None:
        rest = re.sub(rf"(?<![a-z0-9]){re.escape(named.lower())}(?![a-z0-9])", " ", rest.lower())
    return rest


def _check(kernel: KernelReport, metric: str, value: float | str) -> list[ExpectationCheck]:
    quantity = _quantity(_without_subjects(kernel, metric))
    if quantity is None:
        return [_not_measured(metric, value, Phrase(key="expect.no_quantity"))]
    number = _number(value)
    if number is None:
        return [_not_measured(metric, value, Phrase(key="expect.not_a_number"), quantity.name)]
    if quantity.name == "p50":
        return _latency(kernel, metric, value, number)
    if quantity.name == "max_abs_err":
        return _error(kernel, metric, value, number[0])
    return _resource(kernel, metric, value, number[0], quantity)


def _timed(kernel: KernelReport) -> list[CaseReport]:
    return [c for c in kernel.cases if c.regression_pct is not None and c.ci95_pct is not None]


def _cases(kernel: KernelReport, metric: str, cases: list[CaseReport]) -> list[CaseReport] | None:
    """The named case (None when the name names a case that has no such figure), else every case given."""
    named = _subject(metric, [c.name for c in kernel.cases])
    if named is None:
        return cases
    picked = [c for c in cases if c.name == named]
    return picked or None


def _latency(
    kernel: KernelReport, metric: str, value: float | str, number: tuple[float, bool]
) -> list[ExpectationCheck]:
    words = set(_words(metric))
    cases = _cases(kernel, metric, _timed(kernel))
    if not cases:
        why = Phrase(key="expect.case_untimed" if cases is None else "expect.none_timed")
        return [_not_measured(metric, value, why, "p50")]
    x, written_pct = number
    speedup = bool(words & {"speedup"})
    absolute = not speedup and not written_pct and not (words & CHANGE_WORDS) and bool(words & {"ms", "p50_ms"})
    checks = []
    for c in cases:
        assert c.regression_pct is not None and c.ci95_pct is not None
        lo, hi = c.ci95_pct
        if absolute:
            if c.base_p50_ms is None or c.p50_ms is None:
                checks.append(
                    _not_measured(metric, value, Phrase(key="expect.no_p50_ms", params={"case": c.name}), "p50")
                )
                continue
            scale = c.base_p50_ms / 100.0
            low, high = c.base_p50_ms + lo * scale, c.base_p50_ms + hi * scale
            checks.append(_held(metric, value, "p50", c.name, x, c.p50_ms, low, high, "ms", None))
            continue
        note: Phrase | None = None
        change = x
        if speedup:  # read per case into `change`: `x` stays the agent's value for the next case
            if x <= 0:
                checks.append(_not_measured(metric, value, Phrase(key="expect.speedup_above_0"), "p50 change"))
                continue
            change, note = (1.0 / x - 1.0) * 100.0, Phrase(key="expect.speedup_read", params={"speedup": f"{x:g}"})
        checks.append(_held(metric, value, N_("p50 change"), c.name, change, c.regression_pct, lo, hi, "%", note))
    return checks


def _held(
    metric: str,
    value: float | str,
    quantity: str,
    subject: str,
    expected: float,
    measured: float,
    low: float,
    high: float,
    unit: str,
    note: Phrase | None,
) -> ExpectationCheck:
    return ExpectationCheck(
        metric=metric,
        expected=value,
        quantity=quantity,
        subject=subject,
        expected_value=round(expected, 6),
        measured=round(measured, 6),
        low=round(low, 6),
        high=round(high, 6),
        unit=unit,
        outcome="inside" if low <= expected <= high else "outside",
        note=note,
    )


def _error(kernel: KernelReport, metric: str, value: float | str, expected: float) -> list[ExpectationCheck]:
    cases = _cases(kernel, metric, [c for c in kernel.cases if c.max_abs_err is not None])
    if not cases:
        why = Phrase(key="expect.case_no_error" if cases is None else "expect.no_error")
        return [_not_measured(metric, value, why, "max_abs_err")]
    checks = []
    for c in cases:
        assert c.max_abs_err is not None
        checks.append(
            ExpectationCheck(
                metric=metric,
                expected=value,
                quantity="max_abs_err",
                subject=c.name,
                expected_value=expected,
                measured=c.max_abs_err,
                outcome="inside" if c.max_abs_err <= expected else "outside",
                note=Phrase(key="expect.ceiling"),
            )
        )
    return checks


def _figure(r: Resource, quantity: str) -> float | None:
    if quantity == "spill bytes":
        return float(r.spill_bytes)
    if quantity == "registers":
        return float(r.registers)
    if quantity == "shared memory":
        return float(r.smem_bytes + (r.dynamic_smem_bytes or 0))
    return r.occupancy.occupancy_pct if r.occupancy is not None else None


def _resource(
    kernel: KernelReport, metric: str, value: float | str, expected: float, quantity: _Quantity
) -> list[ExpectationCheck]:
    checks_by_arch: list[ResourceCheckReport] = [c for c in kernel.resource_checks() if c.status == "ok" and c.head]
    if not checks_by_arch:
        return [_not_measured(metric, value, Phrase(key="expect.no_resources"), quantity.name)]
    arch = _subject(metric, [c.arch for c in checks_by_arch])
    check = next((c for c in checks_by_arch if c.arch == arch), checks_by_arch[0])
    function = _subject(metric, [r.function for r in check.head])
    resources = [r for r in check.head if function is None or r.function == function]
    checks = []
    slack = OCCUPANCY_SLACK_PCT if quantity.name == "occupancy" else 0.0
    for r in resources:
        measured = _figure(r, quantity.name)
        if measured is None:
            checks.append(
                _not_measured(
                    metric, value, Phrase(key="expect.no_occupancy", params={"function": r.function}), quantity.name
                )
            )
            continue
        checks.append(
            ExpectationCheck(
                metric=metric,
                expected=value,
                quantity=quantity.name,
                subject=f"{r.function} ({check.arch})",
                expected_value=expected,
                measured=measured,
                unit=quantity.unit,
                outcome="inside" if abs(measured - expected) <= slack else "outside",
                note=Phrase(key="expect.exact" if not slack else "expect.within"),
            )
        )
    return checks


def attach(report: Report) -> Report:
    """The report with every kernel agent's expectations held against its kernel's measurements (recomputed, so a
    merged or re-written report never keeps a part's stale checks)."""
    kernels = {k.name: k for k in report.kernels}
    agents = []
    for a in report.agents:
        kernel = kernels.get(a.kernel or "")
        checks = check_kernel(kernel, a.expected_metrics) if kernel is not None and a.expected_metrics else []
        agents.append(a.model_copy(update={"expectations": checks}))
    return report.model_copy(update={"agents": agents})
