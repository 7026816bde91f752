"""One ask-and-repair path for every agent request: cache → send → validate → one repair turn → spend recorded."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, Literal, Protocol, TypeVar

from pydantic import BaseModel

from bot.agent.client import ChatResult, GatewayError
from bot.agent.review import AgentOutputError
from bot.ledger import Ledger, now
from bot.models.agent_report import AgentReport
from bot.models.finding import Phrase
from bot.models.ledger import CachedReply
from bot.text.redact import scrub

T = TypeVar("T")
log = logging.getLogger(__name__)

Outcome = Literal["ok", "cached", "over_budget", "gateway_error", "cut", "rejected"]
_CONTROL = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|[\x00-\x08\x0b-\x1f\x7f]")


def sanitise(text: str, secrets: list[str]) -> str:
    """A reply made safe to keep on disk: every known secret masked, terminal escapes removed."""
    return _CONTROL.sub("", scrub(text, secrets))


@dataclass(frozen=True)
class Reader(Generic[T]):
    """How one kind of reply is read: `parse` validates the text against its pydantic model (AgentOutputError when
    it does not), `repair` writes the follow-up for an error, `what` names the reply in the log."""

    parse: Callable[[str], T]
    repair: Callable[[str], str]
    what: str


class Spend(BaseModel):
    """What one exchange cost, from the replies the gateway answered (every attempt is a ledger row already)."""

    requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    usage_estimated: int = 0
    model: str | None = None

    @classmethod
    def of(cls, answered: list[ChatResult]) -> Spend:
        return cls(
            requests=len(answered),
            prompt_tokens=sum(r.prompt_tokens for r in answered),
            completion_tokens=sum(r.completion_tokens for r in answered),
            total_tokens=sum(r.total_tokens for r in answered),
            usage_estimated=sum(1 for r in answered if not r.usage_reported),
            model=answered[-1].model if answered else None,
        )

    def onto(self, report: AgentReport) -> None:
        """The spend written onto an agent section of report.json."""
        report.requests, report.prompt_tokens = self.requests, self.prompt_tokens
        report.completion_tokens, report.total_tokens = self.completion_tokens, self.total_tokens
        report.usage_estimated = self.usage_estimated
        if self.model:
            report.model = self.model


@dataclass(frozen=True)
class Answer(Generic[T]):
    """The exchange's result: `reply` is set for ok and cached; `reason` says why not otherwise (for `rejected`,
    the validation error of the repair reply; for `over_budget`, the budget's reason)."""

    outcome: Outcome
    reply: T | None
    spend: Spend
    model: str | None = None
    reason: str = ""
    why: Phrase | None = None  # over_budget, cut, rejected: the reason as a message of the catalog, where it has one
    cached_at: str = ""
    error: GatewayError | None = None


class Asker(Protocol):
    """What exchange needs of a gateway call (bot.agent.run.Call): chat under the budget, ledger rows, secrets."""

    answered: list[ChatResult]

    def chat(self, messages: list[dict[str, str]], max_tokens: int | None = None) -> ChatResult: ...
    def record_cached(self, model: str) -> None: ...
    def secrets(self) -> list[str]: ...


@dataclass(frozen=True)
class Cache:
    """Where a validated reply is kept for the same prompt: the ledger, the prompt's cache key, the wire."""

    ledger: Ledger
    key: str
    wire: str


class OverBudget(Exception):
    """A request the budget refused: `reason` in English, `why` the same as a message of the catalog (None: a
    refusal that has no message of its own, e.g. opgate tune's own cap, shown as written)."""

    def __init__(self, reason: str, why: Phrase | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.why = why

    @property
    def phrase(self) -> Phrase:
        """`why`, or `reason` as written where the refusal has no message of its own."""
        return self.why or Phrase.as_written(self.reason)


class ReplyCut(AgentOutputError):
    """The reply stopped at the completion cap (`finish_reason: "length"`) even with the larger allowance, or
    the larger allowance did not fit the budget: a repair request would be cut off the same way."""


def why_of(exc: AgentOutputError) -> Phrase:
    """The error as a phrase of the catalog: its own where opgate worded it, else its text verbatim."""
    return exc.why or Phrase(key="agent.error", params={"error": str(exc)})


def exchange(
    call: Asker,
    messages: list[dict[str, str]],
    reader: Reader[T],
    *,
    keep_as: Path,
    cache: Cache | None = None,
) -> Answer[T]:
    """The one path of every agent request. With `cache` (the ledger, the prompt's cache key, the wire) a reply
    stored for the same prompt that still validates is reused (0 tokens, a `cached` row); otherwise ask, validate
    with `reader.parse`, ask once more with `reader.repair(error)` when the reply has no text or fails validation,
    and store a valid reply under the key with the tokens it cost. Never raises for the gateway, the budget or
    the reply: the outcome says which, with what was spent."""
    if cache is not None:
        hit = cache.ledger.cached_reply(cache.key)
        if hit is not None:
            try:
                reply = reader.parse(hit.content)
            except AgentOutputError:
                pass  # stored under older rules: ask again
            else:
                call.record_cached(hit.model)
                return Answer("cached", reply, Spend(), model=hit.model, cached_at=hit.created_at)
    before = len(call.answered)

    def spend() -> Spend:
        return Spend.of(call.answered[before:])

    try:
        reply, content = with_repair(call, messages, reader, keep_as)
    except OverBudget as exc:
        return Answer("over_budget", None, spend(), reason=exc.reason, why=exc.phrase)
    except GatewayError as exc:
        return Answer("gateway_error", None, spend(), reason=str(exc), error=exc)
    except ReplyCut as exc:
        return Answer("cut", None, spend(), reason=str(exc), why=exc.why)
    except AgentOutputError as exc:
        return Answer("rejected", None, spend(), reason=str(exc), why=exc.why)
    spent = spend()
    if cache is not None:
        cache.ledger.store_reply(
            CachedReply(
                cache_key=cache.key, model=spent.model or "", wire=cache.wire, content=content,
                prompt_tokens=spent.prompt_tokens,
                completion_tokens=spent.completion_tokens, created_at=now(),
            )
        )  # fmt: skip
    return Answer("ok", reply, spent, model=spent.model)


def answered(
    call: Asker, messages: list[dict[str, str]], max_tokens: int | None = None, *, retry: bool = True
) -> ChatResult:
    """A reply that was not cut off. One cut off at max_tokens N is asked once more with 2N (reserved against the
    budget like any request); cut off again, or no room for 2N: ReplyCut, saying so."""
    first = call.chat(messages, max_tokens)
    if not first.truncated:
        return first
    cut = f'the reply was cut off at max_tokens {first.max_tokens} (finish_reason "length")'
    cut_why = Phrase(key="agent.cut", params={"max_tokens": first.max_tokens})
    if not retry:
        raise ReplyCut(f"{cut}; not asked again", Phrase(key="agent.cut_once", phrases={"cut": [cut_why]}))
    larger = 2 * first.max_tokens
    log.info("agent reply %s: %s; asking once more with max_tokens %s", first.request_id, cut, larger)
    try:
        second = call.chat(messages, larger)
    except OverBudget as over:
        no_room = Phrase(
            key="agent.cut_no_room", params={"larger": larger}, phrases={"cut": [cut_why], "why": [over.phrase]}
        )
        raise ReplyCut(f"{cut}, and max_tokens {larger} does not fit the budget ({over.reason})", no_room) from over
    if second.truncated:
        again = Phrase(key="agent.cut_again", params={"larger": larger}, phrases={"cut": [cut_why]})
        raise ReplyCut(
            f"{cut}, and again at max_tokens {larger}; raise OPGATE_AGENT_MAX_TOKENS or shorten the task", again
        )
    return second


def no_text_phrase(result: ChatResult) -> tuple[str, Phrase] | None:
    """Why a reply holds no text to read (tool calls instead, a refusal, a filter), in English and as a phrase of the
    catalog (the model's refusal inside it verbatim); None when it has some."""
    if result.content.strip():
        return None
    if result.tool_calls:
        names = ", ".join(result.tool_calls[:5])
        english = (
            f"the reply holds no text (content null) but {len(result.tool_calls)} tool call(s) ({names}); opgate "
            "offers no tools and reads one JSON object in the message content"
        )
        return english, Phrase(key="agent.no_text_tools", params={"count": len(result.tool_calls), "names": names})
    if result.refusal:
        refusal = result.refusal[:300]
        return f"the model refused: {refusal}", Phrase(key="agent.refused", params={"error": refusal})
    if result.finish_reason:
        finish = repr(result.finish_reason)
        english = f"the reply holds no text (finish_reason {finish})"
        return english, Phrase(key="agent.no_text_finish", params={"finish_reason": finish})
    return "the reply holds no text", Phrase(key="agent.no_text")


def with_repair(call: Asker, messages: list[dict[str, str]], reader: Reader[T], keep_as: Path) -> tuple[T, str]:
    """Ask; on a reply with no text or one `reader.parse` rejects keep it (sanitised, as `keep_as`.rejected.txt)
    and ask once more with the repair prompt for the error. A reply cut off at the token limit is asked again with
    a larger allowance instead (answered), never repaired: a repair would be cut off the same way. A second
    unusable reply raises AgentOutputError naming it."""
    secrets = call.secrets()
    reply = answered(call, messages)
    content = scrub(reply.content, secrets)
    try:
        return _read(reply, content, reader.parse), content
    except AgentOutputError as exc:
        first = exc
        keep(keep_as.with_name(f"{keep_as.name}.rejected.txt"), content, secrets)
        log.info("%s rejected (%s): asking once to repair it", reader.what, exc)
        follow_up = [
            *messages,
            {"role": "assistant", "content": content},
            {"role": "user", "content": reader.repair(str(exc))},
        ]
    try:
        fixed = answered(call, follow_up, reply.max_tokens, retry=False)
    except OverBudget as over:
        no_repair = Phrase(key="agent.no_repair", phrases={"first": [why_of(first)], "why": [over.phrase]})
        raise AgentOutputError(f"{first} (no repair: {over.reason})", no_repair) from over
    except ReplyCut as cut:
        both = Phrase(key="agent.repair_cut", phrases={"first": [why_of(first)], "cut": [why_of(cut)]})
        raise ReplyCut(f"{first}; and the repair reply: {cut}", both) from cut
    second = scrub(fixed.content, secrets)
    try:
        return _read(fixed, second, reader.parse), second
    except AgentOutputError:
        keep(keep_as.with_name(f"{keep_as.name}.rejected-repair.txt"), second, secrets)
        raise


def _read(result: ChatResult, content: str, parse: Callable[[str], T]) -> T:
    """The reply's content parsed, or the reason it has none to parse (tool calls, a refusal, a filter)."""
    missing = no_text_phrase(result)
    if missing is not None:
        raise AgentOutputError(*missing)
    return parse(content)


def keep(path: Path, text: str, secrets: list[str]) -> None:
    """A rejected reply kept on disk for a person to read: secrets masked, terminal escapes removed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(sanitise(text, secrets))
