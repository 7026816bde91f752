"""The `opgate/acceptance` status decided from a review and its pull request's acceptances (pure; words: present)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict

from bot.models.github import StatusState
from bot.models.ledger import AcceptanceRow
from bot.models.report import Report
from bot.verdict.accept import accept_waiting, gates_overridden, needs_accept

STATES: dict[str, StatusState] = {"pass": "success", "fail": "failure", "error": "error"}

# Which rule decided the state: a failed gate a maintainer overrode for this head, a review that could not run,
# every gate passed, nothing failed but something was not decided, every kernel a person had to accept accepted,
# one still waiting for /accept, a gate failed (or could not judge).
StatusRule = Literal["overridden", "error", "pass", "undecided", "accepted", "waiting", "failed"]


class AcceptanceDecision(BaseModel):
    """The status's state and the rule that set it, with what its description names."""

    model_config = ConfigDict(frozen=True)

    state: StatusState
    rule: StatusRule
    override: AcceptanceRow | None = None  # rule overridden: the acceptance that overrode the failed gates
    waiting: list[str] = []  # rule waiting: the kernels still waiting for a person's /accept
    needed: list[str] = []  # rule accepted: the kernels that needed a person
    accepted_by: list[str] = []  # rule accepted: who accepted this head, first first


def acceptance_decision(report: Report, acceptances: Sequence[AcceptanceRow] = ()) -> AcceptanceDecision:
    """A pass is success; a failed gate failure (success once a maintainer overrides it for this head); a kernel
    that needs a person's /accept pending until one is recorded for this head; an undecided review success,
    since GitHub's statuses have no neutral state (its description says it was not decided)."""
    rows = list(acceptances)
    override = gates_overridden(report, rows)
    if override is not None:
        return AcceptanceDecision(state="success", rule="overridden", override=override)
    if report.error:
        return AcceptanceDecision(state="error", rule="error")
    if report.verdict == "pass":
        return AcceptanceDecision(state="success", rule="pass")
    if report.verdict == "undecided":
        return AcceptanceDecision(state="success", rule="undecided")
    if report.verdict == "needs_accept":
        waiting = accept_waiting(report, rows)
        if waiting:
            return AcceptanceDecision(state="pending", rule="waiting", waiting=waiting)
        who = list(dict.fromkeys(r.login for r in rows if r.head_sha == report.head_sha))
        return AcceptanceDecision(state="success", rule="accepted", needed=needs_accept(report), accepted_by=who)
    return AcceptanceDecision(state=STATES[report.verdict], rule="failed")
