"""The `opgate/acceptance` status's one line (bot/present/status.py) for each rule that decided its state."""

from __future__ import annotations

from bot.present.status import acceptance_status, description
from bot.verdict.status import acceptance_decision
from tests.test_accept import HEAD, OLD, make_report
from tests.test_status import needing, row


def test_a_review_that_could_not_run_is_an_error_with_its_reason() -> None:
    report = make_report(verdicts={}).model_copy(update={"verdict": "error", "error": "git: no such revision"})
    assert acceptance_decision(report).rule == "error"
    assert acceptance_status(report) == ("error", "could not judge: git: no such revision")


def test_a_kernel_that_needs_a_person_is_pending_until_this_head_is_accepted() -> None:
    report = needing()
    waiting = acceptance_decision(report, [row(OLD)])
    assert (waiting.state, waiting.rule, waiting.waiting) == ("pending", "waiting", ["deepgemm_tile"])
    assert description(report, waiting).startswith("needs /accept: deepgemm_tile — ")
    accepted = acceptance_decision(report, [row(HEAD), row(HEAD, login="maint-eve"), row(HEAD)])
    assert (accepted.state, accepted.accepted_by, accepted.needed) == (
        "success", ["maint-bob", "maint-eve"], ["deepgemm_tile"]
    )  # fmt: skip
    assert description(report, accepted) == (
        "accepted by @maint-bob, @maint-eve: nothing failed, deepgemm_tile needed a person"
    )


def test_an_undecided_review_is_green_and_says_it_was_not_decided() -> None:
    state, line = acceptance_status(needing("undecided"))
    assert state == "success" and line.startswith("undecided, not blocking: deepgemm_tile")
