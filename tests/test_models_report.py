"""The review's report (bot/models/report.py): the `agent` block that sums every domain asked."""

from __future__ import annotations

from bot.models.agent_report import AgentReport, aggregate_agents
from bot.models.finding import Phrase
from bot.wording.messages import phrase


def test_no_agent_asked_is_skipped_with_its_reason():
    assert aggregate_agents([]) == AgentReport(status="skipped", reason=Phrase(key="agent.no_kernel_changed"))
    assert phrase(Phrase(key="agent.no_kernel_changed")) == "no kernel changed"


def test_the_sum_of_two_domains_adds_their_tokens_and_keeps_every_note_and_the_first_patch():
    a = AgentReport(status="ok", domain="flashmla", model="m2", requests=2, prompt_tokens=100, completion_tokens=20,
                    total_tokens=120, usage_estimated=1, risk_notes=["a"], candidate_patch="patch a")  # fmt: skip
    b = AgentReport(status="ok", domain="deepgemm", model="m1", requests=1, prompt_tokens=10, completion_tokens=5,
                    total_tokens=15, risk_notes=["b1", "b2"], reason=Phrase.as_written("cached"))  # fmt: skip
    total = aggregate_agents([a, b])
    assert (total.status, total.domain, total.model) == ("ok", "deepgemm,flashmla", "m1,m2")
    assert total.reason is not None and phrase(total.reason) == "cached"
    assert (total.requests, total.prompt_tokens, total.completion_tokens, total.total_tokens) == (3, 110, 25, 135)
    assert total.usage_estimated == 1 and total.risk_notes == ["a", "b1", "b2"] and total.candidate_patch == "patch a"


def test_the_worst_status_wins_error_before_over_budget_before_ok_before_offline():
    def status(*statuses: str) -> str:
        return aggregate_agents([AgentReport(status=s, domain=s) for s in statuses]).status  # type: ignore[arg-type]

    assert status("ok", "error", "over_budget") == "error"
    assert status("offline", "over_budget", "ok") == "over_budget"
    assert status("offline", "ok") == "ok"
    assert status("skipped", "offline") == "offline"
    assert status("skipped") == "skipped"
