"""Publish a review on its pull request: the sticky comment, the `opgate/acceptance` status, the `opgate/review` check
run with the review's annotations, the step summary."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from bot.config.settings import Settings
from bot.edges.events import PullRequestEvent
from bot.edges.github import GitHubEdge
from bot.errors import InputError, ServiceError
from bot.ledger import Ledger
from bot.models.github import Annotation, CheckRunRef, CommentRef, StatusRef, StatusState
from bot.models.ledger import AcceptanceRow, UsageRow
from bot.models.report import Report
from bot.present import digest
from bot.present.render import REVIEW_MARKER, render_comment
from bot.spend.budget import BudgetState, state
from bot.verdict.accept import accept_waiting, gates_overridden, needs_accept

log = logging.getLogger(__name__)

ACCEPTANCE_CONTEXT = "opgate/acceptance"
ACCEPTED_CONTEXT = "opgate/accepted"
CHECK_RUN_NAME = "opgate/review"  # carries the annotations; neutral: the status above is what gates
REVIEW_ACTIONS = ("opened", "reopened", "synchronize", "ready_for_review")
STATES: dict[str, StatusState] = {"pass": "success", "fail": "failure", "error": "error"}


class DomainSpend(BaseModel):
    """Agent tokens of one domain: this review, the whole pull request so far, and the weekly budget."""

    model_config = ConfigDict(frozen=True)

    domain: str
    run_requests: int = 0
    run_tokens: int = 0
    pr_requests: int = 0
    pr_tokens: int = 0
    week_budget: int | None = None  # the domain's weekly budget (settings); None renders as "—"
    week_used: int | None = None  # settled + reserved this ISO week, every PR (bot.budget.state)


class PrContext(BaseModel):
    """What the comment says about the pull request beyond this review: acceptances and spend so far."""

    model_config = ConfigDict(frozen=True)

    number: int
    head_sha: str
    accepted: list[AcceptanceRow] = []  # granted for this head: still valid
    voided: list[AcceptanceRow] = []  # granted for an earlier head: voided by a later push
    spend: list[DomainSpend] = []
    self_accept: bool = False  # the configuration's allow_self_accept: authors and pushers may /accept (a weakening)


def skip_reason(event: PullRequestEvent) -> str | None:
    """Why a pull_request event gets no review (a draft, or an action that changes no code); None to review."""
    if event.action not in REVIEW_ACTIONS:
        return f"action {event.action!r} is not one of {', '.join(REVIEW_ACTIONS)}"
    if event.pull_request.draft:
        return f"pull request #{event.number} is a draft (reviewed once it is ready for review)"
    return None


def pr_context(
    report: Report,
    pr: int,
    usage: list[UsageRow],
    acceptances: list[AcceptanceRow],
    budgets: Mapping[str, BudgetState] | None = None,
    *,
    self_accept: bool = False,
) -> PrContext:
    """The pull request's acceptances and cumulative spend per domain, from ledger rows (pure)."""
    mine = [a for a in acceptances if a.pr == pr]
    rows = [u for u in usage if u.pr == pr]
    domains = sorted({a.domain for a in report.agents if a.domain} | {u.domain for u in rows})
    spend = []
    for domain in domains:
        run = [a for a in report.agents if a.domain == domain]
        pr_rows = [u for u in rows if u.domain == domain]
        spend.append(
            DomainSpend(
                domain=domain,
                run_requests=sum(a.requests for a in run),
                run_tokens=sum(a.total_tokens for a in run),
                pr_requests=len(pr_rows),
                pr_tokens=sum(u.total_tokens for u in pr_rows),
                week_budget=week.limit if (week := (budgets or {}).get(domain)) else None,
                week_used=week.used + week.reserved if week else None,
            )
        )
    return PrContext(
        number=pr,
        head_sha=report.head_sha,
        accepted=[a for a in mine if a.head_sha == report.head_sha],
        voided=[a for a in mine if a.head_sha != report.head_sha],
        spend=spend,
        self_accept=self_accept,
    )


def week_budgets(ledger: Ledger, settings: Settings, domains: Sequence[str]) -> dict[str, BudgetState]:
    """This ISO week's budget state of each known domain (read only)."""
    known = [d for d in domains if d in settings.domains]
    return {d: state(ledger, domain=d, limit=settings.budget_weekly.get(d)) for d in known}


def compose(report: Report, unseen_files: list[str], context: PrContext | None) -> str:
    """The comment as posted: the review, plus what the pull request's history adds to it."""
    return render_comment(report, unseen_files=unseen_files, pr=context)


def acceptance_status(report: Report, acceptances: Sequence[AcceptanceRow] = ()) -> tuple[StatusState, str]:
    """`opgate/acceptance`: success, failure, pending or error with a one-line description (pure).

    A pass is success; a failed gate failure (success once a maintainer overrides it for this head); a kernel
    that needs a person's /accept pending until one is recorded for this head; an undecided review success,
    since GitHub's statuses have no neutral state, with a description that says it was not decided."""
    changed = [k for k in report.kernels if k.changed]
    bad = [k for k in report.kernels if k.verdict in ("fail", "error")]
    override = gates_overridden(report, list(acceptances))
    if override is not None:
        return "success", f"gates failed, overridden by @{override.login} ({override.role}): {override.reason}"
    if report.error:
        return "error", f"could not judge: {report.error}"
    if report.verdict == "pass":
        names = ", ".join(k.name for k in changed)
        return "success", f"all gates pass: {names}" if names else "no kernel changed"
    if report.verdict in ("needs_accept", "undecided"):
        lines = [
            ln for k in report.kernels if k.verdict in ("needs_accept", "undecided") for ln in digest.kernel_lines(k)
        ]
        why = f" — {digest.line_text(lines[0])}" if lines else ""
        if report.verdict == "undecided":
            names = ", ".join(
                f"{k.name} ({summary})" if (summary := digest.undecided_summary(k)) else k.name
                for k in report.kernels
                if k.verdict == "undecided"
            )
            return "success", f"undecided, not blocking: {names}{why}"
        waiting = accept_waiting(report, list(acceptances))
        if not waiting:
            who = ", ".join(dict.fromkeys(f"@{r.login}" for r in acceptances if r.head_sha == report.head_sha))
            return "success", f"accepted by {who}: nothing failed, {', '.join(needs_accept(report))} needed a person"
        return "pending", f"needs /accept: {', '.join(waiting)}{why}"
    first = bad[0] if bad else None
    lines = [line for k in bad for line in digest.kernel_lines(k)]  # gate, case, value and limit; short names
    why = f" — {digest.line_text(lines[0], kernel=False)}" if lines else ""
    if first is None:
        for k in report.kernels:
            case = next((c for c in k.cases if c.verdict in ("fail", "error") and c.reasons), None)
            if case is not None:
                first, why = k, f" — {case.name}: {case.reasons[0]}"
                break
    names = ", ".join(k.name for k in bad) or "see the comment"
    label = "gate failed" if report.verdict == "fail" else "could not judge"
    return STATES[report.verdict], f"{label}: {names}{why}"


def write_step_summary(path: Path | None, text: str) -> None:
    """Append the comment to the job summary ($GITHUB_STEP_SUMMARY) when Actions gives one."""
    if path is None:
        return
    try:
        with path.open("a", encoding="utf-8") as f:
            f.write(text.removeprefix(REVIEW_MARKER).lstrip("\n"))
            f.write("\n")
    except OSError as exc:
        log.warning("cannot write the step summary %s: %s", path, exc.strerror)


def open_edge(settings: Settings) -> GitHubEdge:
    """The GitHub edge from settings, finding only what opgate's own login wrote (OPGATE_GITHUB_LOGIN; in Actions
    github-actions[bot]; else the token's user); InputError (exit 2) when the token or repository is missing."""
    if not settings.github_token:
        raise InputError("GITHUB_TOKEN is not set: posting to GitHub needs a token (Actions: github.token)")
    if not settings.github_repository:
        raise InputError("GITHUB_REPOSITORY is not set: posting to GitHub needs owner/name")
    interval = settings.github_write_interval_s
    return GitHubEdge(
        settings.github_api_url,
        settings.github_token,
        settings.github_repository,
        backoff_s=settings.github_backoff_s,
        max_backoff_s=max(30.0, settings.github_backoff_s),
        max_wait_s=settings.github_max_wait_s,
        bot_login=settings.github_login,
        seconds_between_requests=interval / 4 if interval else None,
        seconds_between_writes=interval or None,
    )


class Published(BaseModel):
    comment: CommentRef
    status: StatusRef
    check: CheckRunRef | None = None  # the annotations' check run; None when GitHub refused it (`check_error`)
    check_error: str | None = None


def check_summary(description: str, annotations: Sequence[Annotation], comment_url: str) -> tuple[str, str]:
    """The check run's title and summary: how many findings sit on head's lines, and what the status says."""
    levels = {
        level: sum(a.annotation_level == level for a in annotations) for level in ("failure", "warning", "notice")
    }
    counted = ", ".join(f"{n} {level}" for level, n in levels.items() if n) or "none"
    title = f"{len(annotations)} finding(s) on head's lines" if annotations else "no finding on a line of head"
    summary = (
        f"{ACCEPTANCE_CONTEXT}: {description}\n\nAnnotations: {counted}. This check only places the review's findings "
        f"on the lines they are about; the status `{ACCEPTANCE_CONTEXT}` is what gates"
        + (f", and [the comment]({comment_url}) has the whole review." if comment_url else ".")
    )
    return title, summary


def post(
    edge: GitHubEdge,
    pr: int,
    report: Report,
    comment: str,
    acceptances: Sequence[AcceptanceRow] = (),
    annotations: Sequence[Annotation] = (),
) -> Published:
    """Create or edit the sticky comment, then set `opgate/acceptance` on the head (ServiceError: exit 3), then
    create the `opgate/review` check run with the annotations (a refusal is logged and returned, not fatal: a
    personal token cannot create check runs)."""
    ref = edge.upsert_comment(pr, REVIEW_MARKER, comment)
    log.info("comment %s on #%s: %s", "posted" if ref.created else "edited", pr, ref.url)
    state, description = acceptance_status(report, acceptances)
    status = edge.set_status(report.head_sha, ACCEPTANCE_CONTEXT, state, description, target_url=ref.url or None)
    log.info("status %s=%s on %s", ACCEPTANCE_CONTEXT, state, report.head_sha[:12])
    title, summary = check_summary(description, annotations, ref.url)
    try:
        check = edge.create_check_run(report.head_sha, CHECK_RUN_NAME, title, summary, annotations)
    except ServiceError as exc:
        log.warning("the %s check run with %d annotation(s) was not created: %s", CHECK_RUN_NAME, len(annotations), exc)
        return Published(comment=ref, status=status, check_error=str(exc))
    log.info("check run %s: %d annotation(s) in %d request(s)", CHECK_RUN_NAME, check.annotations, check.requests)
    return Published(comment=ref, status=status, check=check)


__all__ = [
    "ACCEPTANCE_CONTEXT",
    "ACCEPTED_CONTEXT",
    "CHECK_RUN_NAME",
    "DomainSpend",
    "PrContext",
    "Published",
    "acceptance_status",
    "check_summary",
    "compose",
    "open_edge",
    "post",
    "pr_context",
    "skip_reason",
    "write_step_summary",
]
