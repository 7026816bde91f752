"""The agent's review reply (bot/agent/review.py): a fenced JSON object is accepted, anything else is an
AgentOutputError."""

from __future__ import annotations

import pytest

from bot.agent.review import AgentOutputError, parse_review


def test_agent_reply_parsing_accepts_a_fenced_object_and_rejects_the_rest():
    review = parse_review('```json\n{"risk_notes": ["r"], "local_commands": [], "expected_metrics": {}}\n```')
    assert review.risk_notes == ["r"] and review.candidate_patch is None
    with pytest.raises(AgentOutputError, match="not valid JSON"):
        parse_review("no")
    with pytest.raises(AgentOutputError, match="risk_notes"):
        parse_review('{"risk_notes": "one string"}')
