"""`opgate lint`'s output (bot/lint/output.py): JSON that parses, the text format, the summary line, the exit code."""

from __future__ import annotations

import json

from bot.lint import (
    exit_code,
    format_json,
    format_summary,
    format_text,
    lint_task,
)
from tests.lint_texts import task_text


def test_json_output_parses_and_text_format() -> None:
    findings = lint_task("kernels/a/agent_task.json", task_text(base_url="https://taotoken.net/api?utm_x=1"))
    body = json.loads(format_json(findings))
    assert body["counts"] == {"error": 1, "warning": 0, "info": 0}
    assert body["findings"][0] == {
        "path": "kernels/a/agent_task.json",
        "line": 4,
        "rule": "URL001",
        "message": findings[0].message,
        "severity": "error",
        "entry": None,
    }
    assert format_text(findings).startswith("kernels/a/agent_task.json:4: URL001 provider.base_url")
    assert json.loads(format_json([])) == {"findings": [], "counts": {"error": 0, "warning": 0, "info": 0}}
    assert format_text([]) == ""
    assert "1 error(s)" in format_summary(findings)
    assert exit_code(findings) == 1
