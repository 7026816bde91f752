"""Cumulative drift: main now against a reference, per case, as the product of each recorded step (pure)."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict

from bot.mainline.record import MainCommit
from bot.models.ledger import CaseFigure

Z95 = 1.959964
MOVED_PCT = 1.0  # a step without a CI "moved" the case when it changed it by at least this much
DEFAULT_LIMIT_PCT = 5.0


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True)


class Reference(_Model):
    """What main is compared with: a release tag, or main as it was N days ago."""

    label: str  # "v0.3", "main 30 days ago"
    sha: str
    committed_at: str = ""


class Override(_Model):
    """An `/accept --override` on the pull request that landed a commit."""

    pr: int
    login: str
    role: str
    reason: str
    kernels: list[str]
    created_at: str = ""


class Step(_Model):
    """One recorded main commit's effect on one case: head ÷ base, measured interleaved."""

    sha: str
    base_sha: str
    committed_at: str
    regression_pct: float
    ci_low_pct: float | None = None
    ci_high_pct: float | None = None
    p50_ms: float
    verdict: str

    @property
    def moved(self) -> bool:
        if self.ci_low_pct is not None and self.ci_high_pct is not None:
            return self.ci_low_pct > 0 or self.ci_high_pct < 0
        return abs(self.regression_pct) >= MOVED_PCT


class CaseDrift(_Model):
    case_name: str
    device_name: str
    drift_pct: float  # product of every step since the reference, minus one, in %
    ci_low_pct: float
    ci_high_pct: float
    steps: list[Step]
    reference_p50_ms: float | None = None  # measured at (or against) the reference commit, when recorded
    now_p50_ms: float | None = None
    flagged: bool

    @property
    def since(self) -> str:
        """When the case first moved after the reference (the first step that moved it), as a date."""
        first = next((s for s in self.steps if s.moved), self.steps[0] if self.steps else None)
        return first.committed_at[:10] if first else ""


class Mover(_Model):
    """A main commit that moved at least one case of the kernel, with its pull request and overrides."""

    sha: str
    committed_at: str
    subject: str
    pr: int | None
    verdict: str  # the worst verdict of its steps (fail > inconclusive > pass)
    changes: list[tuple[str, float]]  # (case, regression %) for every case it moved
    overrides: list[Override] = []


class KernelDrift(_Model):
    kernel: str
    domain: str
    reference: Reference
    limit_pct: float
    cases: list[CaseDrift]
    movers: list[Mover]
    gaps: list[str] = []  # main commits since the reference that touched the kernel but have no record

    @property
    def flagged(self) -> bool:
        return any(c.flagged for c in self.cases)

    @property
    def worst(self) -> CaseDrift:
        return max(self.cases, key=lambda c: c.drift_pct)


def _log_sigma(step: Step) -> float:
    """Standard error of ln(ratio) from the step's 95% CI (0 without one)."""
    if step.ci_low_pct is None or step.ci_high_pct is None:
        return 0.0
    low, high = 1 + step.ci_low_pct / 100, 1 + step.ci_high_pct / 100
    if low <= 0 or high <= 0:
        return 0.0
    return (math.log(high) - math.log(low)) / (2 * Z95)


def chain_ratio(steps: list[Step]) -> tuple[float, float, float]:
    """(drift %, CI low %, CI high %): the product of the step ratios; the CI combines the steps' CIs in
    log space as independent errors (each step is its own interleaved A/B measurement)."""
    total = sum(math.log(1 + s.regression_pct / 100) for s in steps)
    sigma = math.sqrt(sum(_log_sigma(s) ** 2 for s in steps))
    return tuple(round((math.exp(x) - 1) * 100, 2) for x in (total, total - Z95 * sigma, total + Z95 * sigma))  # type: ignore[return-value]


_RANK = {"fail": 3, "error": 3, "inconclusive": 2, "pass": 1}


def drift(
    reference: Reference,
    chain: list[str],
    figures: list[CaseFigure],
    commits: Mapping[str, MainCommit],
    *,
    limit_pct: float = DEFAULT_LIMIT_PCT,
    touched: Mapping[str, set[str]] | None = None,
    overrides: Mapping[int, list[Override]] | None = None,
) -> list[KernelDrift]:
    """Per kernel and case, main's drift since `reference`.

    chain: main's first-parent commits after the reference, oldest first, ending at main now. Only figures of
    those commits count. touched: commit -> kernels its diff touched (for gaps); overrides: PR -> overrides.
    """
    position = {sha: i for i, sha in enumerate([reference.sha, *chain])}
    by_case: dict[tuple[str, str, str], dict[str, CaseFigure]] = defaultdict(dict)
    domains: dict[str, str] = {}
    at_reference: dict[tuple[str, str, str], CaseFigure] = {}
    for f in figures:
        key = (f.kernel, f.case_name, f.device_name)
        if f.sha == reference.sha:
            at_reference[key] = f
        elif position.get(f.sha, 0) > 0 and f.ratio is not None:
            by_case[key][f.sha] = f  # a re-recorded commit: the later record wins
            domains[f.kernel] = f.domain
    kernels: dict[str, list[CaseDrift]] = defaultdict(list)
    step_of: dict[str, dict[str, dict[str, Step]]] = defaultdict(lambda: defaultdict(dict))
    for (kernel, case_name, device_name), found in sorted(by_case.items()):
        ordered = sorted(found.values(), key=lambda f: position[f.sha])
        steps = [
            Step(
                sha=f.sha,
                base_sha=f.base_sha,
                committed_at=f.committed_at,
                regression_pct=((f.ratio or 1.0) - 1) * 100,
                ci_low_pct=f.ci_low_pct,
                ci_high_pct=f.ci_high_pct,
                p50_ms=f.p50_ms,
                verdict=f.verdict,
            )
            for f in ordered
        ]
        pct, low, high = chain_ratio(steps)
        ref = at_reference.get((kernel, case_name, device_name))
        first = ordered[0]
        ref_p50 = ref.p50_ms if ref is not None else (first.base_p50_ms if first.base_sha == reference.sha else None)
        kernels[kernel].append(
            CaseDrift(
                case_name=case_name,
                device_name=device_name,
                drift_pct=pct,
                ci_low_pct=low,
                ci_high_pct=high,
                steps=steps,
                reference_p50_ms=ref_p50,
                now_p50_ms=ordered[-1].p50_ms,
                flagged=pct > limit_pct,
            )
        )
        for s in steps:
            step_of[kernel][s.sha][case_name if device_name in ("cpu", "") else f"{case_name} ({device_name})"] = s
    result = []
    for kernel, cases in sorted(kernels.items()):
        movers = _movers(step_of[kernel], commits, overrides or {}, kernel, position)
        result.append(
            KernelDrift(
                kernel=kernel,
                domain=domains.get(kernel, ""),
                reference=reference,
                limit_pct=limit_pct,
                cases=cases,
                movers=movers,
                gaps=_gaps(kernel, by_case, [reference.sha, *chain], position, touched),
            )
        )
    return result


def _movers(
    steps: Mapping[str, Mapping[str, Step]],
    commits: Mapping[str, MainCommit],
    overrides: Mapping[int, list[Override]],
    kernel: str,
    position: Mapping[str, int],
) -> list[Mover]:
    movers = []
    for sha in sorted(steps, key=lambda s: position[s]):
        per_case = steps[sha]
        commit = commits.get(sha)
        pr = commit.pr if commit is not None else None
        mine = [o for o in overrides.get(pr, []) if kernel in o.kernels or not o.kernels] if pr is not None else []
        moved = [(case, round(s.regression_pct, 2)) for case, s in sorted(per_case.items()) if s.moved]
        if not moved and not mine:
            continue
        first = next(iter(per_case.values()))
        movers.append(
            Mover(
                sha=sha,
                committed_at=first.committed_at,
                subject=commit.subject if commit is not None else "",
                pr=pr,
                verdict=max((s.verdict for s in per_case.values()), key=lambda v: _RANK.get(v, 0)),
                changes=moved,
                overrides=mine,
            )
        )
    return movers


def _gaps(
    kernel: str,
    by_case: Mapping[tuple[str, str, str], Mapping[str, CaseFigure]],
    line: list[str],
    position: Mapping[str, int],
    touched: Mapping[str, set[str]] | None,
) -> list[str]:
    """Commits after the reference that touched the kernel and fall in no record's (base, head] interval."""
    if touched is None:
        return []
    covered: set[int] = set()
    for (k, _, _), found in by_case.items():
        if k != kernel:
            continue
        for f in found.values():
            end = position[f.sha]
            start = position.get(f.base_sha, end - 1)
            covered.update(range(start + 1, end + 1))
    return [sha for i, sha in enumerate(line) if i > 0 and kernel in touched.get(sha, set()) and i not in covered]


class DriftCheck(_Model):
    """One case's drift as one `opgate history drift` run saw it (kept for the weekly summary and the dashboard)."""

    checked_at: str
    kernel: str
    case_name: str
    device_name: str
    reference_label: str
    reference_sha: str
    drift_pct: float
    ci_low_pct: float
    ci_high_pct: float
    limit_pct: float
    flagged: bool
    issue_url: str = ""


def checks(drifts: list[KernelDrift], checked_at: str, issue_urls: Mapping[str, str]) -> list[DriftCheck]:
    """The rows one drift run leaves in the ledger: every case of every kernel, flagged or not."""
    return [
        DriftCheck(
            checked_at=checked_at,
            kernel=d.kernel,
            case_name=c.case_name,
            device_name=c.device_name,
            reference_label=d.reference.label,
            reference_sha=d.reference.sha,
            drift_pct=c.drift_pct,
            ci_low_pct=c.ci_low_pct,
            ci_high_pct=c.ci_high_pct,
            limit_pct=d.limit_pct,
            flagged=c.flagged,
            issue_url=issue_urls.get(d.kernel, ""),
        )
        for d in drifts
        for c in d.cases
    ]
