"""The correctness gate: a check's and a probe's output against the reference, base's own correctness, and the
notes on a kernel's probes and small shapes."""

from __future__ import annotations

import math

from bot.models.finding import Finding, Gate, Outcome, Phrase
from bot.models.judging import CaseRun, Check
from bot.models.report import (
    CaseReport,
    CaseStatus,
    Violation,
)
from bot.verdict.findings import BASE, HEAD, _finding


def _fmt(x: float | None) -> str:
    return "?" if x is None else f"{x:.3g}"


def base_correct(run: CaseRun, tol: float) -> bool | None:
    """Base right on the case's inputs and probes; False where it is wrong or crashed; None where it was not checked."""
    if run.failed_label == BASE and run.status in (CaseStatus.timeout, CaseStatus.crashed):
        return False
    base = run.checks.get(BASE)
    if base is None:
        return None
    spot = run.spots.get(BASE)
    wrong = any(check_findings(c, tol) for c in (base, *run.probes.get(BASE, [])))
    return not (wrong or (spot is not None and spot.failed))


def check_findings(check: Check, tol: float) -> list[Finding]:
    """Why one check (random inputs or a boundary probe) is wrong: the metric, the output, the first bad element."""
    on = [Phrase(key="tail.probe", params={"probe": check.probe})] if check.probe else []
    if check.error:
        side = check.label or HEAD
        if check.probe:
            return [
                _finding(
                    Gate.correctness, "correctness.bad_output_probe", side=side, probe=check.probe, error=check.error
                )
            ]
        return [_finding(Gate.correctness, "correctness.bad_output", side=side, error=check.error)]
    findings = []
    v = check.failure
    if check.nan_inf and v is not None and v.metric == "nan_inf" and v.unwritten:  # the judge's NaN, left in place
        findings.append(
            Finding(
                gate=Gate.correctness,
                outcome=Outcome.fail,
                key="correctness.unwritten",
                params={"output": v.output},
                phrases={"element": [_element(v)]},
                tail=on,
            )
        )
    elif check.nan_inf:
        at = v is not None and v.metric == "nan_inf"
        key = "stability.nan_inf_at" if at else "stability.nan_inf"
        phrases = {"element": [_element(v)]} if at and v is not None else {}
        findings.append(Finding(gate=Gate.stability, outcome=Outcome.fail, key=key, phrases=phrases, tail=on))
    if v is not None and v.metric != "nan_inf":
        findings.append(violation_finding(v).model_copy(update={"tail": on}))
    elif not check.outputs and check.max_abs_err is not None and check.max_abs_err > tol:  # a run without limits
        params: dict[str, str | int | float] = {"value": _fmt(check.max_abs_err), "limit": _fmt(tol)}
        findings.append(
            Finding(
                gate=Gate.correctness,
                outcome=Outcome.fail,
                key="correctness.max_abs_err_total",
                params=params,
                value=check.max_abs_err,
                limit=tol,
                tail=on,
            )
        )
    return findings


def _element(v: Violation) -> Phrase:
    """`out[1, 0, 5, 37]: got 0.12, reference 0.95` (a cos_diff row: `out[1, 0, 5, :]`)."""
    if v.metric == "cos_diff":
        return Phrase(key="element.at", params={"where": f"{v.output}[{', '.join([*map(str, v.index), ':'])}]"})
    where = f"{v.output}[{', '.join(map(str, v.index))}]"
    if v.unwritten:  # an output argument the judge poisoned before the call
        got = "NaN" if v.got is not None and math.isnan(v.got) else _fmt(v.got)
        return Phrase(key="element.unwritten", params={"where": where, "got": got, "expected": _fmt(v.expected)})
    if v.got is None:
        return Phrase(key="element.at", params={"where": where})
    return Phrase(key="element.value", params={"where": where, "got": _fmt(v.got), "expected": _fmt(v.expected)})


def violation_finding(v: Violation) -> Finding:
    """The first limit an output broke: its metric, value and limit, the output and the first bad element."""
    if v.metric == "nan_inf":
        return Finding(
            gate=Gate.stability, outcome=Outcome.fail, key="stability.violation", phrases={"element": [_element(v)]}
        )
    return Finding(
        gate=Gate.correctness,
        outcome=Outcome.fail,
        key=f"correctness.{v.metric}",
        params={"value": _fmt(v.value), "limit": _fmt(v.limit), "output": v.output},
        phrases={"element": [_element(v)]},
        value=v.value,
        limit=v.limit,
    )


def probe_findings(cases: list[CaseReport]) -> list[Finding]:
    """A note when the cases that ran had no boundary probes: random inputs alone miss one-off errors."""
    reached = [c for c in cases if c.probe_count is not None]
    without = [c.name for c in reached if c.probe_count == 0]
    if not reached or not without:
        return []
    if len(without) == len(reached):
        return [_finding(Gate.coverage, "coverage.no_probes", Outcome.note)]
    return [_finding(Gate.coverage, "coverage.no_probes_for", Outcome.note, cases=", ".join(without))]


def small_shape_findings(cases: list[CaseReport]) -> list[Finding]:
    """A note when the speed-up is confined to the small cases: every case whose whole interval is faster takes less
    time on base than every case that is not faster (unchanged, slower or undecided) — the users' checklist asks
    "is it only faster on small batches?". Cases are sized by base's p50, the work each does."""
    timed = [c for c in cases if c.ci95_pct and c.base_p50_ms is not None and c.regression_pct is not None]
    faster = sorted((c for c in timed if c.ci95_pct[1] < 0), key=lambda c: c.base_p50_ms or 0.0)  # type: ignore[index]
    rest = sorted((c for c in timed if c.ci95_pct[1] >= 0), key=lambda c: c.base_p50_ms or 0.0)  # type: ignore[index]
    if not faster or not rest or (faster[-1].base_p50_ms or 0.0) >= (rest[0].base_p50_ms or 0.0):
        return []

    def listed(group: list[CaseReport]) -> str:
        return ", ".join(f"{c.name} {c.regression_pct:+.1f}%" for c in group[:4]) + (" …" if len(group) > 4 else "")

    found = _finding(
        Gate.performance,
        "performance.small_only",
        Outcome.note,
        faster=listed(faster),
        faster_max=f"{faster[-1].base_p50_ms:.3g}",
        rest=listed(rest),
        rest_min=f"{rest[0].base_p50_ms:.3g}",
    )
    return [found]
