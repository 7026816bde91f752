"""`opgate history bisect`, and the bisections `opgate history drift` runs, plans or reads for its issues."""

from __future__ import annotations

import argparse
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from pydantic import ValidationError

from bot.commands import Commands
from bot.config.settings import Settings
from bot.edges import gitio
from bot.edges.machine import detect
from bot.errors import InputError
from bot.ledger import Ledger, open_ledger
from bot.mainline import bisect, bisect_run, commits
from bot.mainline import drift as drift_core
from bot.mainline.bisect import BisectReport
from bot.mainline.store import History
from bot.models.output import BisectSummary
from bot.present.render import commit_url, render
from bot.text.redact import redact
from bot.text.safe import one_line

log = logging.getLogger(__name__)

Say = Callable[[str], None]
REPORT, MARKDOWN = "bisect.json", "bisect.md"


def register(actions: Commands) -> None:
    b = actions.add(
        "bisect",
        help="find the main commit that made one case slower",
        description="Bisect main's first-parent commits between a good and a bad build of one kernel for one case: "
        "each probe is a review of one commit against the good build (same judge, sandbox, statistics and build "
        f"cache) in one sequential measurement with {bisect.LONGER}x the review's caps, commits that do not touch the "
        "kernel's globs are skipped unbuilt. "
        "Without --good/--bad the range comes from main's record (the drift reference, and the first recorded commit "
        "at which the case's drift passes the limit). Writes bisect.json and bisect.md.",
    )
    b.add_argument("--kernel", required=True, help="the kernel (its name in kernel.toml)")
    b.add_argument("--case", required=True, help="the case to bisect (its name in the good build's kernel.toml)")
    b.add_argument("--good", help="a revision where the case was fast (default: the drift reference)")
    b.add_argument("--bad", help="a later revision where it is slow (default: from main's record)")
    b.add_argument("--repo", type=Path, default=Path("."), help="git repository (default: .)")
    b.add_argument("--head", default="HEAD", help="main now, for a range from the record (default: HEAD)")
    b.add_argument("--reference", help="release, Nd or a revision, for a range from the record (default: drift's)")
    b.add_argument("--limit", type=float, help="drift limit in %% that picks the bad record (default: drift's, 5)")
    _budget_flag(b)
    b.add_argument("--remeasure", help=argparse.SUPPRESS)  # removed: only its clear error is left (docs/cli.md)
    b.add_argument("--out", type=Path, default=Path("reports/bisect"), help="where bisect.json and bisect.md go")
    b.add_argument("--require-isolation", action="store_true", help="never build or run without the sandbox")


def _budget_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--budget", type=float, help="minutes one bisection may take (default: OPGATE_BISECT_BUDGET_MIN, 20)"
    )


def drift_flags(dr: argparse.ArgumentParser) -> None:
    """The flags of `opgate history drift` that decide which bisections it runs, reads or plans."""
    dr.add_argument("--no-bisect", action="store_true", help="with --post: name only bisections the ledger holds")
    dr.add_argument(
        "--bisections", type=Path, nargs="+", metavar="DIR", help="bisect.json folders a job without secrets wrote"
    )
    dr.add_argument("--bisect-plan", type=Path, metavar="FILE", help="write the bisections needed (JSON) and run none")
    _budget_flag(dr)


def _budget_s(args: argparse.Namespace, settings: Settings) -> float:
    minutes = args.budget if args.budget is not None else settings.bisect_budget_min
    if minutes <= 0:
        raise InputError(f"--budget {minutes:g}: a bisection's budget must be a positive number of minutes")
    return minutes * 60


# -- opgate history bisect ------------------------------------------------------------------------


def run(args: argparse.Namespace, settings: Settings) -> int:
    if args.remeasure is not None:
        raise InputError(
            "--remeasure was removed: a probe is no longer reviewed again while undecided, it is one sequential "
            f"measurement that may run {bisect.LONGER}x the review's caps (OPGATE_MEASURE_* sets them) and stops once "
            "decided"
        )
    budget = _budget_s(args, settings)
    repo = gitio.toplevel(args.repo)
    say = (lambda _: None) if args.json else print
    with open_ledger(settings.database_url, create=settings.create_ledger) as ledger:
        good, bad = _range(args, settings, repo, History(ledger))
        req = bisect_run.BisectRequest(
            repo=repo,
            kernel=args.kernel,
            case=args.case,
            good=good,
            bad=bad,
            work=args.out / "probes",
            budget_s=budget,
            require_isolation=args.require_isolation,
        )
        result = _bisect(req, settings, ledger, say)
    _, path = write(result, args.out, settings)
    if args.json:
        print(BisectSummary.model_validate(summary(result, path)).text())
    else:
        print(f"opgate: {headline(result)} -> {path}")
        print(f"opgate: reproduce: {result.reproduce}")
    return 0 if result.verdict in ("fail", "pass") else 1


def _range(args: argparse.Namespace, settings: Settings, repo: Path, store: History) -> tuple[str, str]:
    """(good, bad) as full SHAs: the two given, or from main's record."""
    if args.good and args.bad:
        return gitio.resolve(repo, args.good), gitio.resolve(repo, args.bad)
    head = gitio.resolve(repo, args.head)
    ref = commits.reference(repo, args.good or args.reference or settings.drift_reference, head, datetime.now(UTC))
    if args.bad:
        return ref.sha, gitio.resolve(repo, args.bad)
    limit = args.limit if args.limit is not None else settings.drift_limit_pct
    drifts = drift_core.drift(ref, commits.chain(repo, ref.sha, head), store.figures(kernel=args.kernel), {})
    cases = [c for d in drifts for c in d.cases if d.kernel == args.kernel and c.case_name == args.case]
    if not cases:
        raise InputError(
            f"--kernel {args.kernel} --case {args.case}: main's record has no figures for it since {ref.label} "
            f"({ref.sha[:12]}); give --good and --bad"
        )
    found = bisect.drift_range(ref.sha, max(cases, key=lambda c: c.drift_pct), limit)
    if found is None:
        raise InputError(
            f"{args.kernel}/{args.case} never drifted beyond {limit:g}% since {ref.label} in main's record: "
            "nothing to bisect (give --bad, or a lower --limit)"
        )
    return found


def _bisect(req: bisect_run.BisectRequest, settings: Settings, ledger: Ledger, say: Say) -> BisectReport:
    req.work.mkdir(parents=True, exist_ok=True)
    result = bisect_run.run(req, settings, ledger, say)
    History(ledger).record_bisection(result)
    return result


def write(result: BisectReport, out: Path, settings: Settings) -> tuple[str, Path]:
    """bisect.json and bisect.md into `out`; the markdown and the report's path."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / REPORT
    path.write_text(redact(result.to_json()))
    md = render_md(result, settings)
    (out / MARKDOWN).write_text(redact(md))
    return md, path


def render_md(result: BisectReport, settings: Settings | None = None) -> str:
    link = commit_url(settings.github_server_url, settings.github_repository) if settings else commit_url(None, None)
    return render("bisect.md.j2", r=result, commit_url=link)


def headline(r: BisectReport) -> str:
    where = f"{r.kernel}/{r.case_name}"
    if r.verdict == "fail" and r.first_bad is not None:
        return f"{where}: first bad commit {r.first_bad.sha[:12]} {one_line(r.first_bad.subject, limit=60)} ({r.sure})"
    if r.verdict == "pass":
        return f"{where}: not reproduced ({r.sure})"
    if r.verdict == "undecided":
        return f"{where}: undecided: {'; '.join(r.undecided)}"
    return f"{where}: could not bisect: {'; '.join(r.reasons)}"


def summary(r: BisectReport, path: Path | None = None) -> dict[str, object]:
    return {
        "kernel": r.kernel,
        "case": r.case_name,
        "verdict": r.verdict,
        "first_bad": r.first_bad.sha if r.first_bad is not None else None,
        "suspects": r.suspects,
        "probes": len(r.probes),
        "measurements": r.measurements,
        "skipped": [s.sha for s in r.skipped],
        "seconds": r.seconds,
        "reproduce": r.reproduce,
        "path": str(path) if path is not None else None,
    }


# -- the bisections of `opgate history drift` ------------------------------------------------------


@dataclass(frozen=True)
class Target:
    """One drifting case's range: what a bisection for the drift issue covers."""

    kernel: str
    case: str
    device_name: str
    good: str
    bad: str

    @property
    def key(self) -> tuple[str, str, str]:
        return self.kernel, self.case, self.device_name


@dataclass
class Named:
    """What the drift issue says for one drifting case: its bisection, or why there is none."""

    case: str
    b: BisectReport | None
    why: str = ""
    command: str = ""  # the bisection to run, when there is none


def targets(drifts: list[drift_core.KernelDrift], reference_sha: str) -> list[Target]:
    found = []
    for d in drifts:
        for c in d.cases:
            if c.flagged and (rng := bisect.drift_range(reference_sha, c, d.limit_pct)) is not None:
                found.append(Target(d.kernel, c.case_name, c.device_name, *rng))
    return found


def for_drift(
    args: argparse.Namespace,
    settings: Settings,
    ledger: Ledger,
    repo: Path,
    drifts: list[drift_core.KernelDrift],
    reference_sha: str,
    say: Say,
) -> dict[str, list[Named]]:
    """Kernel -> what its issue names per drifting case: bisections read from parts (--bisections) or the ledger,
    or run here (--post without --no-bisect / --bisections). With --bisect-plan, the plan is written instead."""
    store = History(ledger)
    wanted = targets(drifts, reference_sha)
    if args.bisections:
        _store_parts(args.bisections, wanted, repo, store, say)
    found = {t.key: b for t in wanted if (b := store.bisection(*t.key, t.good, t.bad)) is not None}
    if args.bisect_plan is not None:
        _write_plan(args.bisect_plan, [t for t in wanted if bisect.wanted(found.get(t.key))], say)
    elif args.post and not args.no_bisect and not args.bisections:
        here = _device_names()
        budget = _budget_s(args, settings)
        for t in wanted:
            if not bisect.wanted(found.get(t.key)) or t.device_name not in here:
                continue
            req = bisect_run.BisectRequest(
                repo=repo,
                kernel=t.kernel,
                case=t.case,
                good=t.good,
                bad=t.bad,
                work=args.out_dir / "bisect" / f"{t.kernel}-{t.case}" / "probes",
                budget_s=budget,
                require_isolation=settings.require_isolation,
            )
            found[t.key] = _bisect(req, settings, ledger, say)
            write(found[t.key], req.work.parent, settings)
            say(f"opgate: {headline(found[t.key])}")
    named: dict[str, list[Named]] = {}
    for t in wanted:
        label = t.case if t.device_name in ("cpu", "") else f"{t.case} ({t.device_name})"
        b = found.get(t.key)
        command = bisect.reproduce(t.kernel, t.case, t.good, t.bad) if b is None else ""
        named.setdefault(t.kernel, []).append(Named(label, b, _why_not(args, t) if b is None else "", command))
    return named


def _why_not(args: argparse.Namespace, t: Target) -> str:
    if args.no_bisect or args.bisections:
        return "pending (the scheduled bisection job runs it), or run"
    if args.post:
        return f"this runner has no {t.device_name}; on one, run"
    return "`opgate history drift --post` runs it, or run"


def _device_names() -> set[str]:
    env = detect()
    return {"cpu", *([env.gpu or "cuda"] if env.device == "cuda" else [])}


def _write_plan(path: Path, todo: list[Target], say: Say) -> None:
    plan = {
        "include": [
            {"n": i, "kernel": t.kernel, "case": t.case, "device": t.device_name, "good": t.good, "bad": t.bad}
            for i, t in enumerate(todo)
        ]
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(plan))
    say(f"opgate: {len(todo)} bisection(s) to run -> {path}")


def _store_parts(folders: list[Path], wanted: list[Target], repo: Path, store: History, say: Say) -> None:
    """Keep each bisect.json a bisection job wrote when it covers a drifting case's exact range; say why not else."""
    by_range = {(*t.key, t.good, t.bad): t for t in wanted}
    for folder in folders:
        path = folder / REPORT
        if not path.is_file():
            say(f"opgate: {folder}: no {REPORT} (the bisection job failed or was cancelled); not used")
            continue
        try:
            part = BisectReport.model_validate_json(path.read_text())
        except (OSError, ValidationError) as exc:
            why = one_line(exc, limit=200)
            raise InputError(f"--bisections {folder}: not an {bisect.SCHEMA} file ({why})") from exc
        if (part.kernel, part.case_name, part.device_name, part.good_sha, part.bad_sha) not in by_range:
            say(f"opgate: {path}: bisects {one_line(part.kernel)}/{one_line(part.case_name)} over a range no drifting "
                "case has now; not used")  # fmt: skip
            continue
        line = set(commits.chain(repo, part.good_sha, part.bad_sha))
        named = [part.first_bad.sha] if part.first_bad is not None else []
        named += [*part.suspects, *(x.sha for x in part.probes), *(s.sha for s in part.skipped)]
        if any(sha not in line for sha in named):
            raise InputError(f"--bisections {folder}: names a commit outside {part.good_sha[:12]}..{part.bad_sha[:12]}")
        store.record_bisection(part)
        log.info("bisection of %s/%s stored from %s", part.kernel, part.case_name, path)
