"""The `opgate review` command's flow: review (or merge the parts of) one change, write report.json and the
comment once, record it in the ledger and, with --post, publish it on the pull request."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from bot import __version__
from bot.config.settings import Settings
from bot.edges import gitio, publish
from bot.edges.github import GitHubEdge
from bot.errors import InputError, OpgateError, ServiceError
from bot.ledger import Ledger, open_ledger
from bot.models.github import Annotation
from bot.models.ledger import AcceptanceRow
from bot.models.report import Report, aggregate_agents
from bot.present.annotations import ordered
from bot.present.render import render_comment
from bot.review import annotate, ci_summary, fanout
from bot.spend import pull_request
from bot.text.redact import redact
from bot.text.safe import one_line
from bot.verdict import expectations
from bot.verdict.change import review_failed
from bot.verdict.folds import review_verdict

if TYPE_CHECKING:
    from bot.review.flow import Reviewer

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ReviewOptions:
    """What to review and what to do with the result (the flags of `opgate review`)."""

    base: str
    head: str
    out: Path
    repo: Path = Path(".")
    pr: int | None = None
    offline: bool = False
    only_kernel: str | None = None
    try_candidates: bool = False
    require_isolation: bool = False
    agent_only: bool = False
    merge: list[Path] | None = None  # the parts' folders: merge them instead of reviewing
    agents: list[Path] = field(default_factory=list)
    planned: Path | None = None
    arch: str | None = None  # run only this architecture's cases (one GPU job of the fan-out)
    agent_cases: Path | None = None  # an agent part: run its test matrix (CI's review job, after the agent job's)
    no_agent_cases: str | None = None  # why this review runs no agent cases (its agent job left no part)


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


def review(options: ReviewOptions, settings: Settings, edge: GitHubEdge | None = None) -> ReviewResult:
    """Review or merge, then write report.json and comment.md (rendered once, with the pull request's history
    when there is one), and with `edge` post the comment and the status."""
    ledger = open_ledger(settings.database_url, create=settings.create_ledger)
    try:
        result = _merge(options, settings, ledger) if options.merge is not None else _review(options, settings, ledger)
    finally:
        ledger.close()
    publish.write_step_summary(settings.step_summary, result.comment)
    if edge is not None and options.pr is not None:
        try:
            with edge:
                result.posted = publish.post(
                    edge, options.pr, result.report, result.comment, result.acceptances, result.annotations
                )
        except ServiceError as exc:
            result.post_error = str(exc)
            result.service_errors.append(str(exc))
    return result


def _review(options: ReviewOptions, settings: Settings, ledger: Ledger) -> ReviewResult:
    from bot.review.flow import Reviewer, ReviewRequest  # the runner: only when something is reviewed

    matrix = agent_matrix(options)
    request = ReviewRequest(
        repo=options.repo,
        base=options.base,
        head=options.head,
        out=options.out,
        offline=options.offline,
        pr=options.pr,
        only_kernel=options.only_kernel,
        try_candidates=options.try_candidates,
        require_isolation=options.require_isolation,
        agent_only=options.agent_only,
        arch=options.arch,
        agent_cases=tuple(matrix.cases),
        agent_name=matrix.proposer,
        agent_cases_not_run=matrix.not_run,
    )
    reviewer = Reviewer(request, settings, ledger)
    failure: Exception | None = None
    try:
        report = reviewer.run()
    except Exception as exc:  # whatever stopped it, the review leaves a report (and, with --post, a status)
        failure = exc
        report = failed_report(reviewer, exc)
    record = options.only_kernel is None and not options.agent_only  # parts are recorded (and summarised) when merged
    if record:
        report = ci_summary.attach(report, settings, ledger, offline=options.offline, out=options.out)
    written = write(report, options.out, reviewer.unseen, ledger, settings, record=record, pr=options.pr)
    written.service_errors, written.failure = list(reviewer.service_errors), failure
    if not options.agent_only and reviewer.base_sha and reviewer.head_sha:
        written.annotations = annotate.gather(
            reviewer.repo, reviewer.base_sha, reviewer.head_sha, report, settings.repo_config
        )
    annotate.write(options.out, written.annotations)
    return written


def agent_matrix(options: ReviewOptions) -> fanout.AgentMatrix:
    """The test matrix this review runs besides what it asks itself: the agent part's (`--agent-cases`, read before
    anything is built: a bad part is bad input), none with the reason given (`--no-agent-cases`), or none."""
    if options.no_agent_cases is not None:
        return fanout.AgentMatrix(not_run=options.no_agent_cases)
    if options.agent_cases is None:
        return fanout.AgentMatrix()
    if options.only_kernel is None or not options.offline:
        raise InputError(
            "--agent-cases runs one agent part's test matrix in an --offline review of its kernel: give --offline "
            "and --kernel K"
        )
    top = gitio.toplevel(options.repo)
    base_sha, head_sha = gitio.resolve(top, options.base), gitio.resolve(top, options.head)
    return fanout.read_agent_cases(options.agent_cases, options.only_kernel, base_sha, head_sha)


def _merge(options: ReviewOptions, settings: Settings, ledger: Ledger) -> ReviewResult:
    """Merge the parts, ask for the CI summary (the only request of this job), write report.json into --out and
    record the merged review in the ledger."""
    assert options.merge is not None
    missing = [str(f) for f in [*options.merge, *options.agents] if not f.is_dir()]
    if missing:
        raise InputError(f"--merge: no such folder: {', '.join(missing)}")
    parts = [fanout.read_part(folder) for folder in options.merge]
    agents = [fanout.read_part(folder, prefix=fanout.AGENT_PREFIX) for folder in options.agents]
    planned = fanout.read_plan(options.planned) if options.planned is not None else None
    report, unseen = fanout.merge(parts, options.base, options.head, options.pr, agents=agents, planned=planned)
    report = ci_summary.attach(report, settings, ledger, offline=options.offline, out=options.out)
    written = write(report, options.out, unseen, ledger, settings, record=True, pr=options.pr)
    written.annotations = ordered(a for part in parts for a in annotate.read(part.folder))
    annotate.write(options.out, written.annotations)
    log.info("merged %d part(s) into %s", len(parts), written.report_path)
    return written


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
    agents' expected metrics are held against the measurements here, where every part has been merged."""
    report = expectations.attach(report)
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
