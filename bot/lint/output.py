"""Lint output: text lines, the summary line, JSON, and the exit code."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Sequence

from bot.lint.findings import SEVERITIES, Finding, Severity
from bot.safe import one_line


def counts(findings: Iterable[Finding]) -> dict[str, int]:
    tally = Counter(f.severity for f in findings)
    return {s: tally.get(s, 0) for s in SEVERITIES}


def format_text(findings: Iterable[Finding]) -> str:
    """One `file:line: RULE message` line per finding (no trailing newline; empty when clean); a file name or
    message that holds a newline, a CR or `::` cannot start a line of its own in a CI log."""
    return "\n".join(one_line(f"{f.path}:{f.line}: {f.rule} {f.message}", limit=2000) for f in findings)


def format_summary(findings: Sequence[Finding]) -> str:
    n = counts(findings)
    return f"opgate lint: {n['error']} error(s), {n['warning']} warning(s), {n['info']} info"


def format_json(findings: Sequence[Finding]) -> str:
    """`{"findings": [...], "counts": {"error": n, "warning": n, "info": n}}`."""
    body = {"findings": [f.model_dump() for f in findings], "counts": counts(findings)}
    return json.dumps(body, indent=2, ensure_ascii=False)


def exit_code(findings: Iterable[Finding], fail_on: Iterable[Severity] = ("error", "warning")) -> int:
    """1 when a finding has a failing severity (by default errors and warnings), else 0."""
    failing = set(fail_on)
    return int(any(f.severity in failing for f in findings))
