"""Ask the agent about one kernel's change: prompt → gateway → validated AgentReview → ledger row."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import requests

from bot.agent.client import GatewayClient, fingerprint, validate_base_url
from bot.agent.review import AgentOutputError, parse_review
from bot.changes import FileChange
from bot.errors import ServiceError
from bot.ledger import Ledger, UsageRow
from bot.manifest import Kernel
from bot.redact import scrub
from bot.render import render
from bot.report import AgentReport
from bot.settings import Settings

log = logging.getLogger(__name__)

MAX_DIFF_CHARS = 60_000


def build_messages(kernel: Kernel, changes: list[FileChange]) -> tuple[list[dict[str, str]], list[str]]:
    """System and user messages; returns the files left out of the diff for size."""
    assert kernel.task is not None
    parts, unseen, used = [], [], 0
    for change in changes:
        if used + len(change.diff) > MAX_DIFF_CHARS:
            unseen.append(change.path)
            continue
        parts.append(change.diff)
        used += len(change.diff)
    system = render("prompts/review_system.md.j2", task=kernel.task, kernel=kernel.name)
    user = render(
        "prompts/review_user.md.j2",
        task=kernel.task,
        task_json=kernel.task.model_dump_json(indent=2),
        kernel=kernel.name,
        config_json=json.dumps(kernel.config, sort_keys=True),
        files=[c.path for c in changes],
        diff="".join(parts),
    )
    return [{"role": "system", "content": system}, {"role": "user", "content": user}], unseen


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
) -> tuple[AgentReport, list[str]]:
    """One agent review of one kernel. Raises ServiceError only after recording what happened."""
    domain = kernel.manifest.domain.value
    task = kernel.task
    if task is None:
        return AgentReport(status="skipped", domain=domain, reason=f"{kernel.name} has no agent task file"), []
    report = AgentReport(status="offline", domain=domain, model=task.model)
    variable = task.provider.api_key_env
    key = settings.key_for(variable)
    if offline:
        report.reason = "--offline given: the agent was not asked"
        return report, []
    if key is None:
        report.reason = f"{variable} is not set: the agent was not asked"
        return report, []
    base_url = validate_base_url(settings.base_url_override or task.provider.base_url)
    client = GatewayClient(base_url, key, variable, timeout_s=settings.agent_timeout_s, session=session)
    messages, unseen = build_messages(kernel, changes)
    try:
        result = client.chat(task.model, messages)
    except ServiceError as exc:
        report.status, report.reason = "error", str(exc)
        raise AgentFailed(report, unseen) from exc
    ledger.record_usage(
        UsageRow(
            task_id=task.task_id,
            model_name=result.model,
            prompt_tokens=result.prompt_tokens,
            completion_tokens=result.completion_tokens,
            total_tokens=result.total_tokens,
            request_id=result.request_id,
            domain=domain,
            key_fingerprint=fingerprint(key),
            pr=pr,
            head_sha=head_sha,
            status="ok",
            status_code=result.status_code,
            latency_ms=result.latency_ms,
            usage_source="reported" if result.usage_reported else "missing",
        )
    )
    report.model = result.model
    report.requests = 1
    report.prompt_tokens = result.prompt_tokens
    report.completion_tokens = result.completion_tokens
    report.total_tokens = result.total_tokens
    candidates_dir.mkdir(parents=True, exist_ok=True)
    stem = f"{head_sha[:12]}_{kernel.name}"
    try:
        review = parse_review(result.content)
    except AgentOutputError as exc:
        report.status, report.reason = "error", f"agent reply rejected: {exc}"
        (candidates_dir / f"{stem}.rejected.txt").write_text(scrub(result.content, [key]))
        return report, unseen
    (candidates_dir / f"{stem}.json").write_text(review.model_dump_json(indent=2))
    report.status = "ok"
    report.risk_notes = review.risk_notes
    report.candidate_patch = review.candidate_patch
    report.local_commands = review.local_commands
    report.expected_metrics = review.expected_metrics
    return report, unseen


class AgentFailed(Exception):
    """Carries the agent section out of a failed call so the review can still be written."""

    def __init__(self, report: AgentReport, unseen: list[str]) -> None:
        super().__init__(report.reason)
        self.report = report
        self.unseen = unseen
