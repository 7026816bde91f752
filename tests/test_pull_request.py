"""What a pull request has spent and been granted (bot/spend/pull_request.py): the domains its comment lists, each
domain's tokens this review, this pull request and this week, and its acceptances by head."""

from __future__ import annotations

from bot.config.settings import load_settings
from bot.ledger import open_ledger
from bot.models.agent_report import AgentReport
from bot.spend.budget import BudgetState
from bot.spend.pull_request import domain_spend, pr_context, pr_domains, week_budgets
from tests.conftest import REPO_CONFIG
from tests.test_accept import HEAD, OLD, PR, make_report
from tests.test_publish import acceptance, usage


def reviewed(*agents: AgentReport):
    return make_report().model_copy(update={"agents": list(agents)})


def test_the_domains_are_this_reviews_and_this_pull_requests_only() -> None:
    report = reviewed(AgentReport(status="ok", domain="flashmla", requests=1, total_tokens=50))
    rows = [usage("deepgemm", 10), usage("v41_attention", 10, pr=7)]
    assert pr_domains(report, PR, rows) == ["deepgemm", "flashmla"]


def test_each_domain_sums_this_review_this_pull_request_and_the_week() -> None:
    report = reviewed(AgentReport(status="ok", domain="deepgemm", requests=2, total_tokens=300))
    rows = [usage("deepgemm", 100), usage("deepgemm", 200), usage("deepgemm", 5000, pr=7)]
    week = BudgetState(domain="deepgemm", week="2026-W49", limit=10_000, used=5_300, reserved=700)
    [spend] = domain_spend(report, PR, rows, {"deepgemm": week})
    assert (spend.run_requests, spend.run_tokens, spend.pr_requests, spend.pr_tokens) == (2, 300, 2, 300)
    assert (spend.week_budget, spend.week_used) == (10_000, 6_000)
    [unbudgeted] = domain_spend(report, PR, rows)
    assert (unbudgeted.week_budget, unbudgeted.week_used) == (None, None)


def test_acceptances_of_another_pull_request_are_left_out_and_a_push_voids_the_rest() -> None:
    other = acceptance(HEAD).model_copy(update={"pr": 7})
    ctx = pr_context(make_report(), PR, [], [acceptance(OLD), acceptance(HEAD, comment_id=2), other])
    assert [(a.pr, a.head_sha) for a in ctx.accepted] == [(PR, HEAD)]
    assert [(a.pr, a.head_sha) for a in ctx.voided] == [(PR, OLD)]
    assert (ctx.number, ctx.head_sha, ctx.self_accept) == (PR, HEAD, False)


def test_week_budgets_reads_only_configured_domains(tmp_path) -> None:
    settings = load_settings({}, REPO_CONFIG)  # this repository's four domains and their weekly budgets
    ledger = open_ledger(f"sqlite:///{tmp_path / 'l.sqlite'}", create=True)
    try:
        budgets = week_budgets(ledger, settings, ["deepgemm", "nobody"])
    finally:
        ledger.close()
    assert set(budgets) == {"deepgemm"} and budgets["deepgemm"].used == 0
    assert budgets["deepgemm"].limit == settings.budget_weekly.get("deepgemm")
