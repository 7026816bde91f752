"""What a pull request has spent and been granted so far, for its comment: each domain's agent tokens (this review,
the whole pull request, the week's budget) and its acceptances still valid or voided (pure, but `week_budgets`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pydantic import BaseModel, ConfigDict

from bot.config.settings import Settings
from bot.ledger import Ledger
from bot.models.ledger import AcceptanceRow, UsageRow
from bot.models.report import Report
from bot.spend.budget import BudgetState, state


class DomainSpend(BaseModel):
    """Agent tokens of one domain: this review, the whole pull request so far, and the weekly budget."""

    model_config = ConfigDict(frozen=True)

    domain: str
    run_requests: int = 0
    run_tokens: int = 0
    pr_requests: int = 0
    pr_tokens: int = 0
    week_budget: int | None = None  # the domain's weekly budget (settings); None renders as "—"
    week_used: int | None = None  # settled + reserved this ISO week, every PR (bot.spend.budget.state)


class PrContext(BaseModel):
    """What the comment says about the pull request beyond this review: acceptances and spend so far."""

    model_config = ConfigDict(frozen=True)

    number: int
    head_sha: str
    accepted: list[AcceptanceRow] = []  # granted for this head: still valid
    voided: list[AcceptanceRow] = []  # granted for an earlier head: voided by a later push
    spend: list[DomainSpend] = []
    self_accept: bool = False  # the configuration's allow_self_accept: authors and pushers may /accept (a weakening)


def pr_domains(report: Report, pr: int, usage: Sequence[UsageRow]) -> list[str]:
    """The domains this review asked or the pull request spent tokens in, sorted."""
    return sorted({a.domain for a in report.agents if a.domain} | {u.domain for u in usage if u.pr == pr})


def domain_spend(
    report: Report, pr: int, usage: Sequence[UsageRow], budgets: Mapping[str, BudgetState] | None = None
) -> list[DomainSpend]:
    """Each domain's tokens: this review's (its agent reports), the pull request's (its ledger rows), the week's."""
    rows = [u for u in usage if u.pr == pr]
    spend = []
    for domain in pr_domains(report, pr, rows):
        run = [a for a in report.agents if a.domain == domain]
        pr_rows = [u for u in rows if u.domain == domain]
        week = (budgets or {}).get(domain)
        spend.append(
            DomainSpend(
                domain=domain,
                run_requests=sum(a.requests for a in run),
                run_tokens=sum(a.total_tokens for a in run),
                pr_requests=len(pr_rows),
                pr_tokens=sum(u.total_tokens for u in pr_rows),
                week_budget=week.limit if week else None,
                week_used=week.used + week.reserved if week else None,
            )
        )
    return spend


def pr_context(
    report: Report,
    pr: int,
    usage: Sequence[UsageRow],
    acceptances: Sequence[AcceptanceRow],
    budgets: Mapping[str, BudgetState] | None = None,
    *,
    self_accept: bool = False,
) -> PrContext:
    """The pull request's acceptances (this head's, and those a later push voided) and its spend per domain."""
    mine = [a for a in acceptances if a.pr == pr]
    return PrContext(
        number=pr,
        head_sha=report.head_sha,
        accepted=[a for a in mine if a.head_sha == report.head_sha],
        voided=[a for a in mine if a.head_sha != report.head_sha],
        spend=domain_spend(report, pr, usage, budgets),
        self_accept=self_accept,
    )


def week_budgets(ledger: Ledger, settings: Settings, domains: Sequence[str]) -> dict[str, BudgetState]:
    """This ISO week's budget state of each configured domain among `domains` (read only)."""
    known = [d for d in domains if d in settings.domains]
    return {d: state(ledger, domain=d, limit=settings.budget_weekly.get(d)) for d in known}
