"""The GPU fan-out by architecture: which job runs a case and the jobs a kernel needs.

A cuda case runs on the architecture it names (kernel.toml `arch`), else on the kernel's first architecture;
the CPU cases run in the job of the first architecture. `opgate review --arch sm_100` runs only its own
architecture's cases and reports the others as run elsewhere; the merge takes each case from the job that ran it
(`bot.verdict.folds.combine`).
"""

from __future__ import annotations

from bot.config.manifest import Kernel
from bot.config.manifest_tables import Case
from bot.verdict.occupancy import family


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
    """The architecture family whose job runs `case` when this job (`--arch arch`) leaves it to another one (the
    gate says so: "runs in the sm_100 job of this review"); None when it runs it (or runs everything)."""
    if not arch:
        return None
    own = case_arch(case, architectures) or family(architectures[0])
    return None if own == family(arch) else own
