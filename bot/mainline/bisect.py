"""Bisecting main for one case: the plan, the search over the commits that touch the kernel, each step's side
from the review's case verdict and interval, and the result that becomes bisect.json (pure)."""

from __future__ import annotations

import math
import shlex
from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from bot.mainline.drift import CaseDrift, chain_ratio
from bot.models.finding import Outcome
from bot.models.judging import MeasureSettings
from bot.models.report import CaseReport, CaseStatus, KernelReport
from bot.verdict.compile_errors import describe
from bot.verdict.findings import case_lines, lines_of

SCHEMA = "opgate.bisect/1"
DEFAULT_BUDGET_MIN = 20.0
LONGER = 4  # a probe's one sequential measurement may run this many times the review's caps (it stops when decided)
MAX_SKIPS = 3  # commits that do not build (or cannot be judged) before the bisection gives up

Side = Literal["good", "bad", "undecided", "skipped", "error"]
BisectVerdict = Literal["fail", "pass", "undecided", "error"]


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True)


class BisectStep(_Model):
    """One commit judged against the good build: the case's review, as often as it took to decide a side."""

    sha: str
    subject: str = ""
    position: int = Field(description="place on main's first-parent line after the good commit (1 = its child)")
    side: Side = Field(
        description="bad: the case failed the limit it was judged by, good: it passed it; undecided, skipped (not "
        "built or not judged) or error (the case could not run)"
    )
    verdict: str = Field(description="the case's review verdict (pass|fail|inconclusive|skipped|error) at the end")
    why: str = Field(description="one line: what decided the side")
    measurements: int = Field(1, description="reviews of this commit against the good build (one sequential one)")
    attempts: int = Field(1, description="judge runs in fresh processes, every measurement together")
    regression_pct: float | None = Field(None, description="p50 against the good build, in %")
    ci95_pct: list[float] | None = Field(None, description="its 95% interval, in %")
    p50_ms: float | None = None
    base_p50_ms: float | None = Field(None, description="the good build's p50 in the same run")
    seconds: float = 0.0


class Skipped(_Model):
    """A commit the bisection probed but could not judge (it does not build, is incorrect, or crashed)."""

    sha: str
    subject: str = ""
    why: str


class Plan(_Model):
    """What the bisection will cost at most, printed before it starts."""

    commits: int = Field(description="main's first-parent commits after good, up to bad")
    candidates: int = Field(description="those whose change touches the kernel's globs (the others are skipped)")
    max_probes: int = Field(description="⌈log2 candidates⌉ + 1 (the bad end first, to confirm it)")
    max_skips: int = MAX_SKIPS
    longer: int = Field(
        LONGER,
        description="a probe's caps (seconds, processes, samples) in times the review's: one sequential measurement",
    )
    budget_s: float

    @property
    def untouched(self) -> int:
        return self.commits - self.candidates


class BisectReport(_Model):
    """bisect.json: where main's first bad commit for one case is, how it was found and how sure it is."""

    schema_: str = Field(SCHEMA, alias="schema")
    kernel: str
    case_name: str
    device: str = "cpu"
    device_name: str = "cpu"
    good_sha: str
    bad_sha: str
    verdict: BisectVerdict = Field(
        description="fail: first_bad is slower than good beyond the split and the commit before it is not; pass: the "
        "bad end is not slower than good; undecided: the first bad commit is one of `suspects` (see `undecided`); "
        "error: the bisection could not run (see `reasons`)"
    )
    first_bad: BisectStep | None = None
    last_good_sha: str = Field(description="the last commit known good (the good end when no probe was good)")
    suspects: list[str] = Field(default_factory=list, description="commits the first bad one may be, oldest first")
    limit_pct: float | None = Field(None, description="the case's latency limit (the gate's max_regression_pct)")
    split_pct: float | None = Field(
        None,
        description="the latency limit the probes after the bad end were judged against: the gate's, or halfway (in "
        "ratio) to the bad end's Δ when that is larger",
    )
    sure: str = Field("", description="one line: how sure the answer is")
    probes: list[BisectStep] = Field(default_factory=list)
    skipped: list[Skipped] = Field(default_factory=list)
    undecided: list[str] = Field(default_factory=list, description="what was not decided, and why")
    reasons: list[str] = Field(default_factory=list, description="why the bisection could not run")
    notes: list[str] = Field(default_factory=list)
    plan: Plan
    measurements: int = 0
    seconds: float = 0.0
    reproduce: str = Field(description="one line a kernel engineer runs locally: the two builds and the case")
    created_at: str = ""
    opgate_version: str = ""

    model_config = ConfigDict(frozen=True, populate_by_name=True)

    def to_json(self) -> str:
        return self.model_dump_json(indent=2, by_alias=True)

    @property
    def key(self) -> tuple[str, str, str]:
        return self.kernel, self.case_name, self.device_name


def plan(commits: int, candidates: int, budget_s: float) -> Plan:
    steps = math.ceil(math.log2(candidates)) + 1 if candidates > 1 else candidates
    return Plan(commits=commits, candidates=candidates, max_probes=steps, budget_s=budget_s)


def plan_text(p: Plan, kernel: str, case: str, good: str, bad: str) -> str:
    return (
        f"bisect {kernel}/{case}: {good[:12]}..{bad[:12]}, {p.commits} commit(s) on main's first-parent line, "
        f"{p.candidates} touch the kernel ({p.untouched} skipped unbuilt); at most {p.max_probes} probe(s) "
        f"(+1 per commit that does not build, {p.max_skips} at most), each one sequential measurement that may run "
        f"{p.longer}x the review's timing caps and stops once decided; budget {p.budget_s / 60:g} min"
    )


def reproduce(kernel: str, case: str, good: str, bad: str) -> str:
    """The command that measures `bad` against `good` on one case (the bisection of one commit: one step)."""
    return shlex.join(["opgate", "history", "bisect", "--kernel", kernel, "--case", case, "--good", good, "--bad", bad])


def split_pct(limit_pct: float, bad_end_pct: float) -> float:
    """Where a step turns bad: halfway, in ratio, between the good build and the bad end, never below the limit
    (a 2x regression is then found without deciding 3% on a noisy runner; a small drift at the gate's own limit)."""
    halfway = (math.sqrt(max(1.0 + bad_end_pct / 100.0, 1e-9)) - 1.0) * 100.0
    return round(max(limit_pct, halfway), 2)


def _span(c: CaseReport) -> str:
    assert c.regression_pct is not None and c.ci95_pct is not None
    return f"p50 {c.regression_pct:+.1f}% (95% CI {c.ci95_pct[0]:+.1f}%..{c.ci95_pct[1]:+.1f}%)"


def side(kernel: KernelReport | None, case: CaseReport | None) -> tuple[Side, str]:
    """Which side of the regression one review of a commit against the good build puts it on: the case's verdict
    against the limit it was judged by (the gate's for the bad end, the split after it): fail is bad, pass good,
    inconclusive undecided (the review decided nothing: an interval across the limit, or a noisy runner)."""
    if kernel is None:
        return "skipped", "the kernel is not in this commit"
    if kernel.verdict == "skipped" and not kernel.changed:
        return "good", "the kernel's sources are the good build's"
    if case is None:
        why = (
            "; ".join(lines_of(kernel, Outcome.fail, Outcome.error) + lines_of(kernel, Outcome.undecided))
            or f"the review of the kernel: {kernel.verdict}"
        )
        return "skipped", why
    if case.status == CaseStatus.compile_fail:
        return "skipped", f"does not build{f': {_first_error(kernel)}' if _first_error(kernel) else ''}"
    if case.status == CaseStatus.skipped:
        return "error", f"the case was not run: {'; '.join(case_lines(case)) or 'skipped'}"
    if case.status != CaseStatus.ok:
        return "skipped", f"{case.status.value}: {'; '.join(case_lines(case))}"
    limit = f"the {case.max_regression_pct:+.1f}% limit" if case.max_regression_pct is not None else "the limit"
    if case.regression_pct is None or case.ci95_pct is None or len(case.ci95_pct) != 2:
        if case.verdict == "pass" and case.stop_reason == "identical_build":
            return "good", "the same binary as the good build"
        return "undecided", "; ".join(case_lines(case)) or "no latency interval against the good build"
    if case.verdict == "fail":
        return "bad", f"{_span(case)} is above {limit}"
    if case.verdict == "pass":
        return "good", f"{_span(case)} is below {limit}"
    return "undecided", "; ".join(case_lines(case)) or f"{_span(case)}: {case.verdict}"


def _first_error(kernel: KernelReport) -> str:
    """The head build's first compile error as the review names it (`Build.errors`, read from the compiler's whole
    output: a log tail loses an error that warnings follow), "" when the build named none."""
    errors = kernel.build.errors if kernel.build is not None else []
    return describe(errors[0])[:200] if errors else ""


@dataclass
class Search:
    """The bisection over the candidates (oldest first): the bad end is probed first, then midpoints of the range
    (last good, first bad]; a commit that cannot be judged is skipped and a neighbour probed instead."""

    n: int
    lo: int = -1  # the last index known good (-1: the good end)
    hi: int = -1  # the first index known bad (the bad end until it is confirmed)
    confirmed: bool = False
    skipped: set[int] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.hi = self.n - 1

    def next(self) -> int | None:
        """The next index to measure; None when the range holds nothing left to measure."""
        if self.n == 0:
            return None
        if not self.confirmed:
            return self.hi
        open_ = [i for i in range(self.lo + 1, self.hi) if i not in self.skipped]
        if not open_:
            return None
        middle = (self.lo + self.hi) // 2
        return min(open_, key=lambda i: (abs(i - middle), i))

    def record(self, index: int, found: Side) -> None:
        if found == "bad":
            self.hi, self.confirmed = index, True
        elif found == "good":
            self.lo = index
        elif found == "skipped":
            self.skipped.add(index)

    def suspects(self) -> list[int]:
        """Indexes the first bad commit may be: the skipped ones left in the range, and the first known bad."""
        return list(range(self.lo + 1, self.hi + 1))


def drift_range(reference_sha: str, case: CaseDrift, limit_pct: float) -> tuple[str, str] | None:
    """(good, bad) to bisect one drifting case: the reference, and the first recorded commit at which the case's
    cumulative drift since the reference passes the limit; None when it never does."""
    for i, step in enumerate(case.steps):
        if chain_ratio(case.steps[: i + 1])[0] > limit_pct:
            return reference_sha, step.sha
    return None


def wanted(stored: BisectReport | None) -> bool:
    """Whether a bisection still has to run: none stored for the range, or the stored one decided nothing."""
    return stored is None or stored.verdict in ("undecided", "error")


def longer(measure: MeasureSettings, factor: int = LONGER) -> MeasureSettings:
    """A probe's settings: the review's sequential rule with `factor` times its caps (seconds, processes, samples).
    The floor (min_processes) stays the review's, so a probe whose interval clears the limit early stops as early
    as a review would; only an undecided one runs on, up to the longer caps, instead of being reviewed again."""
    if factor <= 1:
        return measure
    return measure.model_copy(
        update={
            "max_seconds": measure.max_seconds * factor,
            "max_processes": measure.max_processes * factor,
            "max_samples": measure.max_samples * factor,
        }
    )
