"""OpenAI-compatible gateway client: one POST to base_url + /v1/chat/completions, nothing else."""

from __future__ import annotations

import hashlib
import time
import uuid
from typing import Any
from urllib.parse import urlsplit

import requests
from pydantic import BaseModel

from bot.errors import InputError, ServiceError

CHAT_PATH = "/v1/chat/completions"


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
    usage_reported: bool
    latency_ms: float
    status_code: int


class GatewayClient:
    """Talks to one gateway with one key; the key is sent as a bearer token and never logged."""

    def __init__(
        self,
        base_url: str,
        api_key: str,
        key_variable: str,
        *,
        timeout_s: float = 120.0,
        session: requests.Session | None = None,
    ) -> None:
        self.endpoint = validate_base_url(base_url) + CHAT_PATH
        self._key = api_key
        self.key_variable = key_variable
        self.timeout_s = timeout_s
        self.session = session or requests.Session()

    def chat(
        self, model: str, messages: list[dict[str, str]], *, temperature: float = 0.1, max_tokens: int = 2048
    ) -> ChatResult:
        body = {"model": model, "messages": messages, "temperature": temperature, "max_tokens": max_tokens}
        headers = {"Authorization": f"Bearer {self._key}", "Content-Type": "application/json"}
        started = time.perf_counter()
        try:
            resp = self.session.post(self.endpoint, json=body, headers=headers, timeout=self.timeout_s)
        except requests.RequestException as exc:
            raise ServiceError(f"gateway {self.endpoint} unreachable: {type(exc).__name__}") from exc
        latency_ms = (time.perf_counter() - started) * 1e3
        if resp.status_code in (401, 403):
            raise ServiceError(
                f"gateway refused the key in {self.key_variable} (HTTP {resp.status_code}); "
                "check that the variable holds a valid, unrevoked key for this gateway"
            )
        if resp.status_code >= 400:
            raise ServiceError(f"gateway answered HTTP {resp.status_code} for {self.endpoint}")
        try:
            payload: dict[str, Any] = resp.json()
            content = payload["choices"][0]["message"]["content"] or ""
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise ServiceError("gateway reply is not a chat-completions body") from exc
        usage = payload.get("usage") or {}
        prompt = int(usage.get("prompt_tokens") or 0)
        completion = int(usage.get("completion_tokens") or 0)
        return ChatResult(
            request_id=str(payload.get("id") or resp.headers.get("x-request-id") or uuid.uuid4()),
            model=str(payload.get("model") or model),
            content=content,
            prompt_tokens=prompt,
            completion_tokens=completion,
            total_tokens=int(usage.get("total_tokens") or prompt + completion),
            usage_reported=bool(usage),
            latency_ms=latency_ms,
            status_code=resp.status_code,
        )
