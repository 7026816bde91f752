"""Publish a review on its pull request: the sticky comment, the `opgate/acceptance` status, the `opgate/review` check
run with the review's annotations, the agent's inline notes, the step summary. Nothing here decides: the status is
`bot/verdict/status.py`'s (its words `bot/present/status.py`'s), the spend and budgets the comment shows are
`bot/spend/pull_request.py`'s."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel

from bot.config.settings import Settings
from bot.edges.events import PullRequestEvent
from bot.edges.github import GitHubEdge
from bot.errors import InputError, ServiceError
from bot.models.github import Annotation, CheckRunRef, CommentRef, ReviewRef, StatusRef
from bot.models.ledger import AcceptanceRow
from bot.models.report import Report
from bot.present.annotations import check_text
from bot.present.notes import notes_marker, replaced_body, review_body, review_notes
from bot.present.render import REVIEW_MARKER
from bot.present.status import acceptance_status
from bot.text.redact import redact

log = logging.getLogger(__name__)

ACCEPTANCE_CONTEXT = "opgate/acceptance"
ACCEPTED_CONTEXT = "opgate/accepted"
CHECK_RUN_NAME = "opgate/review"  # carries the annotations; neutral: the status above is what gates
REVIEW_ACTIONS = ("opened", "reopened", "synchronize", "ready_for_review")


def skip_reason(event: PullRequestEvent) -> str | None:
    """Why a pull_request event gets no review (a draft, or an action that changes no code); None to review."""
    if event.action not in REVIEW_ACTIONS:
        return f"action {event.action!r} is not one of {', '.join(REVIEW_ACTIONS)}"
    if event.pull_request.draft:
        return f"pull request #{event.number} is a draft (reviewed once it is ready for review)"
    return None


def write_step_summary(path: Path | None, text: str) -> None:
    """Append the comment to the job summary ($GITHUB_STEP_SUMMARY) when Actions gives one."""
    if path is None:
        return
    try:
        with path.open("a", encoding="utf-8") as f:
            f.write(redact(text.removeprefix(REVIEW_MARKER).lstrip("\n")))
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
    review: ReviewRef | None = (
        None  # opgate's review with the agent's notes on diff lines (None: no agent answered, or GitHub refused it)
    )
    check: CheckRunRef | None = None  # the annotations' check run; None when GitHub refused it (`check_error`)
    check_error: str | None = None


def check_summary(description: str, annotations: Sequence[Annotation], comment_url: str) -> tuple[str, str]:
    """The check run's title and summary: how many findings sit on head's lines, and what the status says (in the
    review's locale, bot/present/annotations.py)."""
    return check_text(ACCEPTANCE_CONTEXT, description, annotations, comment_url)


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
    review = post_notes(edge, pr, report)
    title, summary = check_summary(description, annotations, ref.url)
    try:
        check = edge.create_check_run(report.head_sha, CHECK_RUN_NAME, title, summary, annotations)
    except ServiceError as exc:
        log.warning("the %s check run with %d annotation(s) was not created: %s", CHECK_RUN_NAME, len(annotations), exc)
        return Published(comment=ref, status=status, review=review, check_error=str(exc))
    log.info("check run %s: %d annotation(s) in %d request(s)", CHECK_RUN_NAME, check.annotations, check.requests)
    return Published(comment=ref, status=status, review=review, check=check)


def post_notes(edge: GitHubEdge, pr: int, report: Report) -> ReviewRef | None:
    """The agent's risk notes on the diff lines they name, as opgate's review of the head (None, with a warning, when
    GitHub refused it: the notes stay listed by place in the comment). No agent answered in this review: no call, an
    earlier review of the head keeps its notes."""
    if not any(a.status == "ok" for a in report.agents):
        return None
    notes = review_notes(report)
    sha = report.head_sha
    try:
        ref = edge.upsert_review_notes(
            pr, sha, notes_marker(sha), review_body(sha, len(notes)), notes, replaced_body(sha)
        )
    except ServiceError as exc:
        log.warning("the agent's inline notes on #%s were not posted: %s", pr, exc)
        return None
    if ref.id is not None:
        log.info("review %s on #%s: %d inline note(s)", "posted" if ref.created else "kept", pr, ref.comments)
    return ref


__all__ = [
    "ACCEPTANCE_CONTEXT",
    "ACCEPTED_CONTEXT",
    "CHECK_RUN_NAME",
    "Published",
    "check_summary",
    "open_edge",
    "post",
    "post_notes",
    "skip_reason",
    "write_step_summary",
]
