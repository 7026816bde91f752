"""The agent's reply to a CI summary (bot/agent/ci_summary_reply.py): what it states; the largest fits a comment."""

from __future__ import annotations

import json
import re

import pytest

from bot.agent import ci_summary_reply as limits
from bot.agent.ci_summary_reply import parse_ci_summary
from bot.agent.review import AgentOutputError
from bot.models.agent_report import AgentReport, CiSummary, CiSummaryCause
from bot.present.render import COMMENT_LIMIT, render_comment
from bot.review import ci_summary as summary
from tests import comment_reports as cr
from tests.ci_summary_world import failing, reply_for
from tests.comment_checks import structure_problems


def test_the_reply_must_state_every_changed_kernels_verdict_and_name_only_its_cases():
    facts = summary.facts(failing())
    good = reply_for(failing())
    assert parse_ci_summary("```json\n" + json.dumps(good) + "\n```", facts).verdicts == {
        "v41_attention_splitk": "fail"
    }
    for bad, why in [
        ({**good, "verdicts": {}}, "no verdict for v41_attention_splitk"),
        ({**good, "verdicts": {"v41_attention_splitk": "fail", "other": "pass"}}, "other is not a changed kernel"),
        ({**good, "verdicts": {"v41_attention_splitk": "fine"}}, "reply field verdicts.v41_attention_splitk"),
        ({**good, "likely_cause": [{"kernel": "nope", "cases": [], "text": "t"}]}, "nope is not a changed kernel"),
        ({**good, "summary": "x" * 1001}, "reply field summary"),
        ({**good, "look_next": ["a"] * 6}, "reply field look_next"),
    ]:
        with pytest.raises(AgentOutputError, match=re.escape(why)):
            parse_ci_summary(json.dumps(bad), facts)


def test_the_biggest_review_with_the_largest_summary_a_reply_may_hold_fits_in_one_comment():
    r = cr.biggest()
    names = [k.name for k in r.kernels if k.changed]
    item = "w" * limits.MAX_ITEM_CHARS
    s = CiSummary(
        agent=AgentReport(status="ok", domain="ci_summary", model="deepseek-v4", requests=2, total_tokens=9_000),
        summary="s" * limits.MAX_SUMMARY_CHARS,
        likely_cause=[CiSummaryCause(kernel=names[0], cases=["c" * 60] * limits.MAX_CASES, text=item)]
        * limits.MAX_ITEMS,
        look_next=[item] * limits.MAX_ITEMS,
        cannot_tell=[item] * limits.MAX_ITEMS,
        contradictions=[f"it calls {n} pass; the gates measured fail" for n in names],
    )
    full = r.model_copy(update={"ci_summary": s})
    out = render_comment(full, pr=cr.pr_for(full))
    assert len(out) < COMMENT_LIMIT and structure_problems(out, full) == []
    assert "### Summary (agent, not gating)" in out and "the gates measured fail" in out
