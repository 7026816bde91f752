"""report.json's lines, written from the findings (bot/verdict/written.py): a gate keeps findings only, the writer
renders each kernel's, case's and agent case's lines once, and a report read back writes the same lines again."""

from __future__ import annotations

import json

import tests.comment_reports as cr
from bot.models.finding import Outcome
from bot.models.report import Report
from bot.verdict.written import written
from bot.wording.messages import render


def test_a_gate_keeps_findings_only_and_report_json_gets_their_lines_once():
    """Issue 49, 1: a finding is rendered where it is shown. The gates' reports hold no line; `written` writes
    report.json's lines from the findings, and a report read back from its JSON writes the same lines again."""
    report = cr.fail_correctness()
    assert all(k.reasons == k.undecided == k.accept_needed == k.notes == [] for k in report.kernels)
    assert all(c.reasons == [] for k in report.kernels for c in k.cases)
    once = written(report)
    k = next(k for k in once.kernels if k.verdict == "fail")
    assert k.reasons and k.reasons == [render(f) for f in k.findings if f.outcome in (Outcome.fail, Outcome.error)]
    assert all(c.reasons == [render(f, case=False) for f in c.findings] for c in k.cases)
    again = written(Report.model_validate_json(once.to_json()))
    assert json.loads(again.to_json()) == json.loads(once.to_json())


def test_an_agent_case_that_base_fails_too_says_why_once_and_reads_back_the_same():
    report = cr.agent_cases()
    [block] = [k.agent_cases for k in report.kernels if k.agent_cases]
    assert [c.reasons for c in block.cases] == [[], [], []]  # the gate's: findings and base_fails only
    [k] = [k for k in written(report).kernels if k.agent_cases]
    assert k.agent_cases is not None
    wrong = "correctness: max_abs_err 1.5 > tolerance 1e-05 on out, first bad element out[46, 0]: got 0, reference 1.5"
    assert [(c.name, c.base_fails, c.reasons) for c in k.agent_cases.cases] == [
        ("tail_15", None, [wrong]),
        ("tail_31", "wrong", [wrong, "base fails too (base is wrong on it): not failed for it"]),
        ("rows_1", None, []),
    ]
    again = written(Report.model_validate_json(written(report).to_json()))
    assert again.kernels == written(report).kernels
