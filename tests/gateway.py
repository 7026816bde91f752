"""A scripted OpenAI/Anthropic-compatible gateway on pytest-httpserver, with fault injection.

Each request takes the next step of the script: a reply body, an HTTP error (with headers), or a
stall longer than the client's timeout. Bodies follow the wire formats the providers document.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pytest_httpserver import HTTPServer
from werkzeug import Request, Response

_ids = itertools.count(1)


def completion(content: str, prompt: int = 1234, completion_tokens: int = 321, **usage_extra: Any) -> dict:
    """A chat.completions body as the OpenAI API documents it (a fresh id each time)."""
    return {
        "id": f"chatcmpl-test-{next(_ids):04d}",
        "object": "chat.completion",
        "created": 1764460800,
        "model": "deepseek-v4",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        "usage": {
            "prompt_tokens": prompt,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt + completion_tokens,
            **usage_extra,
        },
    }


def deepseek(content: str, prompt: int = 1234, completion_tokens: int = 321, hit: int = 0) -> dict:
    """A DeepSeek chat.completion in the shape its API documents (api-docs.deepseek.com, "Create Chat Completion"):
    the context-cache hits in `prompt_cache_hit_tokens` / `prompt_cache_miss_tokens` (prompt = hit + miss) and no
    `prompt_tokens_details`, as its replies carried before they added OpenAI's field beside them."""
    return {
        "id": f"930c60df-bf64-41c9-a88e-{next(_ids):012d}",
        "choices": [
            {
                "finish_reason": "stop",
                "index": 0,
                "message": {"content": content, "role": "assistant"},
                "logprobs": None,
            }
        ],
        "created": 1705651092,
        "model": "deepseek-chat",
        "object": "chat.completion",
        "system_fingerprint": "fp_a49d71b8a1",
        "usage": {
            "completion_tokens": completion_tokens,
            "prompt_tokens": prompt,
            "prompt_cache_hit_tokens": hit,
            "prompt_cache_miss_tokens": prompt - hit,
            "total_tokens": prompt + completion_tokens,
            "completion_tokens_details": {"reasoning_tokens": 0},
        },
    }


def truncated(content: str, prompt: int = 1234, completion_tokens: int = 2048) -> dict:
    """A chat.completion cut off at the completion cap: `finish_reason: "length"` (OpenAI's OpenAPI description)."""
    body = completion(content, prompt, completion_tokens)
    body["choices"][0]["finish_reason"] = "length"
    return body


def tool_calls(*names: str, prompt: int = 1234, completion_tokens: int = 40) -> dict:
    """A chat.completion that called tools instead of answering: `content: null`, `finish_reason: "tool_calls"`."""
    body = completion("", prompt, completion_tokens)
    body["choices"][0]["finish_reason"] = "tool_calls"
    body["choices"][0]["message"] = {
        "role": "assistant",
        "content": None,
        "refusal": None,
        "tool_calls": [
            {"id": f"call_{i}", "type": "function", "function": {"name": name, "arguments": "{}"}}
            for i, name in enumerate(names)
        ],
    }
    return body


def message(content: str, input_tokens: int = 1000, output_tokens: int = 200, cache_read: int = 0) -> dict:
    """An Anthropic /v1/messages body."""
    return {
        "id": f"msg_test_{next(_ids):04d}",
        "type": "message",
        "role": "assistant",
        "model": "claude-test",
        "content": [{"type": "text", "text": content}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens, "cache_read_input_tokens": cache_read},
    }


def openai_error(status: int, code: str, message: str = "error") -> Step:
    return Step(status=status, body={"error": {"message": message, "type": code, "code": code}})


CUT = '{"risk_notes": ["tile_n=256 doubles the accumu'  # what a reply cut off mid-JSON looks like

QUOTA_429 = {
    "error": {
        "message": "You exceeded your current quota, please check your plan and billing details.",
        "type": "insufficient_quota",
        "code": "insufficient_quota",
    }
}
RATE_429 = {
    "error": {
        "message": "Rate limit reached for requests. You can increase your rate limit by adding a payment method"
        " at https://example.invalid/account/billing.",
        "type": "requests",
        "code": "rate_limit_exceeded",
    }
}


@dataclass
class Step:
    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    stall_s: float = 0.0
    raw: str | None = None


class Gateway:
    """Serves `script` in order on both wire paths; `requests` keeps every request seen."""

    def __init__(self, server: HTTPServer, script: list[Step | dict] | None = None) -> None:
        self.server = server
        self.script: list[Step] = []
        self.requests: list[Request] = []
        self.bodies: list[dict] = []
        self.fallback: Callable[[Request], Step] | None = None
        self.push(*(script or []))
        for path in ("/v1/chat/completions", "/v1/messages"):
            server.expect_request(path, method="POST").respond_with_handler(self._handle)

    @property
    def url(self) -> str:
        return self.server.url_for("/").rstrip("/")

    def push(self, *steps: Step | dict) -> None:
        self.script.extend(s if isinstance(s, Step) else Step(body=s) for s in steps)

    def _handle(self, request: Request) -> Response:
        self.requests.append(request)
        self.bodies.append(json.loads(request.get_data(as_text=True) or "{}"))
        if self.script:
            step = self.script.pop(0)
        elif self.fallback is not None:
            step = self.fallback(request)
        else:
            step = Step(status=500, body={"error": {"message": "script exhausted", "type": "test"}})
        if step.stall_s:
            time.sleep(step.stall_s)
        text = step.raw if step.raw is not None else json.dumps(step.body)
        return Response(text, status=step.status, headers=step.headers, content_type="application/json")
