"""`opgate review`: build, run and gate the kernels a change touches (and post the result with --post)."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from bot.commands import Commands
from bot.config.manifest_tables import ARCH
from bot.config.repo import RepoConfig
from bot.config.settings import Settings
from bot.edges import gitio, publish
from bot.edges.events import PullRequestEvent, load_pull_request_event
from bot.errors import GitError, InputError, OpgateError
from bot.lint import KeyBook, detect_kind, lint_paths
from bot.models.diff import FileChange
from bot.models.output import Posted, ReviewKernel, ReviewOutput
from bot.present import digest
from bot.present.annotations import LintPlace
from bot.review import annotate, fanout, orchestrate
from bot.review.coverage import unclaimed_reason
from bot.review.orchestrate import ReviewResult
from bot.review.request import ReviewRequest
from bot.text.safe import one_line
from bot.wording.messages import render

if TYPE_CHECKING:
    from bot.review.host import Host

log = logging.getLogger(__name__)


def register(commands: Commands) -> None:
    r = commands.add(
        "review",
        writes_ledger=True,
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
        "--arch",
        type=_arch,
        help="run only the cases of this GPU architecture (sm_90, sm_100): one job of the --plan matrix's gpu list",
    )
    r.add_argument(
        "--try-candidates",
        action="store_true",
        help="apply the agent's candidate patch on top of head in a scratch worktree and gate it the same way",
    )
    r.add_argument(
        "--require-isolation",
        action="store_true",
        help="refuse to build or run anything (exit 2) where the sandbox cannot start (what the reusable workflow "
        "opgate-review.yml runs)",
    )
    agent_cases = r.add_mutually_exclusive_group()
    agent_cases.add_argument(
        "--agent-cases",
        type=Path,
        metavar="DIR",
        help="with --offline --kernel K: run the test matrix of K's agent part (the --out folder of an --agent-only "
        "run, agent-K/) after the manifest's cases; only the validated matrix and the agent's model are read "
        "(CI's review job, after the agent job)",
    )
    agent_cases.add_argument(
        "--no-agent-cases",
        metavar="WHY",
        help="run no agent cases and say WHY in the comment (CI's review job when its kernel's agent job left no part)",
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


def _arch(value: str) -> str:
    if not ARCH.fullmatch(value):
        raise argparse.ArgumentTypeError(f"{value!r} is not a GPU architecture such as sm_90 or sm_100a")
    return value


def run(args: argparse.Namespace, settings: Settings) -> int:
    event: PullRequestEvent | None = load_pull_request_event(args.event) if args.event is not None else None
    base, head, pr = args.base, args.head, args.pr
    if event is not None:
        base, head, pr = base or event.base_sha, head or event.head_sha, pr or event.number
    if not base or not head:
        raise InputError("review needs --base and --head (or --event with a pull_request event)")
    if args.merge is None:
        try:  # before anything is written: outside a repository a review leaves no report, no ledger
            gitio.toplevel(args.repo)
        except GitError:
            raise InputError(
                f"{args.repo.resolve()} is not a git repository: opgate review compares two git revisions "
                "(give --repo, or git init and commit first); nothing was written"
            ) from None
    if settings.agent_key is not None and args.only_kernel is None and not args.plan and args.merge is None:
        raise InputError(
            "OPGATE_AGENT_KEY is one domain's key: give --kernel K (one kernel, one domain), "
            "or unset it and set each domain's own key variable"
        )
    if (args.agent_cases is not None or args.no_agent_cases is not None) and (
        args.plan or args.agent_only or args.merge is not None
    ):
        flag = "--agent-cases" if args.agent_cases is not None else "--no-agent-cases"
        raise InputError(f"{flag} is for a review that builds and runs: not with --plan, --agent-only or --merge")
    if args.plan:
        planned = fanout.plan(args.repo, base, head, settings.repo_config)
        print(fanout.matrix(planned.kernels, planned.jobs))  # the matrix (also with --json: it is JSON)
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
    not_run = one_line(args.no_agent_cases, limit=300) if args.no_agent_cases is not None else ""
    request = ReviewRequest(
        base=base,
        head=head,
        out=args.out,
        repo=args.repo,
        pr=pr,
        offline=args.offline,
        only_kernel=args.only_kernel,
        try_candidates=args.try_candidates,
        require_isolation=args.require_isolation,
        agent_only=args.agent_only,
        merge=args.merge,
        agents=args.agents,
        planned=args.planned,
        arch=args.arch,
        agent_part=args.agent_cases,
        agent_cases_not_run=not_run,
    )
    host = _host(request, settings) if args.merge is None else None  # a merge builds and runs nothing
    result = orchestrate.review(request, settings, edge, host, changed_lint(settings.repo_config))
    _print(result, args.json)
    if isinstance(result.failure, OpgateError):
        raise result.failure  # one line and its exit code (2 bad input, 3 an outside service), after the report
    invalid = [f for k in result.report.kernels for f in k.findings if f.key == "manifest.invalid"]
    if invalid and args.merge is None:  # a manifest typo is bad input: exit 2 with the message (the report says fail)
        raise InputError(render(invalid[0]))
    if result.report.verdict not in ("pass", "undecided"):
        return 1  # a failing gate (or a kernel waiting for /accept) wins over an outside service's failure
    return 3 if result.service_errors else 0


def _host(request: ReviewRequest, settings: Settings) -> Host:
    """This machine, its sandbox and load, and the case runner that builds and runs on it (the runner's modules are
    imported only for a review that builds and runs)."""
    from bot.review.host import here

    return here(settings, agent_only=request.agent_only, require_isolation=request.require_isolation)


def _print(result: ReviewResult, as_json: bool) -> None:
    report = result.report
    changed = [k for k in report.kernels if k.changed]
    summary = ", ".join(f"{k.name} {k.verdict}" for k in changed) or "no kernel changed"
    if report.error:
        summary = f"the review could not run: {report.error}"
    unclaimed = unclaimed_reason(report.coverage) if report.coverage and report.coverage.kernel_sources.total else None
    if as_json:
        posted = result.posted
        out = ReviewOutput(
            verdict=report.verdict,
            summary=summary,
            kernels=[ReviewKernel(name=k.name, domain=k.domain, verdict=k.verdict) for k in changed],
            unclaimed=unclaimed,
            report=str(result.report_path),
            comment=str(result.comment_path),
            service_errors=result.service_errors,
            posted=None if posted is None else Posted(url=posted.comment.url, status=posted.status.state),
        )
        print(out.text())
        return
    print(f"opgate: verdict {report.verdict.upper()} ({one_line(summary, limit=2000)})")
    if unclaimed is not None:
        print(f"opgate: unjudged: {one_line(unclaimed, limit=2000)}")
    for line in digest.plain(report):  # the headline's warnings, failing lines and counts, as in the comment
        print(f"  {one_line(line, limit=2000)}")
    for error in result.service_errors:
        if error != result.post_error:
            print(f"opgate: outside service failed: {one_line(error)}")
    print(f"  report:  {one_line(result.report_path)}")
    print(f"  comment: {one_line(result.comment_path)}")
    if result.post_error is not None:
        print(f"opgate: outside service failed: {one_line(result.post_error)}")
    elif result.posted is not None:
        posted = result.posted
        print(f"  posted:  {posted.comment.url} ({publish.ACCEPTANCE_CONTEXT}={posted.status.state})")
        if posted.check is not None:
            print(f"  check:   {publish.CHECK_RUN_NAME}: {posted.check.annotations} annotation(s) {posted.check.url}")
        elif posted.check_error is not None:
            print(f"opgate: the {publish.CHECK_RUN_NAME} check run was not created: {one_line(posted.check_error)}")


LINTED = ("manifest", "task", "env", "config")  # the kinds of changed file the review's annotations lint (bot/lint)


def changed_lint(config: RepoConfig) -> annotate.ChangedLint:
    """`opgate lint` on the changed files of a kind it knows (kernel.toml, task files, .env, opgate's configuration),
    as head has them: its findings with a line, for the review's annotations (passed in: the core never imports a
    side feature)."""
    book = KeyBook.of(config)

    def lint(tree: Path, changes: list[FileChange]) -> list[LintPlace]:
        paths = [
            tree / c.path
            for c in changes
            if not c.binary
            and detect_kind(c.path) in LINTED
            and (tree / c.path).is_file()
            and not (tree / c.path).is_symlink()
        ]
        places = []
        for f in lint_paths(paths, book) if paths else []:
            rel = Path(os.path.relpath(f.path, tree)).as_posix()
            if f.line is not None and not rel.startswith("../"):
                places.append(LintPlace(path=rel, line=f.line, rule=f.rule, message=f.message, severity=f.severity))
        return places

    return lint
