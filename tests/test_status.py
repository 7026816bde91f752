"""The `opgate/acceptance` status: its state decided by `bot/verdict/status.py` from the review and the pull
request's acceptances, its one line written by `bot/present/status.py`."""

from __future__ import annotations

import pytest

from bot.models.ledger import AcceptanceRow
from bot.models.report import KernelReport, Report
from bot.verdict.status import acceptance_decision
from tests.test_accept import HEAD, OLD, PR, make_report


def row(head: str, login: str = "maint-bob", override: bool = False, kernels: tuple[str, ...] = ("deepgemm_tile",)):
    return AcceptanceRow(
        pr=PR, head_sha=head, login=login, role="maintain", kernels=list(kernels), override=override,
        reason="timer noise" if override else "", comment_id=1,
    )  # fmt: skip


def needing(verdict: str = "needs_accept") -> Report:
    r = make_report(verdicts={"deepgemm_tile": "pass"})
    k = KernelReport(name="deepgemm_tile", domain="deepgemm", changed=True, verdict=verdict)  # type: ignore[arg-type]
    if verdict == "needs_accept":
        k.accept_needed.append("new kernel: judged by its own manifest and reference, which this change wrote")
    else:
        k.undecided.append("no case ran: 1 cuda case (needs a CUDA GPU; this machine has none)")
    return r.model_copy(update={"verdict": verdict, "kernels": [k]})


@pytest.mark.parametrize(
    ("verdicts", "state", "rule"),
    [
        ({"deepgemm_tile": "pass"}, "success", "pass"),
        ({"deepgemm_tile": "fail"}, "failure", "failed"),
        ({"deepgemm_tile": "error"}, "error", "failed"),
    ],
)
def test_each_verdict_has_its_state_and_rule(verdicts, state, rule) -> None:
    decision = acceptance_decision(make_report(verdicts=verdicts))
    assert (decision.state, decision.rule) == (state, rule)


def test_an_override_counts_only_for_the_head_it_was_given_for() -> None:
    failed = make_report(verdicts={"deepgemm_tile": "fail"})
    assert acceptance_decision(failed, [row(OLD, override=True)]).rule == "failed"
    decided = acceptance_decision(failed, [row(HEAD, override=True)])
    assert (decided.state, decided.rule, decided.override) == ("success", "overridden", row(HEAD, override=True))


def test_needs_accept_waits_for_this_heads_acceptance_and_undecided_does_not_block() -> None:
    report = needing()
    assert acceptance_decision(report, [row(OLD)]).model_dump(include={"state", "rule", "waiting"}) == {
        "state": "pending", "rule": "waiting", "waiting": ["deepgemm_tile"]
    }  # fmt: skip
    accepted = acceptance_decision(report, [row(HEAD, login="maint-eve"), row(HEAD)])
    assert (accepted.state, accepted.rule, accepted.accepted_by) == ("success", "accepted", ["maint-eve", "maint-bob"])
    assert acceptance_decision(needing("undecided")).model_dump(include={"state", "rule"}) == {
        "state": "success", "rule": "undecided"
    }  # fmt: skip
