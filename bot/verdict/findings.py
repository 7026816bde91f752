"""Findings into reports: a gate adds a Finding, and the report's reason lists are rendered from its findings. The
sides' labels (head, base) and a catalog finding from its key, which every gate module makes."""

from __future__ import annotations

from bot.models.finding import Finding, Gate, Outcome, Phrase
from bot.models.report import CaseReport, KernelReport
from bot.wording.messages import render

__all__ = [
    "LISTS",
    "Finding",
    "Gate",
    "Outcome",
    "Phrase",
    "add_case",
    "add_kernel",
    "case_lines",
    "case_stated",
    "lines_of",
    "replace_case_findings",
    "stated",
    "verbatim",
]


def add_case(report: CaseReport, finding: Finding) -> None:
    """The finding on its case (the case is not named again in its line)."""
    report.findings.append(finding.model_copy(update={"case": report.name}))


def replace_case_findings(report: CaseReport, findings: list[Finding]) -> None:
    """The case's findings replaced (a later gate rewrote them: the CPU time decided, a tail added)."""
    report.findings = [f.model_copy(update={"case": report.name}) for f in findings]


def add_kernel(kernel: KernelReport, finding: Finding, *, once: bool = False) -> None:
    """The finding on its kernel. `once`: not again when the kernel has it already, on whatever architecture (a
    launch note, "resources unchanged": said once for every architecture the kernel ships for)."""
    finding = finding.model_copy(update={"kernel": kernel.name})
    anywhere = finding.model_copy(update={"arch": None})
    if once and anywhere in [f.model_copy(update={"arch": None}) for f in kernel.findings]:
        return
    kernel.findings.append(finding)


def verbatim(text: str, gate: Gate, outcome: Outcome, **where: str | int | None) -> Finding:
    """A line made elsewhere that has no message of its own yet (a compile failure's text, a launch error)."""
    return Finding(gate=gate, outcome=outcome, key="text", params={"text": text}, **where)  # type: ignore[arg-type]


# A kernel's line lists in report.json and the outcomes each holds (`reasons`: a failing kernel's, else an erring one's)
LISTS: dict[str, tuple[Outcome, ...]] = {"reasons": (Outcome.fail, Outcome.error), "accept_needed": (Outcome.accept,),
                                          "undecided": (Outcome.undecided,), "notes": (Outcome.note,)}  # fmt: skip


def stated(kernel: KernelReport) -> list[Finding]:
    """What the kernel states, as the findings the outputs render: its findings, then each line none of them was
    rendered to (made outside the gates, or read from an opgate.report/1 report) as a `verbatim` finding of the
    outcome its list names, shown as written. Reading a line back is done here and nowhere else."""
    rendered = {render(f) for f in kernel.findings}
    made = [
        verbatim(line, Gate.review, outcomes[-1] if kernel.verdict == "error" else outcomes[0])
        for name, outcomes in LISTS.items()
        for line in getattr(kernel, name)
        if line not in rendered
    ]
    return [*kernel.findings, *made]


_CASE_OUTCOMES = {"error": Outcome.error, "fail": Outcome.fail, "pass": Outcome.note}


def case_stated(report: CaseReport) -> list[Finding]:
    """What the case states, as findings: its own, then each reason none of them was rendered to (made outside the
    gates, an opgate.report/1 report) as a `verbatim` finding on the case, of its verdict's outcome."""
    outcome = _CASE_OUTCOMES.get(report.verdict, Outcome.undecided)
    rendered = {render(f, case=False) for f in report.findings}
    made = [verbatim(r, Gate.run, outcome, case=report.name) for r in report.reasons if r not in rendered]
    return [*report.findings, *made]


def lines_of(kernel: KernelReport, *outcomes: Outcome) -> list[str]:
    """The kernel's findings of these outcomes as report.json's English lines, for the readers of text (the CI
    summary's facts, tune, bisect)."""
    return [render(f) for f in stated(kernel) if f.outcome in outcomes]


def case_lines(report: CaseReport) -> list[str]:
    """The case's findings as report.json's English lines (its `reasons`)."""
    return [render(f, case=False) for f in case_stated(report)]


HEAD, BASE = "head", "base"


def _finding(gate: Gate, key: str, outcome: Outcome = Outcome.fail, **params: str | int | float) -> Finding:
    return Finding(gate=gate, outcome=outcome, key=key, params=params)
