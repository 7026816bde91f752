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


def test_a_test_matrix_is_parsed_as_proposals_whose_bounds_base_checks_later():
    reply = (
        '{"risk_notes": [], "test_matrix": [{"name": "tail_15", "shape": {"m": 47, "n": 16}}, '
        '{"name": "odd", "shape": {"m": 5000}, "tolerance": 1.0}]}'
    )
    review = parse_review(reply)
    first, second = review.test_matrix
    assert (first.name, first.shape, first.params) == ("tail_15", {"m": 47, "n": 16}, {})
    assert second.model_extra == {"tolerance": 1.0}  # kept, so the refusal can name it (bot/verdict/agent_cases.py)
    assert parse_review('{"risk_notes": []}').test_matrix == []


@pytest.mark.parametrize(
    ("matrix", "error"),
    [
        ('{"name": "a"}', "test_matrix: Input should be a valid list"),
        ('[{"shape": {"m": 1}}]', "test_matrix.0.name: Field required"),
        ('[{"name": "a", "shape": [47, 16]}]', "test_matrix.0.shape: Input should be a valid dictionary"),
        ("[" + ", ".join(['{"name": "a"}'] * 31) + "]", "test_matrix: List should have at most 30 items"),
    ],
)
def test_a_test_matrix_of_the_wrong_form_is_an_output_error_to_repair(matrix, error):
    with pytest.raises(AgentOutputError, match="reply field " + error.split(":")[0]) as exc:
        parse_review('{"test_matrix": ' + matrix + "}")
    assert error.split(": ", 1)[1] in str(exc.value)
