"""A bisection run for real: main's commits between two builds, each step a review of one commit against the good
build (the review's judge, sandbox, statistics and build cache) in one sequential measurement with longer caps,
within a budget."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from bot import __version__
from bot.config.repo import RepoConfig
from bot.config.settings import Settings
from bot.edges.gitio import git
from bot.errors import GitError, InputError, OpgateError
from bot.ledger import Ledger
from bot.mainline import bisect, commits
from bot.mainline.bisect import BisectReport, BisectStep, Search, Side, Skipped
from bot.review.checkout import checkouts, kernel_claims, kernel_globs
from bot.text.safe import one_line

if TYPE_CHECKING:
    from bot.review.flow import Reviewer

Say = Callable[[str], None]


@dataclass(frozen=True)
class BisectRequest:
    """One case of one kernel, between a good and a bad main commit (full SHAs)."""

    repo: Path
    kernel: str
    case: str
    good: str
    bad: str
    work: Path  # where the steps' reviews may write (the agent's candidates folder; nothing is asked offline)
    budget_s: float = bisect.DEFAULT_BUDGET_MIN * 60
    require_isolation: bool = False


@dataclass(frozen=True)
class Line:
    """Main's first-parent commits after good up to bad, and those whose change touches the kernel."""

    commits: list[str]
    touching: list[str]
    subjects: dict[str, str]
    device: str


def line(repo: Path, kernel: str, case: str, good: str, bad: str, config: RepoConfig) -> Line:
    """The commits to bisect; bad input (not an ancestor, an unknown kernel or case) is one clear error."""
    try:
        git(repo, "merge-base", "--is-ancestor", good, bad)
    except GitError as exc:
        raise InputError(f"--good {good[:12]} is not an ancestor of --bad {bad[:12]}: nothing to bisect") from exc
    after = commits.chain(repo, good, bad)
    if not after:
        raise InputError(f"--bad {bad[:12]} is --good {good[:12]}: nothing to bisect")
    with checkouts(repo, good, bad, config) as (base, head):
        rules = base.kernels.get(kernel)
        if rules is None:
            have = ", ".join(sorted(base.kernels)) or "none"
            raise InputError(f"--kernel {kernel}: no such kernel at --good {good[:12]} (have: {have})")
        cases = {c.name: c for c in rules.manifest.cases}
        if case not in cases:
            raise InputError(f"--case {case}: kernel {kernel} has no such case (have: {', '.join(cases)})")
        # a commit between the two may read what neither end reads: every path either claims or reads
        globs = [*kernel_claims(kernel, base, head), *kernel_globs(kernel, base, head)]
    touched = commits.touched(repo, [good, *after], {kernel: globs})
    rows = git(repo, "log", "--format=%H%x00%s", f"{good}..{bad}").splitlines()
    subjects = dict(row.split("\x00", 1) for row in rows if "\x00" in row)
    return Line(after, [s for s in after if kernel in touched[s]], subjects, cases[case].device)


@dataclass
class _Run:
    req: BisectRequest
    settings: Settings
    ledger: Ledger
    say: Say
    began: float = field(default_factory=time.monotonic)
    durations: list[float] = field(default_factory=list)
    device_name: str = "cpu"
    limit: float | None = None

    def elapsed(self) -> float:
        return time.monotonic() - self.began

    def over_budget(self) -> bool:
        estimate = sum(self.durations) / len(self.durations) if self.durations else 0.0
        return self.elapsed() + estimate > self.req.budget_s

    def reviewer(self, sha: str, limit_pct: float | None) -> Reviewer:
        """The review of one step; building it raises for what no step can fix (no runner, no sandbox)."""
        from bot.review.flow import Reviewer  # the runner: only when a step is measured
        from bot.review.host import here
        from bot.review.request import ReviewRequest

        r = self.req
        request = ReviewRequest(
            repo=r.repo,
            base=r.good,
            head=sha,
            out=r.work,
            offline=True,
            only_kernel=r.kernel,
            only_case=r.case,
            latency_limit_pct=limit_pct,
            resource_check=False,
            require_isolation=r.require_isolation,
        )
        settings = self.settings.model_copy(update={"measure": bisect.longer(self.settings.measure)})
        return Reviewer(request, settings, self.ledger, here(settings, require_isolation=r.require_isolation))

    def step(self, sha: str, subject: str, position: int, split: float | None) -> BisectStep:
        """Review one commit against the good build (judged against `split` when given, else the case's own limit)
        in one sequential measurement: the judge's own rule, stopping once the interval clears the limit, with
        `bisect.LONGER` times the review's caps — never a second review of the same commit."""
        found: Side = "undecided"
        why, verdict, attempts, measurements, seconds = "the time budget was spent first", "skipped", 0, 0, 0.0
        figures: dict[str, object] = {}
        if not self.over_budget():
            start = time.monotonic()
            reviewer = self.reviewer(sha, split)
            try:
                report = reviewer.run()
            except OpgateError as exc:  # this commit could not be reviewed (no manifest, no such kernel …)
                report = None
                found, why = "skipped", f"could not be reviewed: {one_line(exc, limit=300)}"
            finally:
                self.durations.append(time.monotonic() - start)
                seconds = time.monotonic() - start
            measurements = 1
            if report is not None:
                kernel = next((x for x in report.kernels if x.name == self.req.kernel), None)
                case = next((c for c in kernel.cases if c.name == self.req.case), None) if kernel else None
                found, why = bisect.side(kernel, case)
                attempts = case.attempts if case is not None else 1
                if case is not None:
                    verdict = case.verdict
                    figures = {
                        "regression_pct": case.regression_pct,
                        "ci95_pct": case.ci95_pct,
                        "p50_ms": case.p50_ms,
                        "base_p50_ms": case.base_p50_ms,
                    }
                    if split is None and case.max_regression_pct is not None:
                        self.limit = case.max_regression_pct  # the gate's own limit (the bad end is judged by it)
                    if case.device == "cuda":
                        self.device_name = report.environment.gpu or "cuda"
        if found == "undecided" and measurements:
            why = f"{why} at the end of one sequential measurement with {bisect.LONGER}x the review's caps"
        step = BisectStep(
            sha=sha,
            subject=subject,
            position=position,
            side=found,
            verdict=verdict,
            why=why,
            measurements=max(measurements, 1),
            attempts=max(attempts, 1),
            seconds=round(seconds, 1),
            **figures,  # type: ignore[arg-type]
        )
        self.say(f"opgate: probe {sha[:12]} {one_line(subject, limit=60)}: {found} — {one_line(why, limit=200)}")
        return step


def run(req: BisectRequest, settings: Settings, ledger: Ledger, say: Say) -> BisectReport:
    """Bisect (good, bad] for the case: the plan first (printed), then the steps, then what was found."""
    found = line(req.repo, req.kernel, req.case, req.good, req.bad, settings.repo_config)
    cands = found.touching
    p = bisect.plan(len(found.commits), len(cands), req.budget_s)
    say(f"opgate: {bisect.plan_text(p, req.kernel, req.case, req.good, req.bad)}")
    state = _Run(req, settings, ledger, say)
    search = Search(len(cands))
    position = {sha: i + 1 for i, sha in enumerate(found.commits)}
    steps: dict[int, BisectStep] = {}
    skipped: list[Skipped] = []
    undecided: list[str] = []
    reasons: list[str] = []
    notes: list[str] = []
    split: float | None = None
    stopped = False
    if not cands:
        undecided.append(
            f"no commit in {req.good[:12]}..{req.bad[:12]} touches {req.kernel}'s globs: its sources did not "
            "change, so no commit is to blame (the toolchain, torch or the runner moved?)"
        )
    elif cands[-1] != req.bad:
        notes.append(f"{req.bad[:12]} does not touch {req.kernel}: its sources are those of {cands[-1][:12]}")
    while not stopped and (i := search.next()) is not None:
        sha = cands[i]
        bad_end = not search.confirmed
        step = state.step(sha, found.subjects.get(sha, ""), position[sha], None if bad_end else split)
        steps[i] = step
        search.record(i, step.side)
        if step.side == "skipped":
            skipped.append(Skipped(sha=sha, subject=step.subject, why=step.why))
        if bad_end and step.side == "bad":
            split = bisect.split_pct(state.limit if state.limit is not None else 0.0, step.regression_pct or 0.0)
            if split != state.limit:
                notes.append(
                    f"the commits after the bad end were judged against {split:+.1f}%, halfway (in ratio) between the "
                    f"good build and the bad end's {step.regression_pct:+.1f}%: a commit is bad when it fails that"
                )
        elif bad_end and step.side == "good":
            stopped = True
        elif bad_end and step.side in ("skipped", "error"):
            reasons.append(f"the bad end {sha[:12]} could not be judged: {step.why}")
            stopped = True
        elif step.side == "error":
            reasons.append(f"{sha[:12]}: {step.why}")
            stopped = True
        if step.side == "undecided":
            undecided.append(f"{sha[:12]} {one_line(step.subject, limit=60)}: {step.why}")
            stopped = True
        if len(skipped) > p.max_skips:
            undecided.append(f"{len(skipped)} commits could not be judged, more than the {p.max_skips} allowed")
            stopped = True
        if not stopped and search.next() is not None and state.over_budget():
            undecided.append(f"the time budget ({req.budget_s / 60:g} min) was spent after {len(steps)} probe(s)")
            stopped = True
    return _conclude(req, found, p, search, steps, skipped, undecided, reasons, notes, split, state)


def _conclude(
    req: BisectRequest,
    found: Line,
    p: bisect.Plan,
    search: Search,
    steps: dict[int, BisectStep],
    skipped: list[Skipped],
    undecided: list[str],
    reasons: list[str],
    notes: list[str],
    split: float | None,
    state: _Run,
) -> BisectReport:
    cands = found.touching
    last_good = cands[search.lo] if search.lo >= 0 else req.good
    verdict: bisect.BisectVerdict
    first_bad: BisectStep | None = None
    suspects = [cands[i] for i in search.suspects()] if search.confirmed else cands[search.lo + 1 :]
    end = steps.get(len(cands) - 1)
    sure = ""
    if reasons:
        verdict = "error"
    elif end is not None and end.side == "good":
        verdict, last_good, suspects = "pass", cands[-1], []
        sure = f"the bad end {cands[-1][:12]}: {end.why}"
    elif undecided or not search.confirmed:
        verdict = "undecided"
    elif len(suspects) > 1:
        verdict = "undecided"
        names = ", ".join(s[:12] for s in suspects[:-1])
        undecided.append(
            f"the first bad commit is {suspects[-1][:12]} or one before it that could not be judged: {names}"
        )
    else:
        verdict, first_bad = "fail", steps[search.hi]
        before = steps.get(search.lo)
        good_side = f"{last_good[:12]} {before.why}" if before is not None else f"{last_good[:12]} is the good end"
        sure = f"{first_bad.sha[:12]} {first_bad.why}; the commit before it on the kernel's line, {good_side}"
    total = sum(x.measurements for x in steps.values())
    if sure:
        sure = f"{sure}; {len(steps)} probe(s), {total} measurement(s), each decided by the review's 95% interval"
    bad_for_command = first_bad.sha if first_bad is not None else (suspects[-1] if suspects else req.bad)
    good_for_command = last_good if verdict in ("fail", "undecided") else req.good
    return BisectReport(
        kernel=req.kernel,
        case_name=req.case,
        device=found.device,
        device_name=state.device_name,
        good_sha=req.good,
        bad_sha=req.bad,
        verdict=verdict,
        first_bad=first_bad,
        last_good_sha=last_good,
        suspects=suspects if verdict != "pass" else [],
        limit_pct=state.limit,
        split_pct=split,
        sure=sure,
        probes=[steps[i] for i in steps],
        skipped=skipped,
        undecided=undecided,
        reasons=reasons,
        notes=notes,
        plan=p,
        measurements=total,
        seconds=round(state.elapsed(), 1),
        reproduce=bisect.reproduce(req.kernel, req.case, good_for_command, bad_for_command),
        created_at=datetime.now(UTC).isoformat(timespec="seconds"),
        opgate_version=__version__,
    )
