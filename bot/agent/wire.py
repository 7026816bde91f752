"""The two gateway wire formats (OpenAI chat completions, Anthropic messages): request bodies and replies (pure)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel

from bot.text.redact import gateway_words

WireName = Literal["openai", "anthropic"]
TokensField = Literal["max_tokens", "max_completion_tokens"]
PATHS: dict[str, str] = {"openai": "/v1/chat/completions", "anthropic": "/v1/messages"}
ANTHROPIC_VERSION = "2023-06-01"
# Why a reply ended, in OpenAI's words; Anthropic's stop_reason is mapped onto them.
_STOP_REASONS = {"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length", "tool_use": "tool_calls"}


class Usage(BaseModel):
    """Token counts as the gateway reported them. `reported` is False when it did not report them usably
    (no usage, a count that is not a non-negative integer, or zero prompt or completion tokens for an
    answer): the caller then records its offline estimate (the larger of the two per count)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    cached_tokens: int = 0
    reasoning_tokens: int = 0
    reported: bool = False
    problem: str = "no usage in the reply"


class Reply(BaseModel):
    request_id: str | None
    model: str | None
    content: str
    usage: Usage
    finish_reason: str = ""  # "stop", "length" (cut at the token limit), "tool_calls", "content_filter", … or ""
    tool_calls: list[str] = []  # the names of the tools the reply called instead of (or beside) answering
    refusal: str = ""  # OpenAI's `message.refusal`, when the model refused


class BadReply(ValueError):
    """The HTTP 200 body is not a reply of the wire format."""


def headers(wire: WireName, key: str) -> dict[str, str]:
    """Bearer auth on both wires (what ANTHROPIC_AUTH_TOKEN means to Claude Code and to gateways)."""
    out = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    if wire == "anthropic":
        out["anthropic-version"] = ANTHROPIC_VERSION
    return out


def body(
    wire: WireName,
    model: str,
    messages: list[dict[str, str]],
    *,
    temperature: float | None,
    max_tokens: int,
    tokens_field: TokensField = "max_tokens",
) -> dict[str, Any]:
    """The request body. `temperature` None leaves it out (reasoning models accept only their default);
    `tokens_field` names the completion cap on the OpenAI wire (`max_completion_tokens` replaces the deprecated
    `max_tokens`, which o-series models reject); the Anthropic wire always says `max_tokens` (it requires it)."""
    if wire == "openai":
        out: dict[str, Any] = {"model": model, "messages": messages, tokens_field: max_tokens}
        if temperature is not None:
            out["temperature"] = temperature
        return out
    system = "\n\n".join(m["content"] for m in messages if m["role"] == "system")
    rest = [{"role": m["role"], "content": m["content"]} for m in messages if m["role"] != "system"]
    out = {"model": model, "max_tokens": max_tokens, "messages": rest}
    if temperature is not None:
        out["temperature"] = temperature
    if system:
        out["system"] = system
    return out


def _count(value: Any) -> int | None:
    """A token count as the gateway sent it: a non-negative integer (an integral float too), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    if isinstance(value, float) and value.is_integer() and 0 <= value < 2**53:
        return int(value)
    return None


def _int(value: Any) -> int:
    return _count(value) or 0


def parse(wire: WireName, payload: Any, header_id: str | None) -> Reply:
    """The reply's text, id, model, usage, why it ended and any tool calls; BadReply when the body is not a reply
    of the wire format. A reply may hold no text (`content: null` beside `tool_calls`): "" then, and the
    caller says why from `finish_reason` and `tool_calls`."""
    if not isinstance(payload, dict):
        raise BadReply("reply body is not a JSON object")
    tools: list[str] = []
    refusal = ""
    try:
        if wire == "openai":
            choice = payload["choices"][0]
            message = choice["message"]
            content = message.get("content") or ""
            finish = choice.get("finish_reason")
            calls = message.get("tool_calls") or []
            tools = (
                [_tool_name(c.get("function")) for c in calls if isinstance(c, dict)] if isinstance(calls, list) else []
            )
            refusal = gateway_words(message["refusal"], 500) if isinstance(message.get("refusal"), str) else ""
        else:
            blocks = payload["content"]
            content = "".join(b.get("text", "") for b in blocks if isinstance(b, dict) and b.get("type") == "text")
            tools = [_tool_name(b) for b in blocks if isinstance(b, dict) and b.get("type") == "tool_use"]
            finish = _STOP_REASONS.get(str(payload.get("stop_reason")), payload.get("stop_reason"))
    except (KeyError, IndexError, TypeError, AttributeError) as exc:
        raise BadReply(f"reply is not a {wire} body") from exc
    if not isinstance(content, str):
        raise BadReply("reply content is not text")
    raw = payload.get("usage")
    usage = _usage(wire, raw) if isinstance(raw, dict) and raw else Usage()
    if usage.reported and (usage.prompt_tokens == 0 or (content and usage.completion_tokens == 0)):
        usage = usage.model_copy(update={"reported": False, "problem": "usage reports 0 tokens for an answer"})
    return Reply(
        request_id=gateway_words(payload.get("id") or header_id or "", 120) or None,
        model=gateway_words(payload["model"]) if payload.get("model") else None,
        content=content,
        usage=usage,
        finish_reason=gateway_words(finish, 40) if isinstance(finish, str) else "",
        tool_calls=tools,
        refusal=refusal,
    )


def _tool_name(value: Any) -> str:
    name = value.get("name") if isinstance(value, dict) else None
    return gateway_words(name, 60) if isinstance(name, str) and name else "(unnamed)"


def _usage(wire: WireName, raw: dict[str, Any]) -> Usage:
    keys = ("prompt_tokens", "completion_tokens") if wire == "openai" else ("input_tokens", "output_tokens")
    bad = [k for k in keys if _count(raw.get(k)) is None]
    if bad:
        shown = ", ".join(f"{k}={gateway_words(raw.get(k), 20)!r}" for k in bad)
        return Usage(reported=False, problem=f"usage is not a token count ({shown})")
    if wire == "openai":
        prompt, completion = _int(raw.get("prompt_tokens")), _int(raw.get("completion_tokens"))
        prompt_details = raw.get("prompt_tokens_details") or {}
        completion_details = raw.get("completion_tokens_details") or {}
        details_cached = prompt_details.get("cached_tokens") if isinstance(prompt_details, dict) else None
        # DeepSeek reports its context-cache hits in a field of its own (newer replies carry both)
        cached = max(_int(details_cached), _int(raw.get("prompt_cache_hit_tokens")))
        return Usage(
            prompt_tokens=prompt,
            completion_tokens=completion,
            total_tokens=max(_int(raw.get("total_tokens")), prompt + completion),
            cached_tokens=cached,
            reasoning_tokens=_int(completion_details.get("reasoning_tokens"))
            if isinstance(completion_details, dict)
            else 0,
            reported=True,
            problem="",
        )
    cache_read = _int(raw.get("cache_read_input_tokens"))
    prompt = _int(raw.get("input_tokens")) + cache_read + _int(raw.get("cache_creation_input_tokens"))
    completion = _int(raw.get("output_tokens"))
    return Usage(
        prompt_tokens=prompt,
        completion_tokens=completion,
        total_tokens=prompt + completion,
        cached_tokens=cache_read,
        reported=True,
        problem="",
    )


def error_code(payload: Any) -> str:
    """`code`/`type` of an error body on either wire ("" when there is none); never the message."""
    if not isinstance(payload, dict):
        return ""
    err = payload.get("error")
    if isinstance(err, dict):
        parts = [gateway_words(err[k], 60) for k in ("code", "type") if isinstance(err.get(k), str)]
        return "/".join(dict.fromkeys(parts))
    if isinstance(err, str):
        return gateway_words(err, 60)
    return ""


def error_message(payload: Any) -> str:
    """The error's message, for classifying it (retry.py); never shown: it may quote the caller's key."""
    if isinstance(payload, dict):
        err = payload.get("error")
        if isinstance(err, dict) and isinstance(err.get("message"), str):
            return str(err["message"])
        if isinstance(payload.get("message"), str):
            return str(payload["message"])
    return ""
