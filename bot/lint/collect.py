"""What one linted file yields: its findings, the secrets seen in it, and facts for the cross-file rules."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from bot.lint.findings import LintFinding, Severity, make_finding, scrub
from bot.lint.locate import KeyPath, json_key_lines


@dataclass(frozen=True)
class UrlUse:
    path: str
    line: int
    label: str
    url: str


@dataclass(frozen=True)
class KeyUse:
    path: str
    line: int
    label: str
    variable: str
    owner: str | None  # "domain deepgemm", "Codex", "Claude Code"; None for a task of unknown domain


@dataclass
class Facts:
    urls: list[UrlUse] = field(default_factory=list)
    keys: list[KeyUse] = field(default_factory=list)
    secrets: set[str] = field(default_factory=set)  # to scrub from cross-file messages


@dataclass
class Collector:
    """Filled by one per-kind linter while it reads one file."""

    path: str
    findings: list[LintFinding] = field(default_factory=list)
    secrets: set[str] = field(default_factory=set)
    facts: Facts = field(default_factory=Facts)

    def add(self, line: int, rule: str, message: str, severity: Severity | None = None) -> None:
        self.findings.append(make_finding(self.path, line, rule, message, severity))

    def done(self) -> tuple[list[LintFinding], Facts]:
        """Findings with any secret seen in the file scrubbed from their messages (belt and braces)."""
        self.facts.secrets |= self.secrets
        return scrub(self.findings, self.secrets), self.facts


def parse_json_object(c: Collector, rule: str, text: str, what: str) -> tuple[Any, dict[KeyPath, int]] | None:
    """The JSON object and the line of each key, or None after reporting under `rule` why not."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        c.add(exc.lineno, rule, f"{what} is not valid JSON: {exc.msg} (column {exc.colno})")
        return None
    if not isinstance(data, dict):
        c.add(1, rule, f"{what} must be a JSON object")
        return None
    return data, json_key_lines(text)
