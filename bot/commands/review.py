"""`opgate review`: build, run and gate the kernels a change touches (and post the result with --post)."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from datetime import UTC, datetime
from pathlib import Path

from bot import __version__, digest, fanout, publish
from bot.coverage import unclaimed_reason
from bot.errors import InputError, OpgateError, ServiceError
from bot.events import PullRequestEvent, load_pull_request_event
from bot.ledger import Ledger, open_ledger
from bot.report import KernelReport, Report
from bot.review import Reviewer, ReviewRequest, aggregate_agents
from bot.safe import one_line
from bot.settings import Settings

log = logging.getLogger(__name__)


def register(sub: argparse._SubParsersAction) -> None:
    r = sub.add_parser(
        "review",
        help="build, run and gate the kernels a change touches",
        description="Review base...head: static checks, agent, build, run, gate, report; --post puts the "
        "comment and the opgate/acceptance status on the pull request.",
    )
    r.add_argument("--base", help="base revision (default: the event's base SHA)")
    r.add_argument("--head", help="head revision (default: the event's head SHA)")
    r.add_argument("--repo", type=Path, default=Path("."), help="git repository (default: .)")
    r.add_argument("--out", type=Path, default=Path("reports/latest"), help="report folder (default: reports/latest)")
    r.add_argument("--offline", action="store_true", help="do not ask the agent, even if a key is set")
    r.add_argument("--event", type=Path, help="a pull_request event file ($GITHUB_EVENT_PATH)")
    r.add_argument("--pr", type=int, help="the pull request number (default: the event's)")
    r.add_argument("--kernel", dest="only_kernel", help="review only this kernel (one matrix job's part)")
    r.add_argument(
        "--try-candidates",
        action="store_true",
        help="apply the agent's candidate patch on top of head in a scratch worktree and gate it the same way",
    )
    r.add_argument(
        "--require-isolation",
        action="store_true",
        help="refuse to build or run anything (exit 2) where the sandbox cannot start (what pr-review.yml runs)",
    )
    r.add_argument(
        "--agents",
        nargs="*",
        type=Path,
        default=[],
        metavar="PART",
        help="with --merge: the --out folders of --agent-only runs (agent-<kernel>/), whose agent reviews replace "
        "the parts' offline ones",
    )
    r.add_argument(
        "--planned",
        type=Path,
        metavar="FILE",
        help="with --merge: the --plan matrix; every part and agent part must be a planned kernel (and domain)",
    )
    r.add_argument(
        "--post",
        action="store_true",
        help="create or edit the PR comment, set the opgate/acceptance status, append to $GITHUB_STEP_SUMMARY",
    )
    mode = r.add_mutually_exclusive_group()
    mode.add_argument(
        "--plan",
        action="store_true",
        help="print the changed kernels as a GitHub Actions matrix (JSON) and exit; builds nothing",
    )
    mode.add_argument(
        "--agent-only",
        action="store_true",
        help="ask the agent about the changed kernels and write its review to --out; builds and runs nothing",
    )
    mode.add_argument(
        "--merge",
        nargs="*",
        type=Path,
        metavar="PART",
        help="merge the --out folders of per-kernel reviews (part-<kernel>/; none: no kernel changed) into one "
        "report instead of reviewing; --base and --head are the full SHAs the parts reviewed",
    )


def run(args: argparse.Namespace, settings: Settings) -> int:
    event: PullRequestEvent | None = load_pull_request_event(args.event) if args.event is not None else None
    base, head, pr = args.base, args.head, args.pr
    if event is not None:
        base, head, pr = base or event.base_sha, head or event.head_sha, pr or event.number
    if not base or not head:
        raise InputError("review needs --base and --head (or --event with a pull_request event)")
    if settings.agent_key is not None and args.only_kernel is None and not args.plan and args.merge is None:
        raise InputError(
            "OPGATE_AGENT_KEY is one domain's key: give --kernel K (one kernel, one domain), "
            "or unset it and set each domain's own key variable"
        )
    if args.plan:
        planned = fanout.plan(args.repo, base, head, settings.repo_config)
        print(fanout.matrix(planned.kernels))  # the matrix (also with --json: it is JSON)
        if planned.unclaimed is not None:
            print(f"opgate: error: {one_line(planned.unclaimed, limit=2000)}", file=sys.stderr)
            return 1
        return 0
    if event is not None and (why := publish.skip_reason(event)) is not None:
        log.info("skipped: %s", why)
        print(f"opgate: skipped, {one_line(why)}")
        return 0
    if args.post and pr is None:
        raise InputError("--post needs the pull request: give --event or --pr")
    edge = publish.open_edge(settings) if args.post else None  # settings checked before the long review
    ledger = open_ledger(settings.database_url, create=settings.create_ledger)
    failure: Exception | None = None
    try:
        if args.merge is not None:
            report, unseen, report_path, comment_path = _merge(args, ledger, base, head, pr)
            service_errors: list[str] = []
        else:
            request = ReviewRequest(
                repo=args.repo,
                base=base,
                head=head,
                out=args.out,
                offline=args.offline,
                pr=pr,
                only_kernel=args.only_kernel,
                try_candidates=args.try_candidates,
                require_isolation=args.require_isolation,
                agent_only=args.agent_only,
            )
            reviewer = Reviewer(request, settings, ledger)
            try:
                outcome = reviewer.run()
            except Exception as exc:  # whatever stopped it, the review leaves a report (and, with --post, a status)
                failure = exc
                outcome = reviewer.write(failed_report(reviewer, exc))
            report, unseen = outcome.report, list(reviewer.unseen)
            report_path, comment_path = outcome.report_path, outcome.comment_path
            service_errors = outcome.service_errors
            (args.out / fanout.UNSEEN_FILE).write_text(json.dumps(unseen))
        acceptances = ledger.acceptances(pr) if pr is not None else []
        comment = comment_path.read_text() if args.merge is None else ""
        if pr is not None or args.merge is not None:  # what the PR's history adds; comment.md = what is posted
            context = None
            if pr is not None:
                rows = ledger.usage()
                domains = sorted({a.domain for a in report.agents if a.domain} | {u.domain for u in rows if u.pr == pr})
                context = publish.pr_context(
                    report, pr, rows, acceptances, publish.week_budgets(ledger, settings, domains)
                )
            comment = publish.compose(report, unseen, context)
            comment_path.write_text(comment)
    finally:
        ledger.close()

    changed = [k for k in report.kernels if k.changed]
    summary = ", ".join(f"{k.name} {k.verdict}" for k in changed) or "no kernel changed"
    if report.error:
        summary = f"the review could not run: {report.error}"
    unclaimed = unclaimed_reason(report.coverage) if report.coverage and report.coverage.kernel_sources.total else None
    result: dict[str, object] = {
        "verdict": report.verdict,
        "summary": summary,
        "kernels": [{"name": k.name, "domain": k.domain, "verdict": k.verdict} for k in changed],
        "unclaimed": unclaimed,
        "report": str(report_path),
        "comment": str(comment_path),
        "service_errors": service_errors,
        "posted": None,
    }
    if not args.json:
        print(f"opgate: verdict {report.verdict.upper()} ({one_line(summary, limit=2000)})")
        if unclaimed is not None:
            print(f"opgate: unjudged: {one_line(unclaimed, limit=2000)}")
        for line in digest.plain(report):  # the headline's warnings, failing lines and counts, as in the comment
            print(f"  {one_line(line, limit=2000)}")
        for error in service_errors:
            print(f"opgate: outside service failed: {one_line(error)}")
        print(f"  report:  {one_line(report_path)}")
        print(f"  comment: {one_line(comment_path)}")
    publish.write_step_summary(settings.step_summary, comment)
    if edge is not None and pr is not None:
        try:
            with edge:
                published = publish.post(edge, pr, report, comment, acceptances)
        except ServiceError as exc:
            service_errors.append(str(exc))
            if not args.json:
                print(f"opgate: outside service failed: {one_line(exc)}")
        else:
            result["posted"] = {"url": published.comment.url, "status": published.status.state}
            if not args.json:
                print(f"  posted:  {published.comment.url} ({publish.ACCEPTANCE_CONTEXT}={published.status.state})")
    if args.json:
        print(json.dumps(result))
    if isinstance(failure, OpgateError):
        raise failure  # one line and its exit code (2 bad input, 3 an outside service), after the report
    if report.verdict != "pass":
        return 1  # a failing gate wins over an outside service's failure
    return 3 if service_errors else 0


def failed_report(reviewer: Reviewer, exc: Exception) -> Report:
    """The report of a review that could not run: verdict `error`, the reason in one line, what was known."""
    req = reviewer.request
    if isinstance(exc, OpgateError):
        reason = one_line(exc, limit=500)
    else:
        reason = one_line(f"internal error {type(exc).__name__}: {exc}", limit=500)
        log.error("the review stopped on an internal error; report.json says so", exc_info=exc)
    kernels = []
    if req.only_kernel is not None:  # a matrix part: its kernel is the one that could not be judged
        kernels = [
            KernelReport(name=req.only_kernel, domain="unknown", changed=True, verdict="error", reasons=[reason])
        ]
    return Report(
        base_sha=reviewer.base_sha or req.base,
        head_sha=reviewer.head_sha or req.head,
        pr=req.pr,
        verdict="error",
        kernels=kernels,
        agents=reviewer.agents,
        agent=aggregate_agents(reviewer.agents),
        environment=reviewer.env,
        created_at=datetime.now(UTC).isoformat(timespec="seconds"),
        opgate_version=__version__,
        error=reason,
    )


def _merge(
    args: argparse.Namespace, ledger: Ledger, base: str, head: str, pr: int | None
) -> tuple[Report, list[str], Path, Path]:
    """Merge the parts, write report.json into --out and record the merged review in the ledger."""
    missing = [str(f) for f in [*args.merge, *args.agents] if not f.is_dir()]
    if missing:
        raise InputError(f"--merge: no such folder: {', '.join(missing)}")
    parts = [fanout.read_part(folder) for folder in args.merge]
    agents = [fanout.read_part(folder, prefix=fanout.AGENT_PREFIX) for folder in args.agents]
    planned = fanout.read_plan(args.planned) if args.planned is not None else None
    report, unseen = fanout.merge(parts, base, head, pr, agents=agents, planned=planned)
    args.out.mkdir(parents=True, exist_ok=True)
    report_path, comment_path = args.out / "report.json", args.out / "comment.md"
    report_path.write_text(report.to_json())
    (args.out / fanout.UNSEEN_FILE).write_text(json.dumps(unseen))
    ledger.record_review(report)
    log.info("merged %d part(s) into %s", len(parts), report_path)
    return report, unseen, report_path, comment_path
