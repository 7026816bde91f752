"""Gateway client: one POST to base_url + /v1/chat/completions (or /v1/messages), retried as retry.py says."""

from __future__ import annotations

import hashlib
import logging
import random
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import requests
from pydantic import BaseModel

from bot.agent import wire
from bot.agent.retry import RETRYABLE, Failure, RetryPolicy, backoff, classify, retry_after
from bot.errors import InputError, ServiceError
from bot.text.redact import scrub

log = logging.getLogger(__name__)


def validate_base_url(url: str) -> str:
    """A bare gateway URL: http(s), a host, no query string, no fragment, no credentials."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("https", "http") or not parts.hostname:
        raise InputError(f"base_url {url!r} must be an http(s) URL with a host")
    if parts.query or "utm_" in url:
        raise InputError(f"base_url {url!r} must carry no query string or tracking (utm_) parameters")
    if parts.fragment or parts.username or parts.password:
        raise InputError(f"base_url {url!r} must carry no fragment or credentials")
    return url.strip().rstrip("/")


def fingerprint(key: str) -> str:
    """A stable, non-reversible handle for a key: sha256 prefix, safe to store and show."""
    return "sha256:" + hashlib.sha256(key.encode()).hexdigest()[:12]


class ChatResult(BaseModel):
    request_id: str
    model: str
    content: str
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    cached_tokens: int = 0
    reasoning_tokens: int = 0
    usage_reported: bool
    usage_problem: str = ""  # why the usage was not usable, when it was not
    latency_ms: float
    status_code: int
    attempts: int = 1
    finish_reason: str = ""  # "length": cut off at `max_tokens`; "tool_calls": it called tools instead
    tool_calls: list[str] = []  # names of the tools the reply called
    refusal: str = ""
    max_tokens: int = 0  # the completion cap this request was sent with

    @property
    def truncated(self) -> bool:
        """The reply stopped at the completion cap: whatever text it holds is cut off."""
        return self.finish_reason == "length"


class Attempt(BaseModel):
    """One HTTP attempt, successful or not: what the ledger records for it."""

    number: int
    status_code: int | None
    failure: Failure | None
    latency_ms: float
    request_id: str | None = None
    result: ChatResult | None = None
    wait_s: float | None = None  # the pause before the next attempt, when there is one


class GatewayError(ServiceError):
    """The gateway failed after retries, or in a way retries cannot fix (auth, quota)."""

    def __init__(self, message: str, failure: Failure, status_code: int | None, attempts: int) -> None:
        super().__init__(message)
        self.failure = failure
        self.status_code = status_code
        self.attempts = attempts


class GatewayClient:
    """Talks to one gateway with one key; the key is sent as a bearer token and never logged."""

    def __init__(
        self,
        base_url: str,
        api_key: str,
        key_variable: str,
        *,
        wire_name: wire.WireName = "openai",
        timeout_s: float = 120.0,
        session: requests.Session | None = None,
        policy: RetryPolicy | None = None,
        sleep: Callable[[float], None] = time.sleep,
        rng: random.Random | None = None,
        on_attempt: Callable[[Attempt], None] | None = None,
    ) -> None:
        self.wire: wire.WireName = wire_name
        self.endpoint = validate_base_url(base_url) + wire.PATHS[wire_name]
        self._key = api_key
        self.key_variable = key_variable
        self.timeout_s = timeout_s
        self.session = session or requests.Session()
        self.policy = policy or RetryPolicy()
        self._sleep = sleep
        self._rng = rng or random.Random()
        self._on_attempt = on_attempt

    def __repr__(self) -> str:
        return f"GatewayClient({self.endpoint!r}, key from {self.key_variable})"

    def chat(
        self,
        model: str,
        messages: list[dict[str, str]],
        *,
        temperature: float | None = 0.1,
        max_tokens: int = 2048,
        tokens_field: wire.TokensField = "max_tokens",
    ) -> ChatResult:
        """One request, retried on 429 rate limits, 5xx and timeouts; GatewayError when it gives up.
        `temperature` None is not sent; `tokens_field` names the completion cap (OpenAI wire)."""
        payload = wire.body(
            self.wire, model, messages, temperature=temperature, max_tokens=max_tokens, tokens_field=tokens_field
        )
        number = 0
        while True:
            number += 1
            attempt, error = self._attempt(number, model, payload, max_tokens)
            if attempt.result is not None:
                self._report(attempt)
                return attempt.result
            assert error is not None and attempt.failure is not None
            if attempt.failure in RETRYABLE and number <= self.policy.retries:
                asked = attempt.wait_s
                if asked is not None and asked > self.policy.max_retry_after_s:
                    attempt.wait_s = None
                    self._report(attempt)
                    raise GatewayError(
                        f"{error}; the gateway asked to wait {asked:.0f} s, over the "
                        f"{self.policy.max_retry_after_s:.0f} s opgate waits",
                        attempt.failure,
                        attempt.status_code,
                        number,
                    )
                attempt.wait_s = backoff(number, self.policy, self._rng.random(), asked)
                self._report(attempt)
                log.warning("%s; retry %s/%s in %.2fs", error, number, self.policy.retries, attempt.wait_s)
                self._sleep(attempt.wait_s)
                continue
            attempt.wait_s = None
            self._report(attempt)
            if attempt.failure in RETRYABLE and number > 1:
                error = f"{error} after {number} attempts"
            raise GatewayError(error, attempt.failure, attempt.status_code, number)

    def _report(self, attempt: Attempt) -> None:
        if self._on_attempt is not None:
            self._on_attempt(attempt)

    def _attempt(self, number: int, model: str, payload: dict[str, Any], max_tokens: int) -> tuple[Attempt, str | None]:
        """One POST. Returns the attempt and, when it failed, the message to raise (never the key)."""
        started = time.perf_counter()
        try:
            resp = self.session.post(
                self.endpoint, json=payload, headers=wire.headers(self.wire, self._key), timeout=self.timeout_s
            )
        except requests.Timeout as exc:
            ms = (time.perf_counter() - started) * 1e3
            message = f"gateway {self.endpoint} timed out after {self.timeout_s:g} s ({type(exc).__name__})"
            return Attempt(number=number, status_code=None, failure=Failure.timeout, latency_ms=ms), message
        except requests.RequestException as exc:
            ms = (time.perf_counter() - started) * 1e3
            message = f"gateway {self.endpoint} unreachable: {type(exc).__name__}"
            return Attempt(number=number, status_code=None, failure=Failure.unreachable, latency_ms=ms), message
        ms = (time.perf_counter() - started) * 1e3
        header_id = resp.headers.get("x-request-id") or resp.headers.get("request-id")
        try:
            body: Any = resp.json()
        except ValueError:
            body = None
        if resp.status_code >= 400:
            failure = classify(resp.status_code, body)
            attempt = Attempt(
                number=number,
                status_code=resp.status_code,
                failure=failure,
                latency_ms=ms,
                request_id=header_id,
                wait_s=retry_after(resp.headers),
            )
            return attempt, self._failure_message(failure, resp.status_code, body)
        try:
            reply = wire.parse(self.wire, body, header_id)
        except wire.BadReply as exc:
            attempt = Attempt(number=number, status_code=resp.status_code, failure=Failure.bad_reply, latency_ms=ms)
            return attempt, f"gateway {self.endpoint} answered HTTP {resp.status_code} with {exc}"
        usage = reply.usage
        own = self._without_key
        result = ChatResult(
            request_id=own(reply.request_id or ""),
            model=own(reply.model or model),
            content=reply.content,
            prompt_tokens=usage.prompt_tokens,
            completion_tokens=usage.completion_tokens,
            total_tokens=usage.total_tokens,
            cached_tokens=usage.cached_tokens,
            reasoning_tokens=usage.reasoning_tokens,
            usage_reported=usage.reported,
            usage_problem=usage.problem if not usage.reported else "",
            latency_ms=ms,
            status_code=resp.status_code,
            attempts=number,
            finish_reason=own(reply.finish_reason),
            tool_calls=[own(name) for name in reply.tool_calls],
            refusal=own(reply.refusal),
            max_tokens=max_tokens,
        )
        attempt = Attempt(
            number=number,
            status_code=resp.status_code,
            failure=None,
            latency_ms=ms,
            request_id=reply.request_id,
            result=result,
        )
        return attempt, None

    def _without_key(self, text: str) -> str:
        """A string the gateway supplied, with this client's key masked (wire.py masks every key-shaped one and the
        process's known secrets; a gateway may echo a key of any shape)."""
        return scrub(text, [self._key])

    def _failure_message(self, failure: Failure, status: int, body: Any) -> str:
        code = self._without_key(wire.error_code(body))
        detail = f"HTTP {status}" + (f" {code}" if code else "")
        if failure is Failure.auth:
            return (
                f"gateway refused the key in {self.key_variable} ({detail}); check that the variable holds a "
                "valid, unrevoked key for this gateway (not retried)"
            )
        if failure is Failure.quota:
            return (
                f"the key in {self.key_variable} has reached its quota or spend limit ({detail}); ask the key "
                "administrator to raise the limit or rotate the key (not retried)"
            )
        if failure is Failure.rate_limited:
            return f"gateway {self.endpoint} rate-limited the key in {self.key_variable} ({detail})"
        return f"gateway answered {detail} for {self.endpoint}"
