"""`opgate tune`: tune a kernel's config against the judge; propose the winner as a pull request with --post."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from pydantic import ValidationError

from bot.commands import Commands
from bot.commands.intake import intake
from bot.config.manifest import find_manifests
from bot.config.settings import Settings
from bot.edges import publish as review_publish
from bot.edges.github import GitHubEdge
from bot.errors import InputError, ServiceError
from bot.ledger import open_ledger
from bot.models.github import PullRef
from bot.present.render import render
from bot.text.redact import redact
from bot.text.safe import Safe, one_line
from bot.tune import command as slash
from bot.tune import publish
from bot.tune.result import PullOut, TuneResult, render_tune
from bot.tune.store import TuningStore
from bot.verdict import slash as rules
from bot.verdict.slash import SlashCommand

WORKFLOW = "tune.yml"
REPLY_MARKER = Safe("<!-- opgate:tune-command -->")


def _reply(decision: slash.TuneDecision, line: str) -> str:
    return render("tune_reply.md.j2", marker=REPLY_MARKER, r=None, d=decision, line=line)


SLASH = SlashCommand(
    name=slash.COMMAND, answered_by="tune", parse=slash.parse_command, roles=slash.TUNE_ROLES, reply=_reply
)


def register(commands: Commands) -> None:
    p = commands.add(
        "tune",
        writes_ledger=True,
        help="tune a kernel's config against the judge and propose the best verified candidate",
        description="Each round the agent (or the exhaustive sweep) proposes a config; it is statically checked and "
        "judged like a pull request against base; the measurements go back into the next prompt. Stops on the "
        "token budget, --rounds, a plateau or the whole space seen; the winner is re-verified in fresh processes "
        "and, with --post, pushed as a branch with a pull request. --publish DIR posts an earlier run's result; "
        "--event FILE answers a `/tune KERNEL` comment.",
    )
    p.add_argument("kernel", nargs="?", help="the kernel to tune (a folder under kernels/)")
    p.add_argument("--base", default="HEAD", help="the revision to tune against (default: HEAD)")
    p.add_argument("--repo", type=Path, default=Path("."), help="git repository (default: .)")
    p.add_argument("--rounds", type=int, default=6, help="agent rounds at most (default: 6)")
    p.add_argument("--tokens", type=int, help="token budget of this run (default: the domain's weekly budget / 25)")
    p.add_argument(
        "--strategy",
        choices=("agent", "exhaustive", "both"),
        default="agent",
        help="agent (default); exhaustive: every allowed config; both: the agent, then the sweep and its regret",
    )
    p.add_argument("--out", type=Path, help="output folder (default: reports/tune/KERNEL)")
    p.add_argument("--post", action="store_true", help="push the winner as a branch and open its pull request")
    p.add_argument("--issue", type=int, help="also reply on this issue or pull request (the /tune comment's)")
    p.add_argument(
        "--review-workflow",
        metavar="FILE",
        help="with --post: dispatch this workflow (a file in .github/workflows) on the default branch for the pull "
        "request opened, with pr and head_sha (one opened with GITHUB_TOKEN starts no workflow by itself)",
    )
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--publish", type=Path, metavar="DIR", help="post the result of an earlier run (DIR/tune.json)")
    mode.add_argument("--event", type=Path, help="answer a /tune comment (issue_comment event): check, dispatch")


def run(args: argparse.Namespace, settings: Settings) -> int:
    if args.event is not None:
        return _answer(args, settings)
    if args.publish is not None:
        result = _read(args.publish / "tune.json")
        return _post(args, settings, result, args.publish)
    if not args.kernel:
        raise InputError("tune needs a KERNEL (or --publish DIR, or --event FILE)")
    if (args.post or args.issue) and not (settings.github_token and settings.github_repository):
        raise InputError("--post and --issue need GITHUB_TOKEN and GITHUB_REPOSITORY")
    from bot.tune.loop import Tuner, TuneRequest  # builds and runs kernels: loaded only to tune

    out = args.out or Path("reports/tune") / args.kernel
    request = TuneRequest(
        repo=args.repo, kernel=args.kernel, base=args.base, strategy=args.strategy, rounds=args.rounds,
        tokens=args.tokens, out=out,
    )  # fmt: skip
    ledger = open_ledger(settings.database_url, create=settings.create_ledger)
    try:
        result = Tuner(request, settings, ledger).run()
    finally:
        ledger.close()
    _write(result, out)
    _print(result, out)
    return _post(args, settings, result, out) if args.post or args.issue else 0


def _read(path: Path) -> TuneResult:
    try:
        return TuneResult.model_validate_json(path.read_text())
    except OSError as exc:
        raise InputError(f"{path}: cannot read the tuning result: {exc.strerror}") from exc
    except ValidationError as exc:
        err = exc.errors()[0]
        raise InputError(
            f"{path}: not an opgate.tune/1 result: {'.'.join(map(str, err['loc']))}: {err['msg']}"
        ) from exc


def _write(result: TuneResult, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    (out / "tune.json").write_text(redact(result.to_json()))
    (out / "tune.md").write_text(redact(render_tune(result)))
    patch = out / "candidate.patch"
    if result.proposal is not None:
        patch.write_text(redact(result.proposal.patch))
    elif patch.exists():
        patch.unlink()


def _print(result: TuneResult, out: Path) -> None:
    counts = result.counts()
    print(
        one_line(
            f"opgate: tune {result.kernel} ({result.strategy}, base {result.base_sha[:10]}): "
            f"stop: {result.stop.line()}",
            2000,
        )
    )
    if result.sweep_stop is not None:
        print(one_line(f"  sweep:   {result.sweep_stop.detail}"))
    print(
        f"  trials:  {counts.get('judged', 0)} judged, {counts.get('reused', 0) + counts.get('repeat', 0)} answered "
        f"from the trials table, {counts.get('invalid', 0)} refused, {counts.get('malformed', 0)} unusable replies; "
        + (f"rounds {result.rounds} of {result.max_rounds}; " if result.strategy != "exhaustive" else "")
        + f"pass rate {result.pass_rate[0]}/{result.pass_rate[1]} case(s) faster"
    )
    t = result.tokens
    print(f"  tokens:  {t.total_tokens:,} of {t.limit:,} ({t.requests} request(s))")
    if result.comparison is not None:
        c = result.comparison
        reached = c.evaluations_to_optimum if c.evaluations_to_optimum is not None else "not reached"
        print(one_line(f"  optimum: {c.optimum_label} x{c.optimum_speedup:.3f}; agent regret {c.regret_pct:.2f}%, "
                       f"evaluations to the optimum: {reached}"))  # fmt: skip
    if result.proposal is not None:
        p = result.proposal
        print(
            one_line(
                f"  best:    {p.label} x{p.speedup:.3f} "
                f"(re-verified x{p.verified_speedup:.3f}, fresh processes, new seed)"
            )
        )
        print(f"  patch:   {out / 'candidate.patch'}")
    else:
        print(one_line(f"  nothing proposed: {result.not_proposed}", 1000))
    print(f"  summary: {out / 'tune.md'}")


def _post(args: argparse.Namespace, settings: Settings, result: TuneResult, out: Path) -> int:
    """Open the pull request (with --post) and reply on --issue; a GitHub failure is exit 3."""
    if args.review_workflow is not None and (why := rules.check_workflow(args.review_workflow)) is not None:
        raise InputError(f"--review-workflow: {why}")
    if not args.post:
        print("opgate: dry run (no --post): nothing pushed or posted")
        return 0
    try:
        with review_publish.open_edge(settings) as edge:
            pull: PullRef | None = None
            if result.proposal is not None:
                pull = publish.propose(edge, args.repo, result)
                print(
                    f"  posted:  {pull.url} ({'opened' if pull.created else 'already open'}, "
                    f"branch {result.proposal.branch})"
                )
                result.pull = PullOut(number=pull.number, url=pull.url, head_sha=pull.head_sha,
                                      branch=result.proposal.branch, created=pull.created)  # fmt: skip
                (out / "pull.json").write_text(redact(json.dumps(result.pull.model_dump(), indent=2)) + "\n")
                (out / "tune.json").write_text(redact(result.to_json()))
                _record_pull(settings, result.run_id, pull.url)
                if args.review_workflow is not None:
                    inputs = {"pr": str(pull.number), "head_sha": pull.head_sha}
                    edge.dispatch_workflow(args.review_workflow, edge.default_branch(), inputs)
                    print(f"  review:  {args.review_workflow} dispatched for #{pull.number} at {pull.head_sha[:10]}")
            if args.issue:
                edge.reply(args.issue, render("tune_reply.md.j2", marker=REPLY_MARKER, r=result, d=None, line=""))
    except ServiceError as exc:
        print(f"opgate: outside service failed: {exc}")
        return 3
    return 0


def _record_pull(settings: Settings, run_id: str, url: str) -> None:
    """The pull request on the run's ledger row (a run recorded in another ledger is left as it is)."""
    ledger = open_ledger(settings.database_url)
    try:
        TuningStore(ledger).set_pull(run_id, url)
    finally:
        ledger.close()


def _kernels(repo: Path, settings: Settings) -> list[str]:
    return sorted(find_manifests(repo, settings.repo_config.manifests))


def _answer(args: argparse.Namespace, settings: Settings) -> int:
    """A /tune comment: 👀; granted (write+, a known kernel) → tune.yml dispatched, 🚀 and a reply; else 👎 and why."""
    got = intake(args.event, SLASH)
    event, author, ignored = got.event, got.event.comment.user, got.ignored
    command: slash.TuneCommand | None = got.command
    if ignored is not None or command is None:
        print(f"opgate: ignored, {ignored}")
        return 0
    with review_publish.open_edge(settings) as edge:
        if args.post:
            edge.react(event.comment.id, "eyes")
        role = edge.role(author.login) if command.error is None else rules.UNKNOWN_ROLE
        decision = slash.decide(
            command, login=author.login, role=role, kernels=_kernels(args.repo, settings), number=event.number
        )
        print(one_line(f"opgate: /tune {'granted' if decision.granted else 'refused'}: {decision.reason}", 1000))
        if not args.post:
            print("opgate: dry run (no --post): nothing dispatched or posted")
            return 0
        if decision.granted:
            edge.dispatch_workflow(WORKFLOW, edge.default_branch(), decision.inputs)
            edge.react(event.comment.id, "rocket")
        else:
            edge.react(event.comment.id, "-1")
        edge.reply(event.number, SLASH.reply(decision, command.line))
    return 0


__all__ = ["GitHubEdge", "register", "run"]
