"""Retry rules (bot/agent/retry.py): which failures are retried (a quota 429 is not a rate limit), Retry-After in
seconds, milliseconds or as a date, and a backoff that doubles with jitter, caps, and never undercuts Retry-After."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest

from bot.agent.retry import Failure, RetryPolicy, backoff, classify, retry_after
from tests.gateway import QUOTA_429, RATE_429


@pytest.mark.parametrize(
    ("status", "body", "expected"),
    [
        (429, RATE_429, Failure.rate_limited),
        (429, QUOTA_429, Failure.quota),
        (429, {"error": {"type": "budget_exceeded", "message": "x"}}, Failure.quota),
        (402, None, Failure.quota),
        (400, {"error": {"message": "Your credit balance is too low to access the API"}}, Failure.quota),
        (401, None, Failure.auth),
        (403, {"error": {"code": "forbidden"}}, Failure.auth),
        (500, None, Failure.server_error),
        (502, None, Failure.server_error),
        (503, None, Failure.server_error),
        (529, {"type": "error", "error": {"type": "overloaded_error"}}, Failure.server_error),
        (400, {"error": {"code": "invalid_request"}}, Failure.http_error),
        (501, None, Failure.http_error),
    ],
)
def test_failures_are_classified_and_a_quota_429_is_not_a_rate_limit(status, body, expected):
    assert classify(status, body) is expected


def test_retry_after_is_read_in_seconds_milliseconds_or_as_a_date():
    now = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
    assert retry_after({"Retry-After": "7"}) == 7.0
    assert retry_after({"retry-after-ms": "250", "Retry-After": "9"}) == 0.25
    assert retry_after({"Retry-After": format_datetime(now + timedelta(seconds=30), usegmt=True)}, now) == 30.0
    assert retry_after({"Retry-After": "soon"}) is None and retry_after({}) is None


def test_backoff_doubles_with_jitter_caps_and_never_undercuts_retry_after():
    policy = RetryPolicy(base_s=1.0, max_backoff_s=8.0)
    assert [backoff(n, policy, 1.0, None) for n in (1, 2, 3, 4, 5)] == [1.0, 2.0, 4.0, 8.0, 8.0]
    assert backoff(3, policy, 0.0, None) == 2.0  # jitter halves at most
    assert backoff(1, policy, 0.5, 20.0) == 20.0
