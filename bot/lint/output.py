"""Lint output: text lines, the summary line, JSON, and the exit code."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

from pydantic import BaseModel

from bot.lint.findings import SEVERITIES, LintFinding, Severity
from bot.text.safe import one_line


def counts(findings: Iterable[LintFinding]) -> dict[str, int]:
    tally = Counter(f.severity for f in findings)
    return {s: tally.get(s, 0) for s in SEVERITIES}


def where(f: LintFinding) -> str:
    """`file:line`, `file:line: entry` for an entry of a JSON store, `file: entry` for a database row."""
    place = f.path if f.line is None else f"{f.path}:{f.line}"
    return f"{place}: {f.entry}" if f.entry else place


def ordered(findings: Iterable[LintFinding]) -> list[LintFinding]:
    """By file, line (a database row first), store entry, rule and message."""
    return sorted(findings, key=lambda f: (f.path, f.line or 0, f.entry or "", f.rule, f.message))


def format_text(findings: Iterable[LintFinding]) -> str:
    """One `file:line: RULE message` line per finding (no trailing newline; empty when clean); a file name or
    message that holds a newline, a CR or `::` cannot start a line of its own in a CI log."""
    return "\n".join(one_line(f"{where(f)}: {f.rule} {f.message}", limit=2000) for f in findings)


def format_summary(findings: Sequence[LintFinding]) -> str:
    n = counts(findings)
    return f"opgate lint: {n['error']} error(s), {n['warning']} warning(s), {n['info']} info"


class LintOutput(BaseModel):
    """`opgate lint --json`: the findings and their counts per severity."""

    findings: list[LintFinding]
    counts: dict[str, int]


def format_json(findings: Sequence[LintFinding]) -> str:
    """`{"findings": [...], "counts": {"error": n, "warning": n, "info": n}}`."""
    return LintOutput(findings=list(findings), counts=counts(findings)).model_dump_json(indent=2)


def exit_code(findings: Iterable[LintFinding], fail_on: Iterable[Severity] = ("error",)) -> int:
    """1 when a finding has a failing severity (errors; with `--strict` also warnings), else 0."""
    failing = set(fail_on)
    return int(any(f.severity in failing for f in findings))
