"""The `opgate/acceptance` status as GitHub shows it: the gate's decision (bot/verdict/status.py) in one line."""

from __future__ import annotations

from collections.abc import Sequence

from bot.models.github import StatusState
from bot.models.ledger import AcceptanceRow
from bot.models.report import Report
from bot.present import digest
from bot.verdict.findings import case_stated
from bot.verdict.status import AcceptanceDecision, acceptance_decision
from bot.wording import spoken


def acceptance_status(report: Report, acceptances: Sequence[AcceptanceRow] = ()) -> tuple[StatusState, str]:
    """`opgate/acceptance`: success, failure, pending or error with a one-line description (pure)."""
    decision = acceptance_decision(report, acceptances)
    return decision.state, description(report, decision)


def description(report: Report, decision: AcceptanceDecision) -> str:
    """The status's one line: what decided it, the kernels it names and the first reason (gate, case, value and
    limit, in short names)."""
    changed = [k for k in report.kernels if k.changed]
    if decision.rule == "overridden" and (o := decision.override) is not None:
        return f"gates failed, overridden by @{o.login} ({o.role}): {o.reason}"
    if decision.rule == "error" and report.error:
        return f"could not judge: {report.error}"
    if decision.rule == "pass":
        names = ", ".join(k.name for k in changed)
        return f"all gates pass: {names}" if names else "no kernel changed"
    if decision.rule in ("undecided", "accepted", "waiting"):
        lines = [
            ln for k in report.kernels if k.verdict in ("needs_accept", "undecided") for ln in digest.kernel_lines(k)
        ]
        why = f" — {digest.line_text(lines[0])}" if lines else ""
        if decision.rule == "undecided":
            names = ", ".join(
                f"{k.name} ({summary})" if (summary := digest.undecided_summary(k)) else k.name
                for k in report.kernels
                if k.verdict == "undecided"
            )
            return f"undecided, not blocking: {names}{why}"
        if decision.rule == "accepted":
            who = ", ".join(f"@{login}" for login in decision.accepted_by)
            return f"accepted by {who}: nothing failed, {', '.join(decision.needed)} needed a person"
        return f"needs /accept: {', '.join(decision.waiting)}{why}"
    bad = [k for k in report.kernels if k.verdict in ("fail", "error")]
    first = bad[0] if bad else None
    lines = [line for k in bad for line in digest.kernel_lines(k)]  # gate, case, value and limit; short names
    why = f" — {digest.line_text(lines[0], kernel=False)}" if lines else ""
    if first is None:
        for k in report.kernels:
            found = next(((c, f) for c in k.cases if c.verdict in ("fail", "error") for f in case_stated(c)), None)
            if found is not None:
                first, why = k, f" — {found[0].name}: {spoken.render(found[1], case=False)}"
                break
    names = ", ".join(k.name for k in bad) or "see the comment"
    label = "gate failed" if report.verdict == "fail" else "could not judge"
    return f"{label}: {names}{why}"
