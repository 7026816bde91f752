"""Verdicts folded again in bot/verdict/folds.py: one kernel's architecture parts into one report (`combine`), and the
review's verdict once coverage is known (`with_coverage`, `review_verdict`)."""

from __future__ import annotations

import pytest

from bot.config.manifest_tables import Case, Constraints
from bot.models.report import CaseReport, Coverage, KernelReport, Listed
from bot.verdict import change
from bot.verdict.findings import add_kernel
from bot.verdict.folds import combine, review_verdict, with_coverage
from bot.verdict.gate import Policy, case_verdict, kernel_verdict
from bot.verdict.written import written_kernel
from bot.wording.messages import render
from tests import comment_reports as cr

SQUARE = Case(name="square", device="cpu", shape={"m": 64})
BIG = Case(name="big", device="cuda", shape={"m": 4096})


def _part(*cases: CaseReport) -> KernelReport:
    kernel = KernelReport(name="k", domain="d", changed=True, verdict="skipped")
    return written_kernel(kernel_verdict(kernel, [], list(cases), Constraints(), Policy()))  # as its part writes it


def _elsewhere(case: Case, job: str) -> CaseReport:
    return case_verdict(case, Constraints(), None, change.other_job(job))


def test_each_case_comes_from_the_job_that_ran_it_and_a_failing_part_fails_the_kernel():
    slower = cr.timed("big", 9.1, 8.2, 10.3)
    first = _part(cr.timed("square", 0.1, -1.0, 1.2), _elsewhere(BIG, "sm_100"))
    second = _part(_elsewhere(SQUARE, "sm_90"), slower)
    assert (first.verdict, second.verdict) == ("pass", "fail")
    merged = written_kernel(combine([first, second]))
    assert [(c.name, c.verdict) for c in merged.cases] == [("square", "pass"), ("big", "fail")]
    assert merged.verdict == "fail" and merged.reasons == second.reasons


def test_a_job_that_ran_nothing_leaves_no_no_case_ran_once_another_job_ran_a_case():
    idle = _part(_elsewhere(SQUARE, "sm_90"), _elsewhere(BIG, "sm_100"))
    assert idle.verdict == "undecided" and idle.undecided[0].startswith("no case ran")
    ran = _part(cr.timed("square", 0.1, -1.0, 1.2), _elsewhere(BIG, "sm_100"))
    merged = combine([ran, idle])
    assert (merged.verdict, merged.undecided) == ("pass", [])
    assert not any(f.key == "coverage.no_case_ran" for f in merged.findings)
    assert combine([idle, idle]).verdict == "undecided"  # nobody ran a case: still undecided


def test_a_part_that_asks_for_a_person_or_errors_decides_in_the_order_of_severity():
    new = _part(cr.timed("square", 0.1, -1.0, 1.2))
    add_kernel(new, change.new_kernel())  # as the review adds it
    new.verdict = "needs_accept"
    lost = change.lost_part("k", "part-k@sm_100")
    assert combine([new, _part(cr.timed("square", 0.1, -1.0, 1.2))]).verdict == "needs_accept"
    assert combine([new, lost]).verdict == "error"
    assert written_kernel(lost).reasons == [
        "its matrix job left no report (part-k@sm_100: crashed, cancelled or timed out)"
    ]
    new.accept_needed = []  # a part's lines are what the outputs show: its findings decide
    assert combine([new, _part(cr.timed("square", 0.1, -1.0, 1.2))]).verdict == "needs_accept"
    merged = written_kernel(combine([new, _part(cr.timed("square", 0.1, -1.0, 1.2))]))  # its lines: from them
    assert merged.accept_needed == [render(change.new_kernel())]


@pytest.mark.parametrize(
    ("verdict", "unclaimed", "expected"),
    [
        ("pass", 0, "pass"),
        ("pass", 1, "fail"),
        ("undecided", 1, "fail"),
        ("needs_accept", 2, "fail"),
        ("error", 1, "error"),
        ("fail", 0, "fail"),
    ],
)
def test_nothing_passes_while_changed_kernel_sources_go_unclaimed(verdict, unclaimed, expected):
    cov = Coverage(
        files=3, size_limit_bytes=1, kernel_sources=Listed(total=unclaimed, names=["tools/k.cu"][:unclaimed])
    )
    assert with_coverage(verdict, cov) == expected
    assert with_coverage(verdict, None) == verdict


def test_the_reviews_verdict_is_its_worst_kernel_and_a_stopped_review_is_an_error():
    passed = _part(cr.timed("square", 0.1, -1.0, 1.2))
    failed = _part(cr.timed("square", 9.1, 8.2, 10.3))
    assert review_verdict([passed], None) == "pass"
    assert review_verdict([passed, failed], None) == "fail"
    assert review_verdict([], None, stopped=True) == "error"
    assert (
        review_verdict([passed], Coverage(files=1, size_limit_bytes=1, kernel_sources=Listed(total=1, names=["x.cu"])))
        == "fail"
    )
