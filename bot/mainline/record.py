"""Main's record: a review of one main commit against the previous one, as rows per commit, case and device (pure)."""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict

from bot.edges.machine import device_key
from bot.models.ledger import CaseFigure
from bot.models.report import CaseReport, KernelReport, Report, Resource
from bot.verdict.gate_resources import IN_BASE
from bot.verdict.occupancy import occupancy, table
from bot.wording.messages import render

# A squash merge ends its subject with "(#123)"; a merge commit starts "Merge pull request #123 from …".
_SQUASH_PR = re.compile(r"\(#(\d+)\)\s*$")
_MERGE_PR = re.compile(r"^Merge pull request #(\d+)\b")


class _Row(BaseModel):
    model_config = ConfigDict(frozen=True)


class MainCommit(_Row):
    """One recorded main commit: what was judged (`sha`) against what (`base_sha`, the previous main commit)."""

    sha: str
    base_sha: str
    branch: str = "main"
    committed_at: str  # ISO 8601, the commit's committer date
    subject: str = ""
    pr: int | None = None  # the pull request that landed it, when the commit says so or the ledger knows its head
    recorded_at: str = ""


class ResourceFigure(_Row):
    """One compiled GPU function of a kernel at one main commit, as ptxas reported it."""

    sha: str
    kernel: str
    function: str
    arch: str = "sm_90a"  # the architecture ptxas compiled it for: each architecture is its own series
    registers: int
    spill_bytes: int = 0
    smem_bytes: int = 0
    stack_bytes: int = 0
    threads: int | None = None  # max threads per block (__launch_bounds__), when known
    committed_at: str

    @property
    def occupancy(self) -> float | None:
        return occupancy_estimate(self.registers, self.threads, self.smem_bytes, self.arch)


def pr_from_subject(subject: str) -> int | None:
    """The pull request number a squash or merge commit names in its subject; None otherwise."""
    for pattern in (_SQUASH_PR, _MERGE_PR):
        if m := pattern.search(subject):
            return int(m.group(1))
    return None


def occupancy_estimate(registers: int, threads: int | None, smem_bytes: int, arch: str = "sm_90a") -> float | None:
    """Theoretical occupancy on `arch` (resident warps ÷ the SM's maximum) from registers per thread, threads per
    block and static shared memory, by bot/verdict/occupancy.py; None when the block size is unknown or opgate has
    no table for `arch`. An estimate: dynamic shared memory is not in ptxas' figures (taken as none), and the
    block barriers as the runtime assumes them (one)."""
    sm = table(arch)
    if not threads or threads <= 0 or sm is None or registers < 0 or smem_bytes < 0:
        return None
    occ = occupancy(registers, threads, smem_bytes, arch=sm)
    return occ.warps_per_sm / occ.max_warps_per_sm


def _device_name(report: Report, case: CaseReport) -> str:
    """The GPU model and architecture the case ran on (a merged review may hold several), or "cpu"."""
    if case.device != "cuda":
        return "cpu"
    return device_key(case.gpu or report.environment.gpu, case.arch or report.environment.arch)


def _resources(kernel: KernelReport) -> list[tuple[str, list[Resource], dict[str, int]]]:
    """(architecture, functions, threads) of every architecture whose resource check ran."""
    checks = [c for c in kernel.resource_checks() if c.status == "ok"]
    if checks:
        return [(c.arch, c.head, c.threads) for c in checks]
    return [("sm_90a", kernel.build.resources if kernel.build is not None else [], {})]


def carried(report: Report) -> list[str]:
    """What a main commit's review found main already had of an absolute rule (a spill, a launch kernel.toml does
    not size …), which the gate notes "in base too" and no pull request fails on: `kernel: line`, in English, so that
    main's record keeps it visible (docs/review.md, "What base already has")."""
    found = (f"{k.name}: {render(f)}" for k in report.kernels if k.changed for f in k.findings if f.key in IN_BASE)
    return list(dict.fromkeys(found))


def figures(report: Report, commit: MainCommit) -> tuple[list[CaseFigure], list[ResourceFigure]]:
    """The measured cases and compiled functions of every changed kernel in a main commit's review.

    A case without a head p50 (skipped, incorrect, not timed) has no figure: its verdict stays in the review.
    """
    cases: list[CaseFigure] = []
    resources: list[ResourceFigure] = []
    for k in report.kernels:
        if not k.changed:
            continue
        for c in k.cases:
            if c.p50_ms is None:
                continue
            low, high = (c.ci95_pct[0], c.ci95_pct[1]) if c.ci95_pct and len(c.ci95_pct) == 2 else (None, None)
            cases.append(
                CaseFigure(
                    sha=commit.sha,
                    base_sha=commit.base_sha,
                    kernel=k.name,
                    domain=k.domain,
                    case_name=c.name,
                    device=c.device,
                    device_name=_device_name(report, c),
                    p50_ms=c.p50_ms,
                    base_p50_ms=c.base_p50_ms,
                    regression_pct=c.regression_pct,
                    ci_low_pct=low,
                    ci_high_pct=high,
                    max_abs_err=c.max_abs_err,
                    verdict=c.verdict,
                    committed_at=commit.committed_at,
                )
            )
        for arch, found, threads in _resources(k):
            for r in found:
                resources.append(
                    ResourceFigure(
                        sha=commit.sha,
                        kernel=k.name,
                        function=r.function,
                        arch=arch,
                        registers=r.registers,
                        spill_bytes=r.spill_bytes,
                        smem_bytes=r.smem_bytes,
                        stack_bytes=r.stack_bytes,
                        threads=threads.get(r.function),
                        committed_at=commit.committed_at,
                    )
                )
    return cases, resources
