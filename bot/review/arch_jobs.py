"""The GPU fan-out by architecture: which job runs a case, the jobs a kernel needs, and a kernel's parts in one.

A cuda case runs on the architecture it names (kernel.toml `arch`), else on the kernel's first architecture;
the CPU cases run in the job of the first architecture. `opgate review --arch sm_100` runs only its own
architecture's cases and reports the others as run elsewhere; `merge` takes each case from the job that ran it.
"""

from __future__ import annotations

from bot.config.manifest import Case, Kernel
from bot.models.report import VERDICT_ORDER, CaseReport, KernelReport, KernelVerdict
from bot.verdict.messages import render
from bot.verdict.occupancy import family

ELSEWHERE = " job of this review"  # "runs in the sm_100 job of this review": a case another job runs


def case_arch(case: Case, architectures: list[str]) -> str | None:
    """The architecture family whose job runs the case (sm_90); None for a CPU case."""
    return family(case.arch or architectures[0]) if case.device == "cuda" else None


def job_arches(kernel: Kernel) -> list[str]:
    """The architecture families the kernel's cases need a GPU job on, its first architecture first; [""] for a
    kernel without a CUDA build (one job, any runner)."""
    if "cuda" not in kernel.manifest.build:
        return [""]
    architectures = kernel.manifest.constraints.architectures
    found = [family(architectures[0])]
    for case in kernel.manifest.cases:
        arch = case_arch(case, architectures)
        if arch is not None and arch not in found:
            found.append(arch)
    return found


def other_job(case: Case, architectures: list[str], arch: str | None) -> str | None:
    """Why this job (`--arch arch`) leaves `case` to another one; None when it runs it (or runs everything)."""
    if not arch:
        return None
    own = case_arch(case, architectures) or family(architectures[0])
    return None if own == family(arch) else f"runs in the {own}{ELSEWHERE}"


def _elsewhere(c: CaseReport) -> bool:
    return c.verdict == "skipped" and any(r.endswith(ELSEWHERE) for r in c.reasons)


def _union(parts: list[KernelReport], field: str) -> list[str]:
    return list(dict.fromkeys(x for k in parts for x in getattr(k, field)))


def combine(parts: list[KernelReport]) -> KernelReport:
    """One kernel's report from its architecture jobs' parts (the first architecture's part first): each case
    from the job that ran it, builds and resource checks from the first part, every reason and note once, and
    the verdict folded again as kernel_verdict folds it."""
    first = parts[0]
    cases: dict[str, CaseReport] = {}
    for k in parts:
        for c in k.cases:
            if c.name not in cases or (_elsewhere(cases[c.name]) and not _elsewhere(c)):
                cases[c.name] = c
    ran = any(c.verdict != "skipped" for c in cases.values())
    findings = list({f.model_dump_json(): f for k in parts for f in k.findings}.values())
    none_ran = {render(f) for f in findings if f.key == "coverage.no_case_ran"}  # another job ran a case
    if ran:
        findings = [f for f in findings if f.key != "coverage.no_case_ran"]
    undecided = [u for u in _union(parts, "undecided") if not (ran and u in none_ran)]
    reasons, accept = _union(parts, "reasons"), _union(parts, "accept_needed")
    failing = [k.verdict for k in parts if k.verdict in ("error", "fail")]
    verdict: KernelVerdict
    if failing:
        verdict = min(failing, key=VERDICT_ORDER.index)
    elif accept:
        verdict = "needs_accept"
    elif undecided:
        verdict = "undecided"
    else:
        verdict = "pass" if any(k.verdict != "skipped" for k in parts) else "skipped"
    return first.model_copy(
        update={
            "changed": any(k.changed for k in parts),
            "verdict": verdict,
            "reasons": reasons,
            "undecided": undecided,
            "accept_needed": accept,
            "notes": _union(parts, "notes"),
            "findings": findings,
            "cases": list(cases.values()),
        }
    )
