"""The `opgate review` command's flow: review (or merge the parts of) one change, write report.json and the
comment once, record it in the ledger and, with --post, publish it on the pull request."""

from __future__ import annotations

import contextlib
import json
import logging
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from bot import __version__
from bot.config.settings import Settings
from bot.edges import gitio, publish
from bot.edges.github import GitHubEdge
from bot.errors import InputError, OpgateError, ServiceError
from bot.ledger import Ledger, open_ledger
from bot.models.agent_report import aggregate_agents
from bot.models.github import Annotation
from bot.models.ledger import AcceptanceRow
from bot.models.report import Report
from bot.present.annotations import ordered
from bot.present.render import render_comment
from bot.review import annotate, ci_summary, fanout
from bot.review.request import ReviewRequest
from bot.spend import pull_request
from bot.text.redact import redact
from bot.text.safe import one_line
from bot.verdict import expectations
from bot.verdict.change import review_failed
from bot.verdict.folds import review_verdict
from bot.verdict.written import written

if TYPE_CHECKING:
    from bot.review.flow import Reviewer
    from bot.review.host import Host

log = logging.getLogger(__name__)


@dataclass
class ReviewResult:
    report: Report
    report_path: Path
    comment_path: Path
    comment: str
    service_errors: list[str] = field(default_factory=list)
    acceptances: list[AcceptanceRow] = field(default_factory=list)  # the pull request's, as the comment shows
    failure: Exception | None = None  # what stopped the review (the report says so)
    posted: publish.Published | None = None
    post_error: str | None = None
    annotations: list[Annotation] = field(default_factory=list)  # annotations.json: the check run's


def review(
    request: ReviewRequest,
    settings: Settings,
    edge: GitHubEdge | None = None,
    host: Host | None = None,
    lint: annotate.ChangedLint | None = None,
) -> ReviewResult:
    """Review (on `host`: the machine, sandbox and case runner the command detected) or merge, then write report.json
    and comment.md (rendered once, with the pull request's history when there is one), and with `edge` post the
    comment and the status. `lint`: the changed files' lint the annotations place (the command's `opgate lint`)."""
    ledger = open_ledger(settings.database_url, create=settings.create_ledger)
    try:
        if request.merge is not None:
            result = _merge(request, settings, ledger)
        else:
            assert host is not None, "a review that builds and runs is given its host"
            result = _review(request, settings, ledger, host, lint)
    finally:
        ledger.close()
    publish.write_step_summary(settings.step_summary, result.comment)
    if edge is not None and request.pr is not None:
        try:
            with edge:
                result.posted = publish.post(
                    edge, request.pr, result.report, result.comment, result.acceptances, result.annotations
                )
        except ServiceError as exc:
            result.post_error = str(exc)
            result.service_errors.append(str(exc))
    return result


def _review(
    request: ReviewRequest, settings: Settings, ledger: Ledger, host: Host, lint: annotate.ChangedLint | None
) -> ReviewResult:
    from bot.review.flow import Reviewer  # the runner: only when something is reviewed

    reviewer = Reviewer(with_agent_matrix(request), settings, ledger, host)
    failure: Exception | None = None
    with contextlib.ExitStack() as checkouts:  # base's and head's worktrees, until the annotations have read head's
        try:
            report = reviewer.run(keep=checkouts)
        except Exception as exc:  # whatever stopped it, the review leaves a report (and, with --post, a status)
            failure = exc
            report = failed_report(reviewer, exc)
        # parts are recorded (and summarised) when merged
        record = request.only_kernel is None and not request.agent_only
        if record:
            report = ci_summary.attach(report, settings, ledger, offline=request.offline, out=request.out)
        result = write(report, request.out, reviewer.unseen, ledger, settings, record=record, pr=request.pr)
        result.service_errors, result.failure = list(reviewer.service_errors), failure
        if not request.agent_only and reviewer.head is not None:
            result.annotations = annotate.gather(report, reviewer.changes, reviewer.head, lint)
    annotate.write(request.out, result.annotations)
    return result


def with_agent_matrix(request: ReviewRequest) -> ReviewRequest:
    """`request` with the test matrix of its agent part (`--agent-cases`, read before anything is built: a bad part
    is bad input); unchanged without one (none, or none with the reason `--no-agent-cases` gave)."""
    if request.agent_part is None:
        return request
    if request.only_kernel is None or not request.offline:
        raise InputError(
            "--agent-cases runs one agent part's test matrix in an --offline review of its kernel: give --offline "
            "and --kernel K"
        )
    top = gitio.toplevel(request.repo)
    base_sha, head_sha = gitio.resolve(top, request.base), gitio.resolve(top, request.head)
    matrix = fanout.read_agent_cases(request.agent_part, request.only_kernel, base_sha, head_sha)
    cases, proposer, not_run = tuple(matrix.cases), matrix.proposer, matrix.not_run
    return replace(request, agent_cases=cases, agent_name=proposer, agent_cases_not_run=not_run)


def _merge(request: ReviewRequest, settings: Settings, ledger: Ledger) -> ReviewResult:
    """Merge the parts, ask for the CI summary (the only request of this job), write report.json into --out and
    record the merged review in the ledger."""
    assert request.merge is not None
    missing = [str(f) for f in [*request.merge, *request.agents] if not f.is_dir()]
    if missing:
        raise InputError(f"--merge: no such folder: {', '.join(missing)}")
    parts = [fanout.read_part(folder) for folder in request.merge]
    agents = [fanout.read_part(folder, prefix=fanout.AGENT_PREFIX) for folder in request.agents]
    planned = fanout.read_plan(request.planned) if request.planned is not None else None
    report, unseen = fanout.merge(parts, request.base, request.head, request.pr, agents=agents, planned=planned)
    report = ci_summary.attach(report, settings, ledger, offline=request.offline, out=request.out)
    result = write(report, request.out, unseen, ledger, settings, record=True, pr=request.pr)
    result.annotations = ordered(a for part in parts for a in annotate.read(part.folder))
    annotate.write(request.out, result.annotations)
    log.info("merged %d part(s) into %s", len(parts), result.report_path)
    return result


def write(
    report: Report,
    out: Path,
    unseen: list[str],
    ledger: Ledger,
    settings: Settings,
    *,
    record: bool,
    pr: int | None,
) -> ReviewResult:
    """report.json, the agent's unseen files and comment.md (what --post posts) into `out`; the review in the
    ledger when `record`. With a pull request the comment carries its history (acceptances, token spend). The
    agents' expected metrics are held against the measurements here, where every part has been merged, and the
    findings' English lines written (`bot/verdict/written.py`: report.json, the ledger and the result hold them)."""
    report = written(expectations.attach(report))
    out.mkdir(parents=True, exist_ok=True)
    report_path, comment_path = out / "report.json", out / "comment.md"
    report_path.write_text(redact(report.to_json()))
    (out / fanout.UNSEEN_FILE).write_text(json.dumps(unseen))
    if record:
        ledger.record_review(report)
    acceptances = ledger.acceptances(pr) if pr is not None else []
    context = None
    if pr is not None:
        rows = ledger.usage()
        budgets = pull_request.week_budgets(ledger, settings, pull_request.pr_domains(report, pr, rows))
        self_accept = settings.repo_config.allow_self_accept
        context = pull_request.pr_context(report, pr, rows, acceptances, budgets, self_accept=self_accept)
    comment = redact(render_comment(report, unseen_files=unseen, pr=context))  # as posted, with the PR's history
    comment_path.write_text(comment)
    return ReviewResult(report, report_path, comment_path, comment, acceptances=acceptances)


def failed_report(reviewer: Reviewer, exc: Exception) -> Report:
    """The report of a review that could not run: verdict `error`, the reason in one line, what was known."""
    req = reviewer.request
    kind = "" if isinstance(exc, OpgateError) else type(exc).__name__
    reason = one_line(f"internal error {kind}: {exc}" if kind else exc, limit=500)
    if kind:
        log.error("the review stopped on an internal error; report.json says so", exc_info=exc)
    kernels = []
    if req.only_kernel is not None:  # a matrix part: its kernel is the one that could not be judged
        kernels = [review_failed(req.only_kernel, one_line(exc, limit=500 - len(kind) - 17) if kind else reason, kind)]
    return Report(
        base_sha=reviewer.base_sha or req.base,
        head_sha=reviewer.head_sha or req.head,
        pr=req.pr,
        verdict=review_verdict(kernels, None, stopped=True),
        kernels=kernels,
        agents=reviewer.agents,
        agent=aggregate_agents(reviewer.agents),
        environment=reviewer.env,
        created_at=datetime.now(UTC).isoformat(timespec="seconds"),
        opgate_version=__version__,
        error=reason,
    )
