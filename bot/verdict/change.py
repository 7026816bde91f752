"""What the review found of a kernel's change before the gates ran, as findings: an invalid manifest, a new,
renamed, copied or removed kernel, the change's size, base's rules it touched; and a kernel it could not judge."""

from __future__ import annotations

from bot.models.evidence import KernelEvidence
from bot.models.finding import Finding, Gate, Outcome
from bot.models.report import KernelReport
from bot.verdict.findings import add_kernel


def _finding(gate: Gate, key: str, outcome: Outcome, file: str | None = None, **params: str | int | float) -> Finding:
    return Finding(gate=gate, outcome=outcome, key=key, params=params, file=file)


def invalid(error: str) -> Finding:
    """Head's kernel.toml (or what it names) could not be read: the kernel fails, with the loader's error."""
    return _finding(Gate.manifest, "manifest.invalid", Outcome.fail, error=error)


def new_kernel() -> Finding:
    """A kernel base has not: its reference was written in the same change, so only a person can accept it."""
    return _finding(Gate.acceptance, "acceptance.new_kernel", Outcome.accept)


def change_notes(ev: KernelEvidence) -> list[Finding]:
    """The notes the comment states about the change, in this order: where the kernel went (removed, renamed),
    the change's size (what reverting it undoes), where a kernel new by name came from, the files of base's
    rules it changed (base's still hold), and that another job gates it."""
    notes: list[Finding] = []
    if ev.renamed_to:
        notes.append(_finding(Gate.review, "review.renamed_to", Outcome.note, kernel=ev.renamed_to))
    elif ev.removed:
        notes.append(_finding(Gate.review, "review.removed", Outcome.note))
    if ev.diff is not None:
        d = ev.diff
        notes.append(
            _finding(Gate.review, "review.change_size", Outcome.note, files=d.files, added=d.added, removed=d.removed)
        )
    if ev.origin is not None:
        key = "review.renamed_from" if ev.origin.how == "renamed" else "review.copied_from"
        notes.append(_finding(Gate.review, key, Outcome.note, base=ev.origin.base, share=f"{ev.origin.share:.0%}"))
    for path in ev.rules_changed:
        notes.append(_finding(Gate.review, "review.rules_changed", Outcome.note, file=path, path=path))
    if ev.gated_elsewhere:
        notes.append(_finding(Gate.review, "review.gated_elsewhere", Outcome.note))
    return notes


def other_job(arch: str) -> Finding:
    """A case this fan-out job leaves to the job of architecture family `arch` (a skipped case's reason)."""
    return _finding(Gate.run, "run.other_job", Outcome.undecided, arch=arch)


def candidate_not_tried(report: KernelReport, why: str) -> None:
    """--try-candidates: the agent's patch could not be applied (a note; the kernel's verdict stands)."""
    add_kernel(report, _finding(Gate.review, "review.candidate_not_tried", Outcome.note, why=why))


def lost_part(kernel: str, part: str, error: str = "") -> KernelReport:
    """A kernel whose fan-out job left no report (crashed, cancelled, timed out) or none that reads: an error."""
    report = KernelReport(name=kernel, domain="unknown", changed=True, verdict="error")
    if error:
        add_kernel(report, _finding(Gate.run, "run.part_unreadable", Outcome.error, part=part, error=error))
    else:
        add_kernel(report, _finding(Gate.run, "run.part_missing", Outcome.error, part=part))
    return report


def review_failed(kernel: str, error: str, kind: str = "") -> KernelReport:
    """The kernel of a review that stopped (bad input, an outside service, or opgate's own internal `kind` of
    error): an error, with why."""
    report = KernelReport(name=kernel, domain="unknown", changed=True, verdict="error")
    if kind:
        add_kernel(report, _finding(Gate.run, "run.internal_error", Outcome.error, kind=kind, error=error))
    else:
        add_kernel(report, _finding(Gate.run, "run.review_failed", Outcome.error, error=error))
    return report
