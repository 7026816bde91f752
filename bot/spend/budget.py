"""Weekly token budgets per domain, enforced before spend: the pure allowance and the reserve/settle edge.

Before a gateway call the caller reserves the prompt estimate (times a margin) plus `max_tokens`
inside one transaction that locks the domain's budget row for the week (SQLite `BEGIN IMMEDIATE`,
PostgreSQL `SELECT … FOR UPDATE`); the allowance is decided from the tokens already spent this week
(the domain's `operator_agent_usage` rows) plus those still reserved, so concurrent reviewers cannot
overshoot together. The call's usage rows are written before its reservation settles (to the reported
usage) or is released (after a failure), so a spend is never invisible to the next reserver: at worst
it is counted twice for a moment. A reservation left open by a crashed process stops counting after
RESERVATION_TTL_S.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta

from pydantic import BaseModel, ConfigDict

from bot.ledger import Ledger
from bot.models.finding import Param, Phrase
from bot.models.ledger import ReservationRow

RESERVATION_TTL_S = 3600.0
MIN_MARGIN = 1.2  # prompt estimate × this, at least: cl100k is not the gateway model's tokenizer
MAX_MARGIN = 3.0


class BudgetState(BaseModel):
    """One domain's budget for one ISO week, as the ledger holds it now."""

    model_config = ConfigDict(frozen=True)

    domain: str
    week: str
    limit: int
    used: int  # settled tokens
    reserved: int  # tokens held by open reservations

    @property
    def left(self) -> int:
        return self.limit - self.used - self.reserved

    @property
    def pct_used(self) -> float:
        return 100.0 * self.used / self.limit if self.limit else 0.0


class Allowance(BaseModel):
    """The answer to "may this request spend `requested` tokens?"."""

    model_config = ConfigDict(frozen=True)

    allowed: bool
    state: BudgetState
    requested: int
    reason: str
    why: Phrase | None = None  # `reason` as a message of the catalog (bot/wording/messages.py), when refused
    call_id: str | None = None  # the reservation to settle or release, when allowed


# -- pure ------------------------------------------------------------------------------------


def iso_week(when: datetime) -> str:
    year, week, _ = when.astimezone(UTC).isocalendar()
    return f"{year}-W{week:02d}"


def week_start(week: str) -> datetime:
    """Monday 00:00 UTC of an ISO week "YYYY-Www" (ValueError on anything else)."""
    year, _, number = week.partition("-W")
    if not (year.isdigit() and number.isdigit() and len(number) == 2):
        raise ValueError(f"not an ISO week (YYYY-Www): {week!r}")
    return datetime.fromisocalendar(int(year), int(number), 1).replace(tzinfo=UTC)


def week_end(week: str) -> datetime:
    return week_start(week) + timedelta(days=7)


def reservation_size(estimated_prompt: int, max_tokens: int, ratios: Iterable[float] = ()) -> int:
    """Tokens to hold for one request: the prompt estimate scaled by the worst recent
    reported÷estimated ratio (within [MIN_MARGIN, MAX_MARGIN]), plus the completion cap."""
    margin = min(MAX_MARGIN, max([MIN_MARGIN, *ratios]))
    return math.ceil(estimated_prompt * margin) + max_tokens


def tally(
    rows: Iterable[ReservationRow], *, spent: int, domain: str, week: str, limit: int, now: datetime, ttl_s: float
) -> BudgetState:
    """`spent` tokens plus the domain's open reservations for the week (open ones older than ttl expire)."""
    cutoff = (now - timedelta(seconds=ttl_s)).isoformat(timespec="seconds")
    reserved = sum(
        row.reserved_tokens
        for row in rows
        if row.domain == domain and row.week == week and row.state == "reserved" and row.created_at >= cutoff
    )
    return BudgetState(domain=domain, week=week, limit=limit, used=spent, reserved=reserved)


def week_bounds(week: str) -> tuple[str, str]:
    """The ISO timestamps [start, end) of a week, as the ledger stores created_at."""
    return week_start(week).isoformat(timespec="seconds"), week_end(week).isoformat(timespec="seconds")


def check(state: BudgetState, requested: int) -> Allowance:
    """Allowed when the request fits in what is neither settled nor reserved this week."""
    if requested <= state.left:
        return Allowance(allowed=True, state=state, requested=requested, reason="")
    reason = (
        f"weekly token budget of {state.domain} for {state.week} is exhausted: {state.used} used + "
        f"{state.reserved} reserved of {state.limit}; this request needs up to {requested}"
    )
    params: dict[str, Param] = {"domain": state.domain, "week": state.week, "used": state.used,
                                "reserved": state.reserved, "limit": state.limit, "requested": requested}  # fmt: skip
    why = Phrase(key="budget.exhausted", params=params)
    return Allowance(allowed=False, state=state, requested=requested, reason=reason, why=why)


# -- against the ledger ---------------------------------------------------------------------


def reserve(
    ledger: Ledger,
    *,
    domain: str,
    limit: int,
    tokens: int,
    now: datetime | None = None,
    ttl_s: float = RESERVATION_TTL_S,
    call_id: str | None = None,
) -> Allowance:
    """Decide and, when allowed, hold `tokens` against the domain's weekly budget, atomically."""
    when = now or datetime.now(UTC)
    week = iso_week(when)
    with ledger.db.transaction() as tx:
        ledger.lock_budget(tx, domain, week, limit)
        rows = ledger.reservations(week=week, domain=domain, tx=tx)
        spent = ledger.spent(domain, *week_bounds(week), tx=tx)
        current = tally(rows, spent=spent, domain=domain, week=week, limit=limit, now=when, ttl_s=ttl_s)
        allowance = check(current, tokens)
        if not allowance.allowed:
            return allowance
        stamp = when.isoformat(timespec="seconds")
        row = ReservationRow(
            call_id=call_id or f"call-{uuid.uuid4().hex}",
            domain=domain,
            week=week,
            reserved_tokens=tokens,
            state="reserved",
            created_at=stamp,
            updated_at=stamp,
        )
        ledger.add_reservation(tx, row)
    return allowance.model_copy(update={"call_id": row.call_id})


def settle(ledger: Ledger, call_id: str, tokens: int) -> bool:
    """The call is answered and its usage rows are written: the reservation closes (kept for audit)."""
    return ledger.close_reservation(call_id, "settled", max(0, tokens))


def release(ledger: Ledger, call_id: str) -> bool:
    """The call spent nothing (it failed before an answer): its reservation is given back."""
    return ledger.close_reservation(call_id, "released", 0)


def state(
    ledger: Ledger, *, domain: str, limit: int, now: datetime | None = None, ttl_s: float = RESERVATION_TTL_S
) -> BudgetState:
    """This week's state of one domain (read only)."""
    when = now or datetime.now(UTC)
    week = iso_week(when)
    rows = ledger.reservations(week=week, domain=domain)
    spent = ledger.spent(domain, *week_bounds(week))
    return tally(rows, spent=spent, domain=domain, week=week, limit=limit, now=when, ttl_s=ttl_s)
