"""`opgate check`'s flow for one kernel of the working tree: static checks, the build (cached), and the sandboxed dry
run (the reference imported, every case's inputs drawn, the smallest case run once on entry and reference, compared).

Nothing is timed; the first problem stops the kernel's check and names its file and line.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Literal

from bot.config.manifest import Case, Kernel
from bot.config.settings import Settings
from bot.edges.machine import detect
from bot.models.judging import JudgeJob, ReferenceSource
from bot.models.report import Machine
from bot.review.cases import case_job, entry_scalars
from bot.review.resource_check import flag_findings
from bot.untrusted.build import OBJ, SRC, Built, build, verify
from bot.untrusted.runner.judge import REFERENCE_LABEL
from bot.untrusted.runner.spawn import DRY_RUN, new_secret, run_cases
from bot.untrusted.sandbox import Sandbox
from bot.verdict.flags import check_defines
from bot.verdict.gate import case_verdict
from bot.verdict.occupancy import no_table
from bot.verdict.static import check_tunables

_COMPILER_ERROR = re.compile(r"^(?P<where>\S+?):(?P<line>\d+)(?::\d+)?: (?:fatal )?error: (?P<what>.*)$", re.M)


@dataclass
class KernelCheck:
    """What `opgate check` found for one kernel: the steps that passed, and the first problem."""

    name: str
    folder: str
    steps: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    problem: str | None = None
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.problem is None


def first_compile_error(log: str, kernel: Kernel) -> str | None:
    """The compiler's first error as `ops/x/muladd.cpp line 30: …` (sandbox paths back to the repository's)."""
    m = _COMPILER_ERROR.search(log)
    if m is None:
        return None
    where = m["where"]
    for prefix in (f"{SRC}/", f"{kernel.folder.resolve()}/", f"{kernel.folder}/"):
        if where.startswith(prefix):
            where = f"{kernel.path}/{where.removeprefix(prefix)}"
            break
    return f"{where} line {m['line']}: {m['what'].strip()}"


def _devices(env: Machine) -> list[Literal["cpu", "cuda"]]:
    return ["cpu", "cuda"] if env.device == "cuda" else ["cpu"]


class Checker:
    """Checks kernels on this machine (its sandbox and devices) with the given settings."""

    def __init__(self, settings: Settings) -> None:
        self.settings, self.sandbox, self.env = settings, Sandbox.detect(), detect()

    @property
    def unisolated(self) -> str | None:
        """Why nothing is sandboxed here, or None."""
        return None if self.sandbox.isolated else self.sandbox.isolation.reason

    def check(self, kernel: Kernel) -> KernelCheck:
        """Check one kernel; every problem is caught and named, nothing raises for what the kernel does."""
        started = time.perf_counter()
        result = KernelCheck(name=kernel.name, folder=kernel.path)
        try:
            _check(kernel, self.settings, self.sandbox, self.env, result)
        finally:
            result.seconds = round(time.perf_counter() - started, 2)
        return result


def _check(kernel: Kernel, settings: Settings, sandbox: Sandbox, env: Machine, result: KernelCheck) -> None:
    manifest = f"{kernel.path}/kernel.toml"
    findings = check_tunables(kernel.config, kernel.manifest.tunables, f"{kernel.path}/{kernel.manifest.config}")
    findings += check_defines(kernel.config, f"{kernel.path}/{kernel.manifest.config}") + flag_findings(kernel)
    if findings:
        result.problem = findings[0].replace("kernel.toml [build", f"{manifest} [build")
        return
    result.steps.append(f"manifest {manifest}: valid; tunables and flags allowed")
    result.skipped.extend(m for a in kernel.manifest.constraints.architectures if (m := no_table(a)) is not None)
    builds: dict[str, Built] = {}
    for device in _devices(env):
        spec = kernel.manifest.build.get(device)
        if spec is None:
            continue
        built = build(kernel.name, kernel.folder, spec, kernel.config, device, settings.build_dir, sandbox)
        if not built.ok:
            first = first_compile_error(built.log_tail, kernel)
            last = built.log_tail.strip().splitlines()[-1:] or ["no output"]
            result.problem = first or f"{manifest} [build.{device}] does not build: {last[0]}"
            return
        how = "cached" if built.cached else f"compiled {', '.join(built.compiled) or 'nothing new'}"
        result.steps.append(f"build {device}: {how} ({built.seconds:.1f} s)")
        builds[device] = built
    by_device: dict[Literal["cpu", "cuda"], list[Case]] = {}
    for case in kernel.manifest.cases:
        if case.device not in builds and case.device in _devices(env):
            result.problem = (
                f"{manifest}: case {case.name} runs on {case.device}, but there is no [build.{case.device}]"
            )
            return
        if case.device not in builds:
            result.skipped.append(f"{case.name}: not drawn or run here (needs a CUDA GPU)")
            continue
        by_device.setdefault(case.device, []).append(case)
    for dev, cases in by_device.items():
        if not _dry_run(kernel, cases, builds[dev], dev, settings, result):
            return


def _dry_run(
    kernel: Kernel, cases: list[Case], built: Built, device: str, settings: Settings, result: KernelCheck
) -> bool:
    """The sandboxed dry run of one device's cases; False after naming the problem."""
    ref = kernel.manifest.reference
    positional, keywords = entry_scalars(kernel, device)
    constraints = kernel.manifest.constraints
    job = JudgeJob(
        kernel=kernel.name,
        reference=ReferenceSource(
            path=str(kernel.folder / ref.module),
            shown=f"{kernel.path}/{ref.module}",
            inputs=ref.inputs,
            function=ref.function,
            probes=ref.probes,
        ),
        cases=[case_job(c, constraints) for c in cases],
        sides={"head": {device: str(verify(built))}},
        module=built.module,
        entry=built.entry,
        positional=positional,
        keywords=keywords,
        measure=settings.measure,
        timeout_s=settings.case_timeout_s or kernel.manifest.timeout_s,
        time=False,
        probes=False,
        noise_limit_cores=settings.noise_limit_cores,
        secret=new_secret(),
    )
    runs = run_cases(job, "sandboxed", runner=DRY_RUN)
    for case in cases:
        run = runs.get(case.name)
        if run is None:
            continue  # the dry run stopped at an earlier case's problem
        if run.failed_label == REFERENCE_LABEL or (run.status == "crashed" and not run.checks):
            result.problem = _located(run.detail, kernel)
            return False
        if run.status == "skipped":
            result.steps.append(f"{case.name}: {run.detail}")
            continue
        report = case_verdict(case, constraints, run)
        if report.verdict in ("fail", "error"):
            result.problem = f"{case.name}: {'; '.join(report.reasons)}"
            return False
        err = "?" if report.max_abs_err is None else f"{report.max_abs_err:.3g}"
        result.steps.append(
            f"{case.name} (the smallest): entry and reference agree, max_abs_err {err} ≤ {report.tolerance:g}"
        )
    return True


def _located(detail: str, kernel: Kernel) -> str:
    """A failure's text with any sandbox path turned back into the repository's."""
    return detail.replace(f"{SRC}/", f"{kernel.path}/").replace(f"{OBJ}/", "")
