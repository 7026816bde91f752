"""The two wire formats (bot/agent/wire.py): what each reads from a reply and what each request always says."""

from __future__ import annotations

from bot.agent import wire
from tests.gateway import CUT, completion, deepseek, message


def test_the_anthropic_wire_reads_stop_reason_max_tokens_and_tool_use() -> None:
    body = message(CUT)
    body["stop_reason"] = "max_tokens"
    assert wire.parse("anthropic", body, None).finish_reason == "length"
    body = message("")
    body["content"] = [{"type": "tool_use", "id": "toolu_01", "name": "bash", "input": {"command": "ls"}}]
    body["stop_reason"] = "tool_use"
    reply = wire.parse("anthropic", body, None)
    assert (reply.finish_reason, reply.tool_calls, reply.content) == ("tool_calls", ["bash"], "")


def test_a_refusal_is_named() -> None:
    body = completion("")
    body["choices"][0]["message"] = {"role": "assistant", "content": None, "refusal": "I can't help with that."}
    reply = wire.parse("openai", body, None)
    assert (reply.content, reply.refusal) == ("", "I can't help with that.")


def test_openai_cached_tokens_still_win_where_they_are_given() -> None:
    body = completion("x", prompt=1000, completion_tokens=10, prompt_tokens_details={"cached_tokens": 512})
    assert wire.parse("openai", body, None).usage.cached_tokens == 512
    newer = deepseek("x", prompt=1000, completion_tokens=10, hit=640)
    newer["usage"]["prompt_tokens_details"] = {"cached_tokens": 640}  # newer DeepSeek replies carry both
    assert wire.parse("openai", newer, None).usage.cached_tokens == 640


def test_the_anthropic_wire_always_says_max_tokens_and_may_leave_out_the_temperature() -> None:
    out = wire.body("anthropic", "m", [], temperature=None, max_tokens=64, tokens_field="max_completion_tokens")
    assert out == {"model": "m", "max_tokens": 64, "messages": []}
