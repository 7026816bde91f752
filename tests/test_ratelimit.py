"""GitHub's documented rate-limit rules (bot/edges/ratelimit.py) called directly: which 403/429 is which limit,
and how long to wait: until one second past x-ratelimit-reset, Retry-After as asked, else a minute doubling."""

from __future__ import annotations

import pytest

from bot.edges.ratelimit import RESET_MARGIN_S, SECONDARY_MIN_S, limit_kind, limit_wait, retry_after

NOW = 1_790_000_000.0  # a fixed instant (epoch seconds)


@pytest.mark.parametrize(
    ("status", "headers", "message", "kind"),
    [
        (403, {"X-RateLimit-Remaining": "0"}, "API rate limit exceeded for installation", "primary"),
        (429, {"x-ratelimit-remaining": "0"}, "", "primary"),
        (403, {}, "You have exceeded a secondary rate limit. Please wait a few minutes", "secondary"),
        (403, {"Retry-After": "30"}, "", "secondary"),
        (429, {}, "", "secondary"),
        (403, {"x-ratelimit-remaining": "4999"}, "Resource not accessible by integration", None),  # permissions
        (404, {"x-ratelimit-remaining": "0"}, "", None),
        (500, {"Retry-After": "5"}, "", None),
    ],
)
def test_which_answer_is_which_limit(status: int, headers: dict, message: str, kind: str | None) -> None:
    assert limit_kind(status, headers, message) == kind


def test_the_primary_limit_waits_until_one_second_past_the_reset() -> None:
    headers = {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": str(int(NOW) + 120)}
    wait = limit_wait("primary", headers, NOW, 0)
    assert wait.seconds == 120 + RESET_MARGIN_S
    assert wait.reason.startswith("GitHub's primary rate limit (x-ratelimit-reset ") and wait.reason.endswith(" UTC)")
    past = {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": str(int(NOW) - 5)}
    assert limit_wait("primary", past, NOW, 0).seconds == RESET_MARGIN_S  # a reset already past: just the margin


def test_retry_after_is_waited_in_full_and_the_longer_of_two_answers_wins() -> None:
    assert retry_after({"Retry-After": "42"}) == 42.0 and retry_after({"retry-after": "-3"}) == 0.0
    assert retry_after({"Retry-After": "soon"}) is None and retry_after(None) is None
    wait = limit_wait("secondary", {"Retry-After": "42"}, NOW, 1)
    assert (wait.seconds, wait.reason) == (42.0, "GitHub's secondary rate limit (Retry-After 42 s)")
    both = {"Retry-After": "10", "x-ratelimit-remaining": "0", "x-ratelimit-reset": str(int(NOW) + 300)}
    assert limit_wait("secondary", both, NOW, 1).seconds == 300 + RESET_MARGIN_S


def test_a_secondary_limit_without_a_hint_waits_a_minute_doubling() -> None:
    waits = [limit_wait("secondary", {}, NOW, seen).seconds for seen in (1, 2, 3, 4)]
    assert (
        waits
        == [SECONDARY_MIN_S, 2 * SECONDARY_MIN_S, 4 * SECONDARY_MIN_S, 8 * SECONDARY_MIN_S]
        == [
            60.0,
            120.0,
            240.0,
            480.0,
        ]
    )
    assert limit_wait("secondary", {}, NOW, 1).reason == (
        "GitHub's secondary rate limit (no Retry-After: 60 s, from 60 s doubling)"
    )
