"""The lint rule table (bot/lint/findings.py): every rule described, and docs/lint.md's table is the table."""

from __future__ import annotations

from bot.lint import (
    RULES,
    rules_markdown,
)
from tests.lint_texts import ROOT


def test_every_rule_is_described() -> None:
    table = rules_markdown()
    for rule_id, rule in RULES.items():
        assert f"`{rule_id}`" in table
        assert rule.summary and "\n" not in rule.summary
        assert rule.severity in ("error", "warning", "info")


def test_readme_rule_table_is_the_rule_table() -> None:
    """Every rule, with its severity and summary, is in docs/lint.md's "Lint rules" table as it stands."""
    assert rules_markdown() in (ROOT / "docs" / "lint.md").read_text()
