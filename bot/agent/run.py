"""Ask the agent about one kernel's change: prompt → the shared exchange (cache, budget, gateway, one repair) →
AgentReview → ledger rows."""

from __future__ import annotations

import hashlib
import json
import logging
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Literal

import requests

from bot.agent import estimate, materials, prompt
from bot.agent.client import Attempt, ChatResult, GatewayClient, fingerprint, validate_base_url
from bot.agent.exchange import Cache, OverBudget, Reader, ReplyCut, exchange, sanitise
from bot.agent.materials import Baseline, Piece, Sources
from bot.agent.prompt import render_prompt
from bot.agent.retry import RetryPolicy
from bot.agent.review import AgentReview, parse_review
from bot.config.manifest import Kernel
from bot.config.repo import Material
from bot.config.settings import Settings
from bot.config.task import AgentTask
from bot.ledger import Ledger
from bot.models.agent_report import AgentReport
from bot.models.diff import FileChange
from bot.models.finding import Phrase
from bot.models.ledger import UsageRow
from bot.spend import budget

log = logging.getLogger(__name__)

TEMPERATURE = 0.1

OFFLINE = Phrase(key="agent.offline")  # --offline given: the agent was not asked


def cache_key(wire: str, model: str, messages: list[dict[str, str]], max_tokens: int) -> str:
    """Same wire, model, prompt and limits → the same key."""
    blob = json.dumps(
        {"wire": wire, "model": model, "messages": messages, "temperature": TEMPERATURE, "max_tokens": max_tokens},
        sort_keys=True,
    )
    return "sha256:" + hashlib.sha256(blob.encode()).hexdigest()


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

    def secrets(self) -> list[str]:
        return self.settings.secrets()

    def record_cached(self, model: str) -> None:
        """The ledger row of a reply reused from the cache (0 tokens)."""
        self.record(
            self.row(f"cache-{uuid.uuid4().hex}", model_name=model, status="cached", cached=True, usage_source="cache")
        )

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
            raise OverBudget(allowance.reason, allowance.why)
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


def reader(kernel: Kernel) -> Reader[AgentReview]:
    """How a review's reply is validated (AgentReview, the candidate confined to the kernel's folder) and repaired."""
    return Reader(
        parse=lambda content: parse_review(content, kernel.name, kernel.path),
        repair=lambda error: render_prompt("repair_user.md.j2", error=error, kernel=kernel.name, folder=kernel.path),
        what=f"agent reply for {kernel.name}",
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
    rules: Kernel | None = None,
    sources: Sources | None = None,
    base_sha: str | None = None,
) -> tuple[AgentReport, list[str]]:
    """One agent review of one kernel; returns it and the files left out of the prompt for size. `rules`: the
    manifest the change is held to (base's; default `kernel`), whose cases, limits and tunables the prompt shows;
    `sources`: the changed files' text on each side (the changed functions); `base_sha`: whose figures of main's
    history to prefer. Raises AgentFailed (carrying the report) only when the gateway failed, after recording what
    happened."""
    domain = kernel.manifest.domain
    task = kernel.task
    if task is None:
        return said(AgentReport(status="skipped", domain=domain, kernel=kernel.name), no_task(kernel.name)), []
    report = AgentReport(status="offline", domain=domain, kernel=kernel.name, model=task.model)
    variable = task.provider.api_key_env
    if offline:
        report.reason = OFFLINE
        return report, []
    expected = settings.key_variable(domain)
    if expected is not None and variable != expected:
        return said(report, key_mismatch(variable, domain, expected)), []
    key = settings.agent_key_for(variable)
    if key is None:
        return said(report, key_unset(variable)), []
    validate_base_url(settings.base_url_override or task.provider.base_url)
    limit = settings.budget_request.get(domain)
    pieces, missing = gather(kernel, rules or kernel, changes, settings, ledger, sources, base_sha)
    not_available = [line for line, _ in missing]
    trimmed = prompt.trim(kernel, changes, limit, estimate.count_messages, pieces, not_available)
    unseen = trimmed.left_out
    inputs_of(report, trimmed, missing)
    if trimmed.prompt_tokens > limit:
        report.status = "over_budget"
        return said(report, prompt_over_budget(trimmed.prompt_tokens, limit, domain)), unseen
    messages = prompt.messages(kernel, trimmed.included, unseen, trimmed.pieces, trimmed.pieces_left_out, not_available)
    key_of_prompt = cache_key(settings.agent_wire, task.model, messages, settings.agent_max_tokens)
    call = Call(task, domain, settings, ledger, key=key, head_sha=head_sha, pr=pr, session=session, sleep=sleep)
    answer = exchange(
        call,
        messages,
        reader(kernel),
        keep_as=candidates_dir / f"{head_sha[:12]}_{kernel.name}",
        cache=Cache(ledger, key_of_prompt, settings.agent_wire) if use_cache else None,
    )
    answer.spend.onto(report)
    if answer.outcome == "cached":
        report.cached = True
        said(report, cached(answer.cached_at))
    elif answer.outcome == "over_budget":
        report.status = "over_budget"
        return said(report, over_budget(answer.reason, answer.why)), unseen
    elif answer.outcome == "gateway_error":
        report.status = "error"
        said(report, Phrase(key="agent.gateway_error", params={"error": answer.reason}))
        raise AgentFailed(report, unseen, answer.reason) from answer.error
    elif answer.outcome in ("cut", "rejected"):
        report.status = "error"
        return said(report, rejected(answer.reason, repaired=answer.outcome == "rejected", why=answer.why)), unseen
    assert answer.reply is not None
    return _ok(report, answer.reply, answer.model or task.model, kernel, head_sha, candidates_dir), unseen


# Why the agent was not asked or gave no reply: a message of the catalog (bot/wording/messages.py), by its key —
# the agent's room does not import the catalog; report.json keeps the phrase, the comment renders it.
Said = Phrase


def said(report: AgentReport, reason: Said) -> AgentReport:
    report.reason = reason
    return report


def no_task(kernel: str) -> Said:
    return Phrase(key="agent.no_task", params={"kernel": kernel})


def key_mismatch(variable: str, domain: str, expected: str) -> Said:
    return Phrase(key="agent.key_mismatch", params={"variable": variable, "domain": domain, "expected": expected})


def key_unset(variable: str) -> Said:
    return Phrase(key="agent.key_unset", params={"variable": variable})


def prompt_over_budget(tokens: int, limit: int, domain: str) -> Said:
    variable = f"OPGATE_BUDGET_REQUEST_{domain.upper()}"
    return Phrase(key="agent.prompt_over_budget", params={"tokens": tokens, "limit": limit, "variable": variable})


def cached(when: str) -> Said:
    return Phrase(key="agent.cached", params={"when": when})


def over_budget(reason: str, why: Phrase | None) -> Said:
    """The budget refused a request (its reason as a phrase where it has one, else as written)."""
    return Phrase(key="agent.over_budget", phrases={"why": [why or Phrase.as_written(reason)]})


def rejected(error: str, *, repaired: bool, why: Phrase | None = None) -> Said:
    """The reply failed validation (`repaired`: again after the one repair request), or was cut off; `error`: the
    validation error as the reader raised it; `why`: the same as a message of the catalog, where opgate wrote it
    (a reply cut off: ReplyCut.why), else `error` is shown as written."""
    key = "agent.rejected_repair" if repaired else "agent.rejected"
    return Phrase(key=key, phrases={"error": [why]}) if why is not None else Phrase(key=key, params={"error": error})


def base_figures(ledger: Ledger, kernel: str, base_sha: str | None) -> Baseline:
    """Base's figures of `kernel` from main's history in this ledger (base's own commit where it was recorded, else
    the latest recorded main commit), or why there are none."""
    cases = ledger.main_case_figures(kernel, base_sha)
    resources = ledger.main_resource_figures(kernel, base_sha)
    if not cases and not resources:
        return Baseline(
            missing=f"main's history in this ledger holds no figures of {kernel} (`opgate history record` stores "
            "them for every push to main; main-record.yml runs it)",
            missing_why=Phrase(key="agent.no_history", params={"kernel": kernel}),
        )
    sha = cases[0].sha if cases else resources[0].sha
    return Baseline(sha=sha, cases=cases, resources=resources, is_base=sha == base_sha)


def gather(
    kernel: Kernel,
    rules: Kernel,
    changes: list[FileChange],
    settings: Settings,
    ledger: Ledger,
    sources: Sources | None,
    base_sha: str | None,
    *,
    leave_out: frozenset[Material] = frozenset(),
) -> tuple[list[Piece], list[tuple[str, Phrase]]]:
    """The domain's materials as prompt pieces, most important first, and a line for each it asks for that this job
    cannot read ("base figures: not available — …"), each with the same line as a phrase of the message catalog
    (data: the agent's room writes the English itself and never imports the catalog; the comment renders the
    phrase, and tests/test_materials.py holds the two equal). `leave_out`: materials this prompt has no use for or
    always carries whole (opgate tune: no diff, so no changed function; the tunable space is its task)."""
    order = tuple(m for m in settings.repo_config.materials(kernel.manifest.domain) if m not in leave_out)
    missing: list[tuple[str, Phrase]] = []
    baseline = Baseline(missing="not asked")
    if "baseline" in order:
        baseline = base_figures(ledger, kernel.name, base_sha)
        if not baseline.available:
            why = baseline.missing_why
            missing.append((
                f"base figures: not available — {baseline.missing}",
                Phrase(key="agent.no_base_figures", phrases={"why": [why]})
                if why is not None
                else Phrase(key="agent.no_base_figures", params={"why": baseline.missing}),
            ))  # fmt: skip
    if "functions" in order and sources is None:
        no_files = "changed functions: not available — this job read no file of base or head"
        missing.append((no_files, Phrase(key="agent.no_functions")))
    reference = rules.folder / rules.manifest.reference.module
    try:
        reference_text: str | None = reference.read_text(encoding="utf-8", errors="replace")
    except OSError:
        reference_text = None
    found = materials.pieces(
        kernel,
        rules,
        changes,
        order=order,
        baseline=baseline,
        sources=sources or Sources(),
        reference_text=reference_text,
    )
    return found, missing


def seen(pieces: list[Piece]) -> list[Phrase]:
    """What the prompt carried besides the task and the diff, as phrases of the message catalog (which the comment
    renders)."""
    out = [p.label_why for p in pieces if p.material != "functions"]
    functions = [p for p in pieces if p.material == "functions"]
    if functions:
        out.append(Phrase(key="agent.piece_functions", params={"count": len(functions)}))
    return out


def inputs_of(report: AgentReport, trimmed: prompt.Trimmed, missing: list[tuple[str, Phrase]]) -> None:
    """What the agent's prompt carried and lacked (`missing`: the materials not available; then the pieces the trim
    left out for size) onto its report, each line a phrase of the catalog."""
    report.inputs = seen(trimmed.pieces)
    lacked = [why for _, why in missing]
    if trimmed.dropped:
        lacked.append(Phrase(key="agent.left_out", phrases={"pieces": [p.label_why for p in trimmed.dropped]}))
    report.inputs_missing = lacked


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

    def __init__(self, report: AgentReport, unseen: list[str], error: str) -> None:
        super().__init__(error)
        self.report = report
        self.unseen = unseen


__all__ = ["AgentFailed", "Call", "OverBudget", "ReplyCut", "ask", "cache_key", "reader", "sanitise"]
