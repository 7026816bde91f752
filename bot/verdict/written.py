"""report.json's English lines, written from the findings. A review keeps findings only (`findings.add_kernel`,
`add_case`); the writer of report.json (`bot/review/orchestrate.py` `write`) calls `written` once, and report.json, the
ledger and the review's result hold its lines. A report read back from its JSON writes the same lines again."""

from __future__ import annotations

from bot.models.report import AgentCaseReport, CaseReport, KernelReport, Report
from bot.verdict.agent_cases import stated_reasons
from bot.verdict.findings import LISTS, case_lines, stated
from bot.wording.messages import render


def written(report: Report) -> Report:
    """The report as report.json holds it: each kernel's lists (`reasons`, `undecided`, `accept_needed`, `notes`),
    each case's `reasons` and each agent case's, rendered in English from what it states; a candidate's too."""
    return report.model_copy(update={"kernels": [written_kernel(k) for k in report.kernels]})


def written_kernel(kernel: KernelReport) -> KernelReport:
    """One kernel as report.json holds it (`written`)."""
    found = stated(kernel)
    lines = {name: [render(f) for f in found if f.outcome in outcomes] for name, outcomes in LISTS.items()}
    cases = [written_case(c) for c in kernel.cases]
    candidate = written_kernel(kernel.candidate) if kernel.candidate is not None else None
    block = kernel.agent_cases
    if block is not None:
        block = block.model_copy(update={"cases": [written_agent_case(c) for c in block.cases]})
    return kernel.model_copy(update={**lines, "cases": cases, "candidate": candidate, "agent_cases": block})


def written_case(report: CaseReport) -> CaseReport:
    """One case as report.json holds it: its `reasons` written from what it states."""
    return report.model_copy(update={"reasons": case_lines(report)})


def written_agent_case(c: AgentCaseReport) -> AgentCaseReport:
    """One agent case as report.json holds it: its `reasons` (`agent_cases.stated_reasons`) and its case's."""
    reasons = [render(f, case=False) for f in stated_reasons(c)]
    return c.model_copy(update={"reasons": reasons, "case": written_case(c.case)})
