"""Ask the agent about one kernel's change: prompt → cache → budget → gateway → AgentReview → ledger rows."""

from __future__ import annotations

import hashlib
import json
import logging
import re
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Literal, TypeVar

import requests

from bot.agent import estimate, prompt
from bot.agent.client import Attempt, ChatResult, GatewayClient, GatewayError, fingerprint, validate_base_url
from bot.agent.prompt import render_prompt
from bot.agent.retry import RetryPolicy
from bot.agent.review import AgentOutputError, AgentReview, parse_review
from bot.config.manifest import AgentTask, Kernel
from bot.config.settings import Settings
from bot.ledger import Ledger, now
from bot.models.diff import FileChange
from bot.models.ledger import CachedReply, UsageRow
from bot.models.report import AgentReport
from bot.spend import budget
from bot.text.redact import scrub

T = TypeVar("T")
log = logging.getLogger(__name__)

TEMPERATURE = 0.1
_CONTROL = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|[\x00-\x08\x0b-\x1f\x7f]")


def cache_key(wire: str, model: str, messages: list[dict[str, str]], max_tokens: int) -> str:
    """Same wire, model, prompt and limits → the same key."""
    blob = json.dumps(
        {"wire": wire, "model": model, "messages": messages, "temperature": TEMPERATURE, "max_tokens": max_tokens},
        sort_keys=True,
    )
    return "sha256:" + hashlib.sha256(blob.encode()).hexdigest()


def sanitise(text: str, secrets: list[str]) -> str:
    """A reply made safe to keep on disk: every known secret masked, terminal escapes removed."""
    return _CONTROL.sub("", scrub(text, secrets))


def estimated_usage(result: ChatResult, estimated_prompt: int) -> dict[str, int]:
    """Counts for a reply whose usage the gateway did not report usably (missing, zero, not a number): the
    offline estimate of the prompt and of the reply, or what the gateway said where that is larger."""
    prompt = max(estimated_prompt, result.prompt_tokens)
    completion = max(estimate.count(result.content), result.completion_tokens)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": max(prompt + completion, result.total_tokens),
    }


class OverBudget(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Call:
    """The context every gateway call of one ask shares: who asks, with which key, against which budget."""

    def __init__(
        self,
        task: AgentTask,
        domain: str,
        settings: Settings,
        ledger: Ledger,
        *,
        key: str,
        head_sha: str,
        pr: int | None,
        session: requests.Session | None,
        sleep: Callable[[float], None],
        purpose: Literal["review", "tune"] = "review",
        tuning_run: str | None = None,
    ) -> None:
        self.task, self.domain = task, domain
        self.settings, self.ledger = settings, ledger
        self.key, self.head_sha, self.pr = key, head_sha, pr
        self.session, self.sleep = session, sleep
        self.purpose, self.tuning_run = purpose, tuning_run
        self.answered: list[ChatResult] = []

    def row(self, request_id: str, **fields: object) -> UsageRow:
        data: dict[str, object] = {
            "task_id": self.task.task_id,
            "model_name": self.task.model,
            "prompt_tokens": 0,
            "completion_tokens": 0,
            "total_tokens": 0,
            "request_id": request_id,
            "domain": self.domain,
            "key_fingerprint": fingerprint(self.key),
            "pr": self.pr,
            "head_sha": self.head_sha,
            "status": "ok",
            "usage_source": "none",
            "wire": self.settings.agent_wire,
            "purpose": self.purpose,
            "tuning_run": self.tuning_run,
        }
        data.update(fields)
        return UsageRow.model_validate(data)

    def record(self, row: UsageRow) -> None:
        if not self.ledger.record_usage(row):
            log.warning("gateway reused request id %s: recorded under a local suffix", row.request_id)
            self.ledger.record_usage(row.model_copy(update={"request_id": f"{row.request_id}~{uuid.uuid4().hex[:8]}"}))

    def chat(self, messages: list[dict[str, str]], max_tokens: int | None = None) -> ChatResult:
        """One gateway request under a budget reservation; every attempt becomes a ledger row. `max_tokens`
        defaults to OPGATE_AGENT_MAX_TOKENS; the domain says how it is sent and whether a temperature is."""
        max_tokens = max_tokens or self.settings.agent_max_tokens
        domain = self.settings.domains.get(self.domain)
        estimated = estimate.count_messages(messages)
        tokens = budget.reservation_size(estimated, max_tokens, self.ledger.estimate_ratios(self.domain))
        allowance = budget.reserve(
            self.ledger, domain=self.domain, limit=self.settings.budget_weekly.get(self.domain), tokens=tokens
        )
        if not allowance.allowed or allowance.call_id is None:
            self.record(self.row(f"local-{uuid.uuid4().hex}", status="over_budget", error_type="over_budget"))
            raise OverBudget(allowance.reason)
        call_id = allowance.call_id
        base_url = validate_base_url(self.settings.base_url_override or self.task.provider.base_url)
        client = GatewayClient(
            base_url,
            self.key,
            self.task.provider.api_key_env,
            wire_name=self.settings.agent_wire,
            timeout_s=self.settings.agent_timeout_s,
            session=self.session,
            policy=RetryPolicy(retries=self.settings.agent_retries, base_s=self.settings.agent_backoff_s),
            sleep=self.sleep,
            on_attempt=lambda attempt: self.record(self._attempt_row(attempt, call_id, estimated)),
        )
        try:
            result = client.chat(
                self.task.model,
                messages,
                temperature=TEMPERATURE if domain is None or domain.send_temperature else None,
                max_tokens=max_tokens,
                tokens_field=domain.max_tokens_field if domain is not None else "max_tokens",
            )
        except BaseException:
            budget.release(self.ledger, call_id)
            raise
        if not result.usage_reported:
            log.warning(
                "gateway request %s: %s; recording the offline estimate", result.request_id, result.usage_problem
            )
            result = result.model_copy(update=estimated_usage(result, estimated))
        budget.settle(self.ledger, call_id, result.total_tokens)
        self.answered.append(result)
        return result

    def _attempt_row(self, attempt: Attempt, call_id: str, estimated: int) -> UsageRow:
        common = {
            "call_id": call_id,
            "attempt": attempt.number,
            "status_code": attempt.status_code,
            "latency_ms": round(attempt.latency_ms, 1),
            "estimated_prompt_tokens": estimated,
        }
        res = attempt.result
        if res is None:
            failure = attempt.failure.value if attempt.failure else "error"
            return self.row(f"{call_id}-a{attempt.number}", status="error", error_type=failure, **common)
        if res.usage_reported:
            prompt_tokens, completion, total, source = (
                res.prompt_tokens,
                res.completion_tokens,
                res.total_tokens,
                "reported",
            )
            ratio = round(prompt_tokens / estimated, 4) if estimated and prompt_tokens else None
        else:
            counts = estimated_usage(res, estimated)
            prompt_tokens, completion, total = (
                counts["prompt_tokens"],
                counts["completion_tokens"],
                counts["total_tokens"],
            )
            source, ratio = "estimated", None
        return self.row(
            res.request_id or f"{call_id}-a{attempt.number}",
            model_name=res.model,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion,
            total_tokens=total,
            usage_source=source,
            cached_tokens=res.cached_tokens,
            reasoning_tokens=res.reasoning_tokens,
            estimate_ratio=ratio,
            **common,
        )


def ask(
    kernel: Kernel,
    changes: list[FileChange],
    *,
    settings: Settings,
    ledger: Ledger,
    head_sha: str,
    pr: int | None,
    offline: bool,
    candidates_dir: Path,
    session: requests.Session | None = None,
    sleep: Callable[[float], None] = time.sleep,
    use_cache: bool = True,
) -> tuple[AgentReport, list[str]]:
    """One agent review of one kernel; returns it and the files left out of the prompt for size.
    Raises AgentFailed (carrying the report) only when the gateway failed, after recording what happened."""
    domain = kernel.manifest.domain
    task = kernel.task
    if task is None:
        reason = f"{kernel.name} has no agent task file"
        return AgentReport(status="skipped", domain=domain, kernel=kernel.name, reason=reason), []
    report = AgentReport(status="offline", domain=domain, kernel=kernel.name, model=task.model)
    variable = task.provider.api_key_env
    if offline:
        report.reason = "--offline given: the agent was not asked"
        return report, []
    expected = settings.key_variable(domain)
    if expected is not None and variable != expected:
        report.reason = (
            f"the task file names {variable}, but the {domain} domain's key is {expected} "
            f"([tool.opgate.domains.{domain}] key): the agent was not asked"
        )
        return report, []
    key = settings.agent_key_for(variable)
    if key is None:
        report.reason = f"{variable} is not set: the agent was not asked"
        return report, []
    validate_base_url(settings.base_url_override or task.provider.base_url)
    limit = settings.budget_request.get(domain)
    trimmed = prompt.trim(kernel, changes, limit, estimate.count_messages)
    unseen = trimmed.left_out
    if trimmed.prompt_tokens > limit:
        report.status = "over_budget"
        report.reason = (
            f"the prompt needs {trimmed.prompt_tokens} tokens without any diff, over the per-request budget of "
            f"{limit} (OPGATE_BUDGET_REQUEST_{domain.upper()}); the agent was not asked, the gates still run"
        )
        return report, unseen
    messages = prompt.messages(kernel, trimmed.included, unseen)
    key_of_prompt = cache_key(settings.agent_wire, task.model, messages, settings.agent_max_tokens)
    call = Call(task, domain, settings, ledger, key=key, head_sha=head_sha, pr=pr, session=session, sleep=sleep)
    hit = ledger.cached_reply(key_of_prompt) if use_cache else None
    if hit is not None and (review := _reparse(hit.content, kernel.name, kernel.path)) is not None:
        call.record(
            call.row(
                f"cache-{uuid.uuid4().hex}", model_name=hit.model, status="cached", cached=True, usage_source="cache"
            )
        )
        report.cached = True
        report.reason = f"cached reply of {hit.created_at} for the same model and prompt: 0 tokens spent"
        return _ok(report, review, hit.model, kernel, head_sha, candidates_dir), unseen
    try:
        review, content = converse(call, kernel, messages, candidates_dir, f"{head_sha[:12]}_{kernel.name}")
    except OverBudget as exc:
        _spent(report, call)
        report.status, report.reason = "over_budget", f"{exc.reason}; the agent was not asked, the gates still run"
        return report, unseen
    except GatewayError as exc:
        _spent(report, call)
        report.status, report.reason = "error", str(exc)
        raise AgentFailed(report, unseen) from exc
    except ReplyCut as exc:
        _spent(report, call)
        report.status, report.reason = "error", f"agent reply rejected: {exc}"
        return report, unseen
    except AgentOutputError as exc:
        _spent(report, call)
        report.status, report.reason = "error", f"agent reply rejected after one repair request: {exc}"
        return report, unseen
    _spent(report, call)
    if use_cache:
        remember(ledger, key_of_prompt, report, report.model or task.model, settings.agent_wire, content)
    return _ok(report, review, report.model or task.model, kernel, head_sha, candidates_dir), unseen


class ReplyCut(AgentOutputError):
    """The reply stopped at the completion cap (`finish_reason: "length"`) even with the larger allowance, or
    the larger allowance did not fit the budget: a repair request would be cut off the same way."""


def answered(
    call: Call, messages: list[dict[str, str]], max_tokens: int | None = None, *, retry: bool = True
) -> ChatResult:
    """A reply that was not cut off. One cut off at max_tokens N is asked once more with 2N (reserved against the
    budget like any request); cut off again, or no room for 2N: ReplyCut, saying so."""
    first = call.chat(messages, max_tokens)
    if not first.truncated:
        return first
    cut = f'the reply was cut off at max_tokens {first.max_tokens} (finish_reason "length")'
    if not retry:
        raise ReplyCut(f"{cut}; not asked again")
    larger = 2 * first.max_tokens
    log.info("agent reply %s: %s; asking once more with max_tokens %s", first.request_id, cut, larger)
    try:
        second = call.chat(messages, larger)
    except OverBudget as over:
        raise ReplyCut(f"{cut}, and max_tokens {larger} does not fit the budget ({over.reason})") from over
    if second.truncated:
        raise ReplyCut(f"{cut}, and again at max_tokens {larger}; raise OPGATE_AGENT_MAX_TOKENS or shorten the task")
    return second


def no_text(result: ChatResult) -> str | None:
    """Why a reply holds no text to read (tool calls instead, a refusal, a filter); None when it has some."""
    if result.content.strip():
        return None
    if result.tool_calls:
        names = ", ".join(result.tool_calls[:5])
        return (
            f"the reply holds no text (content null) but {len(result.tool_calls)} tool call(s) ({names}); opgate "
            "offers no tools and reads one JSON object in the message content"
        )
    if result.refusal:
        return f"the model refused: {result.refusal[:300]}"
    why = f" (finish_reason {result.finish_reason!r})" if result.finish_reason else ""
    return f"the reply holds no text{why}"


def converse(
    call: Call, kernel: Kernel, messages: list[dict[str, str]], candidates_dir: Path, stem: str
) -> tuple[AgentReview, str]:
    """The review's request, with one repair (with_repair)."""
    return with_repair(
        call,
        messages,
        lambda content: parse_review(content, kernel.name, kernel.path),
        lambda error: render_prompt("repair_user.md.j2", error=error, kernel=kernel.name, folder=kernel.path),
        candidates_dir / stem,
        f"agent reply for {kernel.name}",
    )


def with_repair(
    call: Call,
    messages: list[dict[str, str]],
    parse: Callable[[str], T],
    repair: Callable[[str], str],
    keep_as: Path,
    what: str,
) -> tuple[T, str]:
    """Ask; on a reply with no text or one `parse` rejects keep it (sanitised, as `keep_as`.rejected.txt) and ask
    once more with the `repair` prompt for the error. A reply cut off at the token limit is asked again with a
    larger allowance instead (answered), never repaired: a repair would be cut off the same way."""
    secrets = call.settings.secrets()
    reply = answered(call, messages)
    content = scrub(reply.content, secrets)
    try:
        return _read(reply, content, parse), content
    except AgentOutputError as exc:
        first = exc
        _keep(keep_as.with_name(f"{keep_as.name}.rejected.txt"), content, secrets)
        log.info("%s rejected (%s): asking once to repair it", what, exc)
        follow_up = [
            *messages,
            {"role": "assistant", "content": content},
            {"role": "user", "content": repair(str(exc))},
        ]
    try:
        fixed = answered(call, follow_up, reply.max_tokens, retry=False)
    except OverBudget as over:
        raise AgentOutputError(f"{first} (no repair: {over.reason})") from over
    except ReplyCut as cut:
        raise ReplyCut(f"{first}; and the repair reply: {cut}") from cut
    second = scrub(fixed.content, secrets)
    try:
        return _read(fixed, second, parse), second
    except AgentOutputError:
        _keep(keep_as.with_name(f"{keep_as.name}.rejected-repair.txt"), second, secrets)
        raise


def _read(result: ChatResult, content: str, parse: Callable[[str], T]) -> T:
    """The reply's content parsed, or the reason it has none to parse (tool calls, a refusal, a filter)."""
    missing = no_text(result)
    if missing is not None:
        raise AgentOutputError(missing)
    return parse(content)


def remember(ledger: Ledger, key: str, report: AgentReport, model: str, wire: str, content: str) -> None:
    """Store a validated reply under its prompt's cache key, with the tokens it cost."""
    ledger.store_reply(
        CachedReply(
            cache_key=key,
            model=model,
            wire=wire,
            content=content,
            prompt_tokens=report.prompt_tokens,
            completion_tokens=report.completion_tokens,
            created_at=now(),
        )
    )


def _reparse(content: str, kernel: str, folder: str | None = None) -> AgentReview | None:
    try:
        return parse_review(content, kernel, folder)
    except AgentOutputError:
        return None  # stored under older rules: ask again


def _keep(path: Path, text: str, secrets: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(sanitise(text, secrets))


def _spent(report: AgentReport, call: Call) -> None:
    report.requests = len(call.answered)
    report.prompt_tokens = sum(r.prompt_tokens for r in call.answered)
    report.completion_tokens = sum(r.completion_tokens for r in call.answered)
    report.total_tokens = sum(r.total_tokens for r in call.answered)
    report.usage_estimated = sum(1 for r in call.answered if not r.usage_reported)
    if call.answered:
        report.model = call.answered[-1].model


def _ok(
    report: AgentReport, review: AgentReview, model: str, kernel: Kernel, head_sha: str, candidates_dir: Path
) -> AgentReport:
    candidates_dir.mkdir(parents=True, exist_ok=True)
    (candidates_dir / f"{head_sha[:12]}_{kernel.name}.json").write_text(review.model_dump_json(indent=2))
    report.status = "ok"
    report.model = model
    report.risk_notes = review.risk_notes
    report.candidate_patch = review.candidate_patch
    report.local_commands = review.local_commands
    report.expected_metrics = review.expected_metrics
    report.test_matrix = review.test_matrix
    return report


class AgentFailed(Exception):
    """Carries the agent section out of a failed call so the review can still be written."""

    def __init__(self, report: AgentReport, unseen: list[str]) -> None:
        super().__init__(report.reason)
        self.report = report
        self.unseen = unseen
