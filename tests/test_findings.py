"""Findings into reports: a gate adds findings only; report.json's lines are written from them, each outcome into
the list that names it."""

from __future__ import annotations

from bot.models.finding import Finding, Gate, Outcome
from bot.models.report import CaseReport, KernelReport
from bot.verdict.findings import add_case, add_kernel, replace_case_findings, verbatim
from bot.verdict.written import written_agent_case, written_case, written_kernel
from bot.wording.messages import render


def _k() -> KernelReport:
    return KernelReport(name="k", domain="d", changed=True, verdict="pass")


def test_each_outcome_is_written_to_the_list_that_names_it_and_the_kernel_is_filled_in():
    k = _k()
    for outcome in Outcome:
        add_kernel(k, Finding(gate=Gate.coverage, outcome=outcome, key="coverage.no_cases"))
    line = "the manifest has no case"
    w = written_kernel(k)
    assert (w.reasons, w.undecided, w.accept_needed, w.notes) == ([line, line], [line], [line], [line])
    assert {f.kernel for f in k.findings} == {"k"} and [f.outcome for f in k.findings] == list(Outcome)


def test_once_keeps_a_line_from_being_added_twice():
    k = _k()
    note = Finding(gate=Gate.resources, outcome=Outcome.note, key="resources.no_nvcc")
    add_kernel(k, note, once=True)
    add_kernel(k, note, once=True)
    assert written_kernel(k).notes == ["resource check skipped: nvcc is not on the PATH"] and len(k.findings) == 1


def test_a_case_finding_names_its_case_and_its_line_does_not():
    c = CaseReport(name="sq", tolerance=0.01, verdict="fail")
    add_case(c, Finding(gate=Gate.run, outcome=Outcome.error, key="run.no_result"))
    assert c.findings[0].case == "sq" and written_case(c).reasons == ["head produced no result"]
    assert render(c.findings[0]) == "sq: head produced no result"


def test_rewriting_a_cases_findings_keeps_the_lines_made_outside_the_gates():
    c = CaseReport(name="sq", tolerance=0.01, verdict="fail", reasons=["artifact refused: too large"])
    add_case(c, Finding(gate=Gate.run, outcome=Outcome.error, key="run.no_result"))
    replace_case_findings(c, [verbatim("replaced", Gate.run, Outcome.fail)])
    assert written_case(c).reasons == ["replaced", "artifact refused: too large"] and c.findings[0].case == "sq"


def test_a_case_line_set_outside_the_gate_is_stated_as_written_not_by_a_finding_it_replaced():
    from bot.config.manifest_tables import Case, Constraints
    from bot.verdict.gate import Policy, case_verdict, kernel_verdict

    c = case_verdict(Case(name="sq"), Constraints(), None, "")  # "not run", then the review says why it failed
    c.verdict, c.reasons, c.findings = "fail", ["head does not build"], []  # its line replaces its finding
    k = kernel_verdict(_k(), [], [c], Constraints(), Policy())
    assert written_kernel(k).reasons == ["sq: head does not build"]
    assert k.findings[-1].params == {"text": "head does not build"}


def test_the_fold_decides_from_the_findings_never_from_their_lines():
    """A kernel's verdict is its findings' outcomes: the lines are what an output shows, and the fold reads none."""
    from bot.config.manifest import Case, Constraints
    from bot.verdict.gate import Policy, case_verdict, kernel_verdict

    ran = case_verdict(Case(name="sq"), Constraints(), None, "")
    for outcome, verdict in ((Outcome.accept, "needs_accept"), (Outcome.undecided, "undecided")):
        k = _k()
        add_kernel(k, Finding(gate=Gate.acceptance, outcome=outcome, key="coverage.no_cases"))
        k.accept_needed, k.undecided = [], []  # an output's lines, emptied: the finding still decides
        assert kernel_verdict(k, [], [ran], Constraints(), Policy()).verdict == verdict
    k = _k()
    add_kernel(k, Finding(gate=Gate.static, outcome=Outcome.fail, key="coverage.no_cases"))
    k.reasons = []
    assert kernel_verdict(k, [], [ran], Constraints(), Policy()).verdict == "fail"


def test_an_agent_cases_reasons_are_its_findings_but_latency_and_plausibility():
    from bot.config.manifest import Case
    from bot.verdict import agent_cases

    c = CaseReport(name="tail", tolerance=0.01, verdict="fail", status="incorrect", base_correct=True)
    add_case(c, Finding(gate=Gate.correctness, outcome=Outcome.fail, key="run.no_result"))
    add_case(c, Finding(gate=Gate.performance, outcome=Outcome.undecided, key="performance.few_samples"))
    judged = agent_cases.judged(Case(name="tail"), c, base_built=True)
    assert judged.verdict == "fail" and written_agent_case(judged).reasons == ["head produced no result"]


def test_the_readers_of_text_take_the_lines_from_the_findings():
    """The CI summary's facts, a tuning trial and bisect's side of a review read the findings' English lines: the
    same with every line emptied (a line made outside the gates still stated, as written)."""
    from bot.mainline.bisect import side
    from bot.review.ci_summary import facts
    from bot.tune.trial import trial_from
    from tests import comment_reports as cr
    from tests.test_comment import _without_lines

    for name in sorted(set(cr.REPORTS) - {"biggest"}):  # biggest adds notes no finding makes
        report = cr.REPORTS[name]()
        bare = report.model_copy(update={"kernels": [_without_lines(k) for k in report.kernels]})
        assert facts(bare) == facts(report), name
        for k, b in zip(report.kernels, bare.kernels, strict=True):
            trial = {"key": "t", "config": {}, "source": "agent", "patch": "", "run_id": "r", "seconds": 1.0}
            assert trial_from(b, **trial) == trial_from(k, **trial), name  # type: ignore[arg-type]
            assert [side(b, c) for c in [None, *b.cases]] == [side(k, c) for c in [None, *k.cases]], name
    made = _k().model_copy(update={"reasons": ["not reviewed"]})
    assert trial_from(made, key="t", config={}, source="agent", patch="", run_id="r", seconds=1.0).reasons == [
        "not reviewed"
    ]
