"""One tuning candidate reviewed like a pull request against base: the patch in a scratch worktree, then a Reviewer."""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bot.config.settings import Settings
from bot.ledger import Ledger
from bot.models.agent_report import ProposedCase
from bot.models.finding import Gate, Outcome
from bot.models.report import KernelReport
from bot.review.candidates import applied
from bot.review.flow import Reviewer
from bot.review.host import here
from bot.review.orchestrate import write
from bot.review.request import ReviewRequest
from bot.tune.model import CaseResult, Source, Trial
from bot.verdict.findings import case_lines, lines_of, verbatim
from bot.verdict.throughput import IMPLAUSIBLE

MAX_FUNCTIONS = 3  # resource summary: the first few compiled functions


def resource_line(k: KernelReport) -> str:
    """Registers, spills, shared memory and occupancy of the candidate's compiled functions, in one line."""
    check = k.resource_check
    if check is None or not check.head:
        return "no CUDA resource check (no nvcc)" if check is not None and check.status == "no_nvcc" else ""
    parts = []
    for r in check.head[:MAX_FUNCTIONS]:
        smem = r.smem_bytes + (r.dynamic_smem_bytes or 0)
        occ = f", {r.occupancy.warps_per_sm} warps/SM" if r.occupancy is not None else ""
        name = r.function.split("(", 1)[0].removeprefix("void ")  # a demangled signature: its name and template
        parts.append(f"{name}: {r.registers} regs, {r.spill_bytes} B spill, {smem:,} B smem{occ}")
    more = f" (+{len(check.head) - MAX_FUNCTIONS} more)" if len(check.head) > MAX_FUNCTIONS else ""
    return "; ".join(parts) + more


def trial_from(
    k: KernelReport,
    *,
    key: str,
    config: dict[str, Any],
    source: Source,
    patch: str,
    run_id: str,
    seconds: float,
    verify_of: str = "",
) -> Trial:
    """A trial from the review's kernel section (pure): per-case Δp50 with its CI, verdicts, resources, reasons."""
    cases = [
        CaseResult(
            name=c.name,
            # above the hardware's peak: no speed to trust, whatever the interval says (as the review fails it)
            status=IMPLAUSIBLE if any(f.key == "plausibility.over_peak" for f in c.findings) else c.status.value,
            verdict=c.verdict,
            regression_pct=c.regression_pct,
            ci95_pct=(c.ci95_pct[0], c.ci95_pct[1]) if c.ci95_pct and len(c.ci95_pct) == 2 else None,
            p50_ms=c.p50_ms,
            base_p50_ms=c.base_p50_ms,
            max_abs_err=c.max_abs_err,
            reason=next(iter(case_lines(c)), ""),
        )
        for c in k.cases
        if c.verdict != "skipped"
    ]
    # nothing failed: the tuning loop weighs each case's interval itself (tune/analysis.py)
    judged = "pass" if k.verdict in ("undecided", "needs_accept") else k.verdict
    verdict = judged if judged in ("pass", "fail") else "error"
    reasons = lines_of(k, Outcome.fail, Outcome.error) + lines_of(k, Outcome.accept) + lines_of(k, Outcome.undecided)
    if k.verdict == "skipped":
        reasons.append("the review judged no change to this kernel")
    return Trial(
        key=key,
        config=config,
        source=source,
        status="error" if verdict == "error" else "judged",
        verdict=verdict,
        cases=cases,
        reasons=reasons,
        resources=resource_line(k),
        seconds=round(seconds, 2),
        patch=patch,
        run_id=run_id,
        verify_of=verify_of,
    )


def candidate_settings(settings: Settings, *, search: bool) -> Settings:
    """A search candidate's review settings: no callgrind (it is ranked by its intervals); the winner's: as given."""
    return settings.model_copy(update={"simulate": "off"}) if search else settings


def review_candidate(
    repo: Path,
    base_sha: str,
    patch: str,
    kernel: str,
    *,
    settings: Settings,
    ledger: Ledger,
    out: Path,
    held_out: frozenset[str] = frozenset(),
    agent_cases: Sequence[ProposedCase] = (),
    agent_name: str = "",
    search: bool = False,
) -> tuple[KernelReport, float]:
    """Review base...(base + patch) for `kernel` only, offline (the candidate is the agent's; nobody asks it
    again): static checks, resources, builds, cases, gates. Every call is a new Reviewer, so a new secret seed
    and fresh worker processes. Returns the kernel's section of the report (also written into `out`).

    `search`: a candidate of the search, ranked by its intervals (tune/analysis.py), not by a second look: no case
    is counted under callgrind (issue 40, 4 — it was most of a straddling candidate's time). The winner's
    re-verification (`search=False`) is the review as a pull request gets it, callgrind where it asks for it."""
    started = time.perf_counter()
    settings = candidate_settings(settings, search=search)
    with applied(repo, base_sha, patch, kernel) as cand:
        request = ReviewRequest(
            repo=repo, base=base_sha, head=cand.sha, out=out, offline=True, only_kernel=kernel, held_out=held_out,
            agent_cases=tuple(agent_cases), agent_name=agent_name,
        )  # fmt: skip
        reviewer = Reviewer(request, settings, ledger, here(settings))
        report = reviewer.run()
        write(report, out, reviewer.unseen, ledger, settings, record=False, pr=None)
    found = next((k for k in report.kernels if k.name == kernel), None)
    if found is None:  # pragma: no cover - only_kernel reviews exactly this kernel
        unread = [verbatim("not reviewed", Gate.review, Outcome.error)]
        found = KernelReport(name=kernel, domain="unknown", changed=False, verdict="error", findings=unread)
    return found, time.perf_counter() - started
