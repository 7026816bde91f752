"""What one linted file yields (bot/lint/collect.py): findings with every secret seen in the file scrubbed from
their messages, the secrets handed on to the cross-file rules, and a JSON file that is not an object reported at
its line."""

from __future__ import annotations

from bot.lint.collect import Collector, parse_json_object
from tests.lint_texts import CANARY


def test_a_secret_seen_in_the_file_is_scrubbed_from_every_message() -> None:
    c = Collector("agent_task.json")
    c.secrets.add(CANARY)
    c.add(4, "TASK001", f"provider.api_key_env {CANARY!r} is not a variable name")
    c.add(9, "URL001", "base_url carries a query string", "warning")
    findings, facts = c.done()
    assert [(f.path, f.line, f.rule, f.severity) for f in findings] == [
        ("agent_task.json", 4, "TASK001", "error"),
        ("agent_task.json", 9, "URL001", "warning"),
    ]
    assert CANARY not in findings[0].message and CANARY[:12] not in findings[0].message
    assert findings[0].message.startswith("provider.api_key_env ")
    assert facts.secrets == {CANARY}  # the cross-file rules scrub it from their messages too


def test_json_that_is_not_an_object_is_reported_at_its_line() -> None:
    c = Collector(".claude/settings.json")
    assert parse_json_object(c, "CLAUDE001", '{\n  "env": {\n    "A": 1,\n  }\n}\n', "settings.json") is None
    [broken] = c.findings
    assert (broken.line, broken.rule) == (4, "CLAUDE001")
    assert broken.message.startswith("settings.json is not valid JSON: ") and "(column " in broken.message
    c = Collector("x.json")
    assert parse_json_object(c, "CLAUDE001", '["a"]', "settings.json") is None
    assert [(f.line, f.message) for f in c.findings] == [(1, "settings.json must be a JSON object")]
    data, lines = parse_json_object(Collector("y.json"), "CLAUDE001", '{\n  "env": {}\n}', "settings.json") or ({}, {})
    assert data == {"env": {}} and lines[("env",)] == 2
