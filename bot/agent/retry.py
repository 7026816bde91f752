"""Which gateway failures are retried, and how long to wait (pure: no clock, no sleep, no HTTP)."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from bot.agent.wire import error_code, error_message

RETRY_STATUSES = frozenset({429, 500, 502, 503, 504, 529})
AUTH_STATUSES = frozenset({401, 403})

# A 429 that means "no money left", not "slow down": retrying cannot help, so it fails at once.
_QUOTA_CODE = re.compile(r"quota|budget|billing|balance|credit|spend", re.IGNORECASE)
_QUOTA_MESSAGE = re.compile(
    r"exceeded your current quota|quota (?:exceeded|exhausted|reached)|insufficient[ _](?:quota|balance|credit)"
    r"|budget (?:has been )?exceeded|exceeded (?:the |your )?budget|spend(?:ing)?[ _]limit"
    r"|credit balance is too low|hard[ _]limit",
    re.IGNORECASE,
)


class Failure(StrEnum):
    rate_limited = "rate_limited"
    server_error = "server_error"
    timeout = "timeout"
    quota = "quota"
    auth = "auth"
    unreachable = "unreachable"
    http_error = "http_error"
    bad_reply = "bad_reply"


RETRYABLE = frozenset({Failure.rate_limited, Failure.server_error, Failure.timeout})


class RetryPolicy(BaseModel):
    """`retries` further attempts after the first; the n-th waits base·2^(n-1) (capped) times a jitter
    factor in [0.5, 1], or the gateway's Retry-After when that is longer. A Retry-After beyond
    `max_retry_after_s` is not waited for: the call fails and says so."""

    model_config = ConfigDict(frozen=True)

    retries: int = Field(4, ge=0, le=10)
    base_s: float = Field(1.0, ge=0)
    max_backoff_s: float = Field(30.0, ge=0)
    max_retry_after_s: float = Field(120.0, ge=0)


def is_quota(status: int, payload: Any) -> bool:
    """A spend or quota limit (OpenAI `insufficient_quota`, a gateway's budget), on any 4xx."""
    if status == 402:
        return True
    return bool(_QUOTA_CODE.search(error_code(payload)) or _QUOTA_MESSAGE.search(error_message(payload)))


def classify(status: int, payload: Any) -> Failure:
    """What an HTTP error status (with its parsed JSON body, or None) means for the caller."""
    if 400 <= status < 500 and is_quota(status, payload):
        return Failure.quota
    if status in AUTH_STATUSES:
        return Failure.auth
    if status == 429:
        return Failure.rate_limited
    if status in RETRY_STATUSES:
        return Failure.server_error
    return Failure.http_error


def retry_after(headers: Any, now: datetime | None = None) -> float | None:
    """Seconds the gateway asked us to wait: `retry-after-ms`, or `Retry-After` (seconds or HTTP date)."""
    if not headers:
        return None
    lower = {str(k).lower(): str(v) for k, v in headers.items()}
    if "retry-after-ms" in lower:
        try:
            return max(0.0, float(lower["retry-after-ms"]) / 1000)
        except ValueError:
            pass
    value = lower.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


def backoff(attempt: int, policy: RetryPolicy, jitter: float, asked: float | None) -> float:
    """Seconds before retry number `attempt` (1-based); `jitter` in [0, 1) from the caller's RNG."""
    delay = min(policy.max_backoff_s, policy.base_s * 2 ** (attempt - 1)) * (0.5 + jitter / 2)
    return max(delay, asked) if asked is not None else delay
