"""GitHub's documented rate-limit rules: which answer is a limit, and how long to wait before asking again (pure).

From docs.github.com, "Rate limits for the REST API" (Exceeding the rate limit) and "Best practices for using
the REST API" (Handle rate limit errors appropriately):

- primary limit: a 403 or 429 with `x-ratelimit-remaining: 0`; do not retry until after `x-ratelimit-reset`
  (UTC epoch seconds);
- secondary limit: a 403 or 429 whose message says so; with `retry-after`, wait that many seconds; with
  `x-ratelimit-remaining: 0`, wait until `x-ratelimit-reset`; otherwise wait at least one minute, and
  exponentially longer while it keeps failing, then give up after a set number of retries.

Continuing to ask while limited may get an integration banned, so a wait is never cut short: a wait that would
take the operation past its bound is not started, and the error names the limit and the wait instead.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

SECONDARY_MIN_S = 60.0  # "wait for at least one minute before retrying"
RESET_MARGIN_S = 1.0  # "until after the time specified by x-ratelimit-reset": one second past it

LimitKind = Literal["primary", "secondary"]

_SECONDARY_WORDS = ("secondary rate limit", "abuse detection", "please wait a few minutes", "retry your request again")


class Wait(BaseModel):
    """How long to wait before the next attempt, and why, in words for the log and the error."""

    model_config = ConfigDict(frozen=True)

    seconds: float
    reason: str  # e.g. "GitHub's primary rate limit (x-ratelimit-reset 12:49:00 UTC)"


def _lower(headers: Mapping[str, Any] | None) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in (headers or {}).items()}


def _number(value: str | None) -> float | None:
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def retry_after(headers: Mapping[str, Any] | None) -> float | None:
    """The `retry-after` header in seconds (GitHub sends whole seconds), or None."""
    value = _number(_lower(headers).get("retry-after"))
    return max(0.0, value) if value is not None else None


def limit_kind(status: int | None, headers: Mapping[str, Any] | None, message: str) -> LimitKind | None:
    """Which rate limit a 403/429 answer reports; None when it reports none (a 403 of permissions, say).

    `x-ratelimit-remaining: 0` is the primary limit; a message naming a secondary limit, a `retry-after`
    header, or a 429 without either is the secondary limit."""
    if status not in (403, 429):
        return None
    lower = _lower(headers)
    text = message.lower()
    if any(word in text for word in _SECONDARY_WORDS):
        return "secondary"
    if lower.get("x-ratelimit-remaining", "").strip() == "0" or text.startswith("api rate limit exceeded"):
        return "primary"
    if "retry-after" in lower or status == 429:
        return "secondary"
    return None


def _clock(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%H:%M:%S UTC")


def limit_wait(kind: LimitKind, headers: Mapping[str, Any] | None, now: float, secondary_seen: int) -> Wait:
    """The documented wait for a rate-limit answer; `secondary_seen` counts the secondary-limit answers of
    this operation so far, this one included (1 for the first)."""
    lower = _lower(headers)
    asked = retry_after(headers)
    reset = _number(lower.get("x-ratelimit-reset"))
    exhausted = lower.get("x-ratelimit-remaining", "").strip() == "0"
    name = f"GitHub's {kind} rate limit"
    waits: list[tuple[float, str]] = []
    if asked is not None:
        waits.append((asked, f"Retry-After {asked:g} s"))
    if exhausted and reset is not None:
        waits.append((max(0.0, reset - now) + RESET_MARGIN_S, f"x-ratelimit-reset {_clock(reset)}"))
    if waits:
        seconds, why = max(waits)
        return Wait(seconds=seconds, reason=f"{name} ({why})")
    seconds = SECONDARY_MIN_S * 2 ** max(0, secondary_seen - 1)
    missing = "no Retry-After" if kind == "secondary" else "no x-ratelimit-reset"
    return Wait(seconds=seconds, reason=f"{name} ({missing}: {seconds:g} s, from {SECONDARY_MIN_S:g} s doubling)")


__all__ = ["RESET_MARGIN_S", "SECONDARY_MIN_S", "LimitKind", "Wait", "limit_kind", "limit_wait", "retry_after"]
