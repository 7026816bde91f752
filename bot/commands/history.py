"""`opgate history`: record a main commit's review in the ledger; check main's cumulative drift (and file issues,
naming each drifting case's first bad commit); bisect one case (bot/commands/bisect.py)."""

from __future__ import annotations

import argparse
from collections import defaultdict
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from pydantic import ValidationError

from bot.commands import Commands
from bot.commands import bisect as bisect_cmd
from bot.config.settings import Settings
from bot.edges import gitio, publish
from bot.errors import InputError
from bot.ledger import open_ledger
from bot.mainline import commits, record
from bot.mainline import drift as drift_core
from bot.mainline.store import History
from bot.models.output import DriftKernel, DriftOutput, RecordOutput, Reference
from bot.models.report import Report
from bot.present.render import commit_url, render
from bot.text.redact import redact
from bot.text.safe import Safe, one_line

DRIFT_MARKER = Safe("<!-- opgate:drift -->")  # printed as is in the comment-safe template
LABEL = "opgate-drift"


def register(commands: Commands) -> None:
    p = commands.add(
        "history",
        help="main's record per commit and its cumulative drift",
        description="Record main's figures per commit, case and device; compare main with a reference.",
    )
    actions = commands.nested(p, "history", dest="history_command", metavar="ACTION")
    rec = actions.add(
        "record",
        writes_ledger=True,
        help="store a main commit's review (report.json) in the ledger",
        description="Store the figures of a review of a main commit against the previous one (opgate review "
        "--base PREVIOUS --head COMMIT) per commit, case and device; recording a commit again replaces them.",
    )
    rec.add_argument("--report", type=Path, required=True, help="the review's report.json")
    rec.add_argument("--repo", type=Path, default=Path("."), help="git repository holding the commit (default: .)")
    rec.add_argument("--branch", default="main", help="the branch the commit is on (default: main)")
    dr = actions.add(
        "drift",
        help="main's cumulative drift per case against a reference; --post files one issue per kernel",
        description="Per case, the product of every recorded main step since the reference (a release tag, main N "
        "days ago, or a revision); beyond the limit, --post opens or edits the issue 'opgate drift: KERNEL' and "
        "closes it once the kernel is back within the limit.",
    )
    dr.add_argument("--repo", type=Path, default=Path("."), help="git repository (default: .)")
    dr.add_argument("--head", default="HEAD", help="main now (default: HEAD)")
    dr.add_argument("--reference", help="release, Nd (e.g. 30d) or a revision (default: OPGATE_DRIFT_REFERENCE)")
    dr.add_argument("--limit", type=float, help="drift limit in %% (default: OPGATE_DRIFT_LIMIT_PCT, 5)")
    dr.add_argument("--out-dir", type=Path, default=Path("reports"), help="where drift.md goes (default: reports)")
    dr.add_argument(
        "--post", action="store_true", help="bisect each drifting case, then open, edit or close each kernel's issue"
    )
    bisect_cmd.drift_flags(dr)
    bisect_cmd.register(actions)


def run(args: argparse.Namespace, settings: Settings) -> int:
    if args.history_command == "record":
        return _record(args, settings)
    if args.history_command == "bisect":
        return bisect_cmd.run(args, settings)
    return _drift(args, settings)


def _load_report(path: Path) -> Report:
    try:
        return Report.model_validate_json(path.read_text())
    except OSError as exc:
        raise InputError(f"--report {path}: cannot read it ({exc.strerror})") from exc
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise InputError(f"--report {path}: not an opgate.report file ({where}: {first['msg']})") from exc


def _record(args: argparse.Namespace, settings: Settings) -> int:
    report = _load_report(args.report)
    if report.pr is not None:
        raise InputError(f"--report {args.report} reviews pull request #{report.pr}, not a main commit")
    repo = gitio.toplevel(args.repo)
    committed_at, subject, parents = commits.commit_facts(repo, report.head_sha)
    with open_ledger(settings.database_url, create=settings.create_ledger) as ledger:
        store = History(ledger)
        pr = record.pr_from_subject(subject) or store.pr_of_head(report.head_sha)
        if pr is None and len(parents) > 1:
            pr = store.pr_of_head(parents[1])  # a merge commit: its second parent is the PR's head
        commit = record.MainCommit(
            sha=report.head_sha,
            base_sha=report.base_sha,
            branch=args.branch,
            committed_at=committed_at,
            subject=subject,
            pr=pr,
        )
        cases, resources = record.figures(report, commit)
        store.record(commit, cases, resources)
    kernels = sorted({c.kernel for c in cases} | {r.kernel for r in resources})
    carried = record.carried(report)
    if args.json:
        recorded = RecordOutput(
            branch=args.branch,
            head_sha=report.head_sha,
            base_sha=report.base_sha,
            pr=pr,
            cases=len(cases),
            functions=len(resources),
            kernels=kernels,
            carried=carried,
        )
        print(recorded.text())
        return 0
    print(
        f"opgate: recorded {args.branch} {report.head_sha[:12]} (against {report.base_sha[:12]}"
        f"{f', PR #{pr}' if pr else ''}): {len(cases)} case figure(s), {len(resources)} function(s)"
        f" [{', '.join(kernels) or 'no kernel changed'}]"
    )
    for line in carried:  # kept visible: no pull request fails on them until one makes them worse
        print(f"  main carries, noted and not failed: {line}")
    return 0


def render_issue(
    d: drift_core.KernelDrift, bisected: list[bisect_cmd.Named] | None = None, commit_base: str = ""
) -> str:
    """The drift issue of one kernel; `bisected`: its drifting cases' bisections; `commit_base`: from commit_url."""
    return render("drift_issue.md.j2", marker=DRIFT_MARKER, d=d, bisected=bisected or [], commit_url=commit_base)


def title(kernel: str) -> str:
    return f"opgate drift: {kernel}"


def _drift(args: argparse.Namespace, settings: Settings) -> int:
    if args.post and args.bisect_plan is not None:
        raise InputError("--bisect-plan writes the bisections to run and posts nothing: drop --post")
    if args.post and not (settings.github_token and settings.github_repository):
        raise InputError("--post needs GITHUB_TOKEN and GITHUB_REPOSITORY")
    limit = args.limit if args.limit is not None else settings.drift_limit_pct
    if limit <= 0:
        raise InputError(f"--limit {limit}: the drift limit must be a positive percentage")
    now = datetime.now(UTC)
    repo = gitio.toplevel(args.repo)
    head = gitio.resolve(repo, args.head)
    ref = commits.reference(repo, args.reference or settings.drift_reference, head, now)
    line = commits.chain(repo, ref.sha, head)
    touched = commits.touched(repo, [ref.sha, *line], commits.kernel_globs(repo, settings.repo_config))
    with open_ledger(settings.database_url, create=settings.create_ledger) as ledger:
        store = History(ledger)
        overrides: dict[int, list[drift_core.Override]] = defaultdict(list)
        for a in store.acceptances():
            if a.override:
                overrides[a.pr].append(
                    drift_core.Override(
                        pr=a.pr, login=a.login, role=a.role, reason=a.reason, kernels=a.kernels, created_at=a.created_at
                    )
                )
        drifts = drift_core.drift(
            ref,
            line,
            store.figures(),
            {c.sha: c for c in store.commits()},
            limit_pct=limit,
            touched=touched,
            overrides=overrides,
        )
        say = (lambda _: None) if args.json else print
        named = bisect_cmd.for_drift(args, settings, ledger, repo, drifts, ref.sha, say)
        link = commit_url(settings.github_server_url, settings.github_repository)
        bodies = {d.kernel: render_issue(d, named.get(d.kernel), link) for d in drifts}
        args.out_dir.mkdir(parents=True, exist_ok=True)
        path = args.out_dir / "drift.md"
        text = "\n\n---\n\n".join(bodies.values()) if bodies else f"No recorded figures since {ref.label}.\n"
        path.write_text(redact(text))
        say(f"opgate: drift since {ref.label} ({ref.sha[:12]}), {len(line)} main commit(s), limit {limit:g}% -> {path}")
        for d in drifts:
            w = d.worst
            state = "DRIFT" if d.flagged else "within the limit"
            where = f"{one_line(w.case_name)} ({one_line(w.device_name)})"
            say(f"opgate: {one_line(d.kernel)}: {w.drift_pct:+.1f}% on {where} — {state}")
            for sha in d.gaps:
                say(f"opgate: {d.kernel}: {sha[:12]} touched it but main's record has no figures for it")
            for n in named.get(d.kernel, []):
                said = bisect_cmd.headline(n.b) if n.b is not None else f"{n.case}: not bisected: {n.why} {n.command}"
                say(f"opgate: {one_line(d.kernel)}: {said}")
        urls = _post(settings, drifts, bodies, say) if args.post else {}
        store.record_checks(drift_core.checks(drifts, now.isoformat(timespec="seconds"), urls))
    if args.json:
        out = DriftOutput(
            reference=Reference(label=ref.label, sha=ref.sha),
            commits=len(line),
            limit_pct=limit,
            path=str(path),
            kernels=[
                DriftKernel(
                    kernel=d.kernel,
                    drift_pct=d.worst.drift_pct,
                    case=d.worst.case_name,
                    device=d.worst.device_name,
                    flagged=d.flagged,
                    gaps=d.gaps,
                    issue=urls.get(d.kernel),
                    bisections=[_bisection_json(n) for n in named.get(d.kernel, [])],
                )
                for d in drifts
            ],
        )
        print(out.text())
    return 0


def _bisection_json(n: bisect_cmd.Named) -> dict[str, object]:
    found = bisect_cmd.summary(n.b) if n.b is not None else {"why": n.why, "command": n.command}
    return {"case": n.case, **found}


def _post(
    settings: Settings, drifts: list[drift_core.KernelDrift], bodies: dict[str, str], say: Callable[[str], None]
) -> dict[str, str]:
    """Open or edit the issue of each drifting kernel; close the issue of a kernel back within the limit."""
    urls: dict[str, str] = {}
    with publish.open_edge(settings) as gh:
        for d in drifts:
            if d.flagged:
                issue = gh.upsert_issue(title(d.kernel), bodies[d.kernel], [LABEL], reopen=True)
                verb = "opened" if issue.created else ("edited" if issue.updated else "unchanged")
                urls[d.kernel] = issue.url
                say(f"opgate: drift issue #{issue.number} {verb}: {issue.url}")
            elif (closed := gh.close_issue(title(d.kernel), bodies[d.kernel], [LABEL])) is not None:
                urls[d.kernel] = closed.url
                if closed.updated:
                    say(f"opgate: drift issue #{closed.number} closed: {closed.url}")
    return urls
