"""Is the spend buying anything: per domain and week, how often the agent's expectations held and how often what
it proposed passed locally, and the users' rule to stop the agent (pure: ledger rows in, models out)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import TypeVar

from pydantic import BaseModel

from bot.models.ledger import ExpectationRow, ProposalRow
from bot.spend.budget import iso_week
from bot.text.i18n import N_

R = TypeVar("R", ExpectationRow, ProposalRow)
STOP_TEXT = N_("stop the agent and have a person look at the search space")  # the summary shows it translated


class Rate(BaseModel):
    """Hits out of the judged; `rate` None when nothing was judged."""

    hits: int = 0
    judged: int = 0

    @property
    def rate(self) -> float | None:
        return self.hits / self.judged if self.judged else None

    def text(self) -> str:
        return "—" if self.rate is None else f"{100.0 * self.rate:.0f}% ({self.hits}/{self.judged})"


class DomainPayoff(BaseModel):
    """One domain's week against the week before: expectations inside the measured interval (of those measured),
    the local pass rate of what the agent proposed, and whether the users' stop rule applies."""

    domain: str
    label: str
    total: int
    budget: int
    expectations: Rate
    expectations_before: Rate
    not_measured: int = 0
    passes: Rate
    passes_before: Rate
    by_kind: dict[str, Rate]
    over_budget: bool
    improving: bool
    stop: bool

    @property
    def stop_text(self) -> str:
        return STOP_TEXT if self.stop else ""


def _when(row_time: str) -> datetime:
    when = datetime.fromisoformat(row_time)
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def _of(rows: list[R], domain: str, week: str) -> list[R]:
    return [r for r in rows if r.domain == domain and iso_week(_when(r.created_at)) == week]


def _rate(hits: Iterable[bool]) -> Rate:
    values = list(hits)
    return Rate(hits=sum(values), judged=len(values))


def improving(now: Rate, before: Rate) -> bool:
    """The pass rate improved: this week judged something and passed more often than the week before (a week before
    with nothing judged counts as 0 %). A week with nothing judged is not an improvement."""
    if now.rate is None:
        return False
    return now.rate > (before.rate or 0.0)


def payoff(
    expectations: Iterable[ExpectationRow],
    proposals: Iterable[ProposalRow],
    totals: Mapping[str, int],
    budgets: Mapping[str, int],
    week: str,
    previous: str,
    *,
    labels: Mapping[str, str] | None = None,
) -> list[DomainPayoff]:
    """Per domain of `totals` (the week's tokens, in the summary's order): this week's and `previous` week's hit
    rate and pass rate, and `stop` when the week's tokens exceed its budget while the pass rate does not improve."""
    exp = list(expectations)
    props = list(proposals)
    out = []
    for domain, total in totals.items():
        now_exp, before_exp = _of(exp, domain, week), _of(exp, domain, previous)
        now_props, before_props = _of(props, domain, week), _of(props, domain, previous)
        passes = _rate(p.passed for p in now_props)
        passes_before = _rate(p.passed for p in before_props)
        budget = int(budgets.get(domain, 0))
        over = bool(budget) and total > budget
        better = improving(passes, passes_before)
        kinds = sorted({p.kind for p in now_props})
        out.append(
            DomainPayoff(
                domain=domain,
                label=(labels or {}).get(domain) or domain,
                total=total,
                budget=budget,
                expectations=_rate(r.outcome == "inside" for r in now_exp if r.outcome != "not_measured"),
                expectations_before=_rate(r.outcome == "inside" for r in before_exp if r.outcome != "not_measured"),
                not_measured=sum(1 for r in now_exp if r.outcome == "not_measured"),
                passes=passes,
                passes_before=passes_before,
                by_kind={k: _rate(p.passed for p in now_props if p.kind == k) for k in kinds},
                over_budget=over,
                improving=better,
                stop=over and not better,
            )
        )
    return out
