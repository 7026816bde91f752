"""The CI summary after the gates: whether a review needs one, its facts from the report (pure), and asking for it."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import requests

from bot.agent import ci_summary as agent_summary
from bot.config.repo import CI_SUMMARY_DOMAIN
from bot.config.settings import Settings
from bot.ledger import Ledger
from bot.models.ci_summary import CaseFacts, CiSummaryFacts, KernelFacts, Number, ResourceChange
from bot.models.diff import FileChange
from bot.models.finding import Outcome
from bot.models.report import CaseReport, DiffStat, KernelReport, Report, Resource
from bot.review.coverage import unclaimed_reason
from bot.verdict.findings import case_lines, lines_of
from bot.verdict.gate_resources import match_base
from bot.wording.messages import phrase

log = logging.getLogger(__name__)

NOT_PASSING = ("fail", "error", "undecided", "needs_accept")  # a kernel verdict that asks for a summary
LOG_CHARS = 2_000  # the end of each log the facts keep (the prompt may shorten it further)
DIFF_PATHS = 20
# What a resource change is: the figures compared between base and head, per function.
RESOURCE_FIGURES = ("registers", "spill_bytes", "smem_bytes", "dynamic_smem_bytes", "stack_bytes")


def diff_stat(changes: list[FileChange]) -> DiffStat:
    """Files, lines added and removed, binary files and the first paths of a kernel's changes."""
    return DiffStat(
        files=len(changes),
        added=sum(c.added for c in changes),
        removed=sum(c.removed for c in changes),
        binary=sum(1 for c in changes if c.binary),
        paths=[c.path for c in changes[:DIFF_PATHS]],
    )


def _round(value: Any) -> Any:
    """Floats to 4 significant digits (the prompt's tokens, and a stable prompt for the same measurement)."""
    if isinstance(value, float):
        return float(f"{value:.4g}")
    if isinstance(value, list):
        return [_round(v) for v in value]
    if isinstance(value, dict):
        return {k: _round(v) for k, v in value.items()}
    return value


def _figures(r: Resource) -> dict[str, Number]:
    out: dict[str, Number] = {name: getattr(r, name) for name in RESOURCE_FIGURES if getattr(r, name) is not None}
    if r.occupancy is not None:
        out["blocks_per_sm"] = r.occupancy.blocks_per_sm
        out["occupancy_pct"] = _round(r.occupancy.occupancy_pct)
    return out


def _sides(k: KernelReport) -> tuple[list[Resource], list[Resource]]:
    check = k.resource_check
    head = (k.build.resources if k.build else []) or (check.head if check else [])
    base = (k.base_build.resources if k.base_build else []) or (check.base if check else [])
    return head, base


def resource_changes(k: KernelReport) -> list[ResourceChange]:
    """Functions whose registers, spills, shared memory, stack or occupancy differ between base and head, and
    functions only one side has; nothing when base has no resources to compare with (a new kernel)."""
    head, base = _sides(k)
    if not head or not base:
        return []
    matched = match_base(head, base)
    changes = []
    for r in head:
        b = matched.get(r.function)
        if b is None:
            changes.append(ResourceChange(function=short_function(r.function), base=None, head=_figures(r)))
        elif _figures(b) != _figures(r):
            changes.append(ResourceChange(function=short_function(r.function), base=_figures(b), head=_figures(r)))
    kept = {id(b) for b in matched.values()}
    changes += [
        ResourceChange(function=short_function(b.function), base=_figures(b), head=None)
        for b in base
        if id(b) not in kept
    ]
    return changes


def needs_ci_summary(report: Report) -> bool:
    """A changed kernel failed, erred, is undecided or needs a person's /accept, or changed a resource."""
    changed = [k for k in report.kernels if k.changed]
    return any(k.verdict in NOT_PASSING or resource_changes(k) for k in changed)


def _case(c: CaseReport) -> CaseFacts:
    numbers = {
        "max_abs_err": c.max_abs_err,
        "tolerance": c.tolerance,
        "nan_inf": c.nan_inf or None,
        "p50_ms": c.p50_ms,
        "base_p50_ms": c.base_p50_ms,
        "regression_pct": c.regression_pct,
        "ci95_pct": c.ci95_pct,
        "max_regression_pct": c.max_regression_pct,
        "attempts": c.attempts if c.attempts > 1 else None,
        "stop_reason": c.stop_reason,
        "base_drift_pct": c.base_drift_pct,
    }
    probes = [
        _round(p.model_dump(include={"name", "max_abs_err", "nan_inf", "error", "failure"}, exclude_none=True))
        for p in c.probes
        if p.verdict == "fail"
    ]
    return CaseFacts(
        name=c.name,
        device=c.device,
        status=c.status.value,
        verdict=c.verdict,
        numbers={k: _round(v) for k, v in numbers.items() if v is not None},
        failure=_round(c.failure.model_dump(exclude_none=True)) if c.failure else None,
        failed_probes=probes,
        reasons=case_lines(c),
        log_tail=c.log_tail[-LOG_CHARS:],
    )


def _logs(k: KernelReport) -> dict[str, str]:
    """The log of a build that failed, and of a ptxas check that did not pass (a good build's log is ninja's lines)."""
    logs = {}
    for label, b in (("build head", k.build), ("build base", k.base_build)):
        if b is not None and b.log_tail.strip() and not b.ok:
            logs[label] = b.log_tail[-LOG_CHARS:]
    check = k.resource_check
    if check is not None and check.status != "ok" and check.log_tail.strip():
        logs["ptxas"] = check.log_tail[-LOG_CHARS:]
    return logs


def short_function(name: str) -> str:
    """A compiled function's name without its parameter list and return type (the template arguments stay)."""
    head = name.split("(", 1)[0].strip() or name
    return head.removeprefix("void ").strip() or head


SEVERITY = {"error": 0, "fail": 1, "inconclusive": 2}  # the cases the facts list first


def _kernel(k: KernelReport, report: Report) -> KernelFacts:
    agents = [a for a in report.agents if a.kernel == k.name]
    agents = agents or [a for a in report.agents if a.kernel is None and a.domain == k.domain]
    not_run: dict[str, list[str]] = {}
    for c in k.cases:
        if c.verdict == "skipped":
            not_run.setdefault("; ".join(case_lines(c)) or "not run", []).append(c.name)
    check = k.resource_check
    quiet = [a for a in agents if a.status != "ok"]
    failing = sorted((c for c in k.cases if c.verdict not in ("pass", "skipped")), key=lambda c: SEVERITY[c.verdict])
    return KernelFacts(
        name=k.name,
        domain=k.domain,
        verdict=k.verdict,
        reasons=lines_of(k, Outcome.fail, Outcome.error),
        undecided=lines_of(k, Outcome.undecided),
        accept_needed=lines_of(k, Outcome.accept),
        notes=lines_of(k, Outcome.note),
        diff=k.diff.model_dump() if k.diff else None,
        counts={
            "passed": sum(1 for c in k.cases if c.verdict == "pass"),
            "not passing": len(failing),
            "not run": sum(1 for c in k.cases if c.verdict == "skipped"),
        },
        cases=[_case(c) for c in failing],
        passed=[c.name for c in k.cases if c.verdict == "pass"],
        not_run=not_run,
        resources=resource_changes(k),
        resource_check=check.status if check is not None and check.status != "ok" else None,
        logs=_logs(k),
        agent="; ".join(f"{a.status}: {phrase(a.reason) if a.reason else ''}" for a in quiet) or None,
        risk_notes=[n for a in agents for n in a.risk_notes],
    )


def facts(report: Report) -> CiSummaryFacts:
    """What the CI summary is told about `report`: every changed kernel, its failing and undecided cases with their
    numbers, resource changes, log tails, diff stats and its agent's risk notes (secrets are masked when sent)."""
    cov = report.coverage
    return CiSummaryFacts(
        base_sha=report.base_sha,
        head_sha=report.head_sha,
        pr=report.pr,
        verdict=report.verdict,
        error=report.error,
        kernels=[_kernel(k, report) for k in report.kernels if k.changed],
        unchanged=[k.name for k in report.kernels if not k.changed],
        coverage=unclaimed_reason(cov) if cov is not None and cov.kernel_sources.total else None,
    )


def attach(
    report: Report,
    settings: Settings,
    ledger: Ledger,
    *,
    offline: bool,
    out: Path,
    session: requests.Session | None = None,
) -> Report:
    """The report with its CI summary when the review needs one and the repository configures the domain; the
    verdicts, the status and every acceptance are the gates' alone (the summary only explains them)."""
    if CI_SUMMARY_DOMAIN not in settings.domains or not needs_ci_summary(report):
        return report
    summary = agent_summary.ask(
        facts(report), settings=settings, ledger=ledger, offline=offline, candidates_dir=out / "agent_candidates",
        session=session,
    )  # fmt: skip
    why = summary.agent.reason
    log.info("%s summary: %s %s", CI_SUMMARY_DOMAIN, summary.agent.status, phrase(why) if why is not None else "")
    return report.model_copy(update={"ci_summary": summary})
