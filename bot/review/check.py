"""`opgate check`'s flow for one kernel of the working tree: static checks, the review's compile-only resource step
for every architecture the kernel ships and the build (cached) side by side, and the sandboxed dry run (the reference
imported, every case's inputs drawn, the smallest case run once on entry and reference, compared).

Nothing is timed. Each step is one line: passed, failed (naming file and line), or not checked on this runner (no
nvcc, no GPU); a failed step stops the steps that need it, never the independent ones.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Literal

from pydantic import BaseModel, Field, computed_field

from bot.config.includes import include_dirs, include_paths
from bot.config.manifest import Kernel
from bot.config.manifest_tables import Case
from bot.config.settings import Settings
from bot.edges.machine import detect
from bot.errors import InputError
from bot.models.judging import CaseRun, JudgeJob, ReferenceSource
from bot.models.report import CompileError, Machine, ResourceCheckReport
from bot.present.progress import Steps
from bot.review.cases import case_job, entry_arguments, entry_scalars, probe_once
from bot.review.resource_check import flag_findings, resource_checks
from bot.untrusted.build import OBJ, SRC, Built, build, verify
from bot.untrusted.runner.blame import REFERENCE_LABEL
from bot.untrusted.runner.spawn import DRY_RUN, new_secret, run_cases
from bot.untrusted.sandbox import Sandbox
from bot.verdict.flags import check_defines
from bot.verdict.launch import base_name, instances
from bot.verdict.occupancy import no_table
from bot.verdict.ready import IN_A_REVIEW, dry_case, resource_failures, runner_lacks
from bot.verdict.static import check_tunables
from bot.wording.messages import phrase

NOT_CHECKED = "not checked on this runner"

# not_checked: this runner cannot (no nvcc, no GPU); incomplete: the manifest leaves it undescribed (a kernel
# function's threads per block), which the review notes without judging. Neither is "ready". note: how a review
# will treat the lines above it (it decides nothing here).
StepStatus = Literal["ok", "failed", "not_checked", "incomplete", "note"]


class CheckStep(BaseModel):
    """One step of `opgate check` for one kernel: what it checked and how that went."""

    step: str = Field(description="manifest, resources sm_90a, build cpu, cases cpu, reference, …")
    status: StepStatus
    detail: str


class KernelCheck(BaseModel):
    """What `opgate check` found for one kernel: one line per step."""

    name: str
    folder: str
    steps: list[CheckStep] = Field(default_factory=list)
    seconds: float = 0.0

    def passed(self, step: str, detail: str) -> None:
        self.steps.append(CheckStep(step=step, status="ok", detail=detail))

    def failed(self, step: str, detail: str) -> None:
        self.steps.append(CheckStep(step=step, status="failed", detail=detail))

    def unchecked(self, step: str, detail: str) -> None:
        self.steps.append(CheckStep(step=step, status="not_checked", detail=detail))

    def incomplete(self, step: str, detail: str) -> None:
        self.steps.append(CheckStep(step=step, status="incomplete", detail=detail))

    def note(self, step: str, detail: str) -> None:
        self.steps.append(CheckStep(step=step, status="note", detail=detail))

    @computed_field  # type: ignore[prop-decorator]
    @property
    def ok(self) -> bool:
        """No step failed (steps this runner could not check may remain: see `not_checked`)."""
        return self.problem is None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def problem(self) -> str | None:
        """The first failed step's line, or None."""
        return next((s.detail for s in self.steps if s.status == "failed"), None)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def not_checked(self) -> list[str]:
        """The steps left open, each with why: what this runner cannot check, what the manifest leaves undescribed."""
        return [s.detail for s in self.steps if s.status in ("not_checked", "incomplete")]


class CheckReport(BaseModel):
    """`opgate check --json`: every kernel's steps, and whether this machine sandboxes what it runs."""

    kernels: list[KernelCheck]
    seconds: float
    unsandboxed: str | None = Field(None, description="why nothing ran sandboxed here, or null")

    @computed_field  # type: ignore[prop-decorator]
    @property
    def ready(self) -> bool:
        """Every step of every kernel checked and passed: nothing left for another runner."""
        return all(k.ok and not k.not_checked for k in self.kernels)


def first_compile_error(errors: Sequence[CompileError]) -> str | None:
    """The first compile error a build or resource check read from the compiler's whole output (`Build.errors`,
    `ResourceCheckReport.errors`: repository paths, never a log tail, which warnings after the error push out) as
    `ops/x/muladd.cpp line 30: …`; None when it names none (a manifest problem, which the log words)."""
    e = next((e for e in errors if e.kind != "manifest"), None)
    if e is None:
        return None
    if e.path and e.line is not None:
        return f"{e.path} line {e.line}: {e.message}"
    return f"{e.path}: {e.message}" if e.path else e.message


def build_failure(built: Built, kernel: Kernel, device: str) -> str:
    """The failed build step's line: its first compile error, else what the log's last line says."""
    last = built.log_tail.strip().splitlines()[-1:] or ["no output"]
    manifest = f"{kernel.path}/kernel.toml"
    return first_compile_error(built.errors) or f"{manifest} [build.{device}] does not build: {last[0]}"


def _first_line(log: str) -> str:
    """A log's first line that says something (a manifest mistake, a refused source), its sandbox paths dropped."""
    for line in log.splitlines():
        text = line.strip().removeprefix("head: ")
        if text and not text.startswith("=="):
            return text
    return "no output"


def _devices(env: Machine) -> list[Literal["cpu", "cuda"]]:
    return ["cpu", "cuda"] if env.device == "cuda" else ["cpu"]


class Checker:
    """Checks kernels on this machine (its sandbox and devices) with the given settings."""

    def __init__(self, settings: Settings) -> None:
        self.settings, self.sandbox, self.env = settings, Sandbox.detect(), detect()

    @property
    def unisolated(self) -> str | None:
        """Why nothing is sandboxed here, or None."""
        why = self.sandbox.isolation.reason
        return None if self.sandbox.isolated else (phrase(why) if why is not None else "")

    def check(self, kernel: Kernel) -> KernelCheck:
        """Check one kernel; every problem is caught and named, nothing raises for what the kernel does."""
        started = time.perf_counter()
        result = KernelCheck(name=kernel.name, folder=kernel.path)
        try:
            with Steps() as steps:  # the long steps as they run (a cold build: the binding's compile), on stderr
                _check(kernel, self.settings, self.sandbox, self.env, result, steps)
        finally:
            result.seconds = round(time.perf_counter() - started, 2)
        return result


def _check(
    kernel: Kernel, settings: Settings, sandbox: Sandbox, env: Machine, result: KernelCheck, steps: Steps
) -> None:
    manifest = f"{kernel.path}/kernel.toml"
    findings = check_tunables(kernel.config, kernel.manifest.tunables, f"{kernel.path}/{kernel.manifest.config}")
    findings += check_defines(kernel.config, f"{kernel.path}/{kernel.manifest.config}") + flag_findings(kernel)
    if findings:
        result.failed("manifest", findings[0].replace("kernel.toml [build", f"{manifest} [build"))
        return
    result.passed("manifest", f"manifest {manifest}: valid; tunables and flags allowed")
    arches = kernel.manifest.constraints.architectures
    for arch in arches:
        if (missing := no_table(arch)) is not None:
            result.incomplete(f"occupancy {arch}", missing)
    probe_once(kernel.manifest.build, settings.build_dir)
    built = KernelCheck(name=kernel.name, folder=kernel.path)  # the build steps, shown after the resource steps
    with ThreadPoolExecutor(max_workers=1) as pool:  # nvcc's compiles beside the build's: both cores busy
        checks = pool.submit(resource_checks, kernel, None, arches, settings.build_dir / "resources", sandbox)
        builds = _builds(kernel, settings, sandbox, env, built, steps)
        for check in checks.result():
            resource_step(kernel, check, result)
    result.steps += built.steps
    by_device: dict[Literal["cpu", "cuda"], list[Case]] = {}
    elsewhere: list[Case] = []
    for case in kernel.manifest.cases:
        if case.device not in kernel.manifest.build:
            result.failed(
                "cases", f"{manifest}: case {case.name} runs on {case.device}, but there is no [build.{case.device}]"
            )
            return
        if case.device not in _devices(env):
            elsewhere.append(case)
        elif case.device in builds:
            by_device.setdefault(case.device, []).append(case)
    ran_reference = False
    for dev, cases in by_device.items():
        with steps.step(f"dry run {kernel.name}: {len(cases)} {dev} case(s)"):
            ran_reference |= _dry_run(kernel, cases, builds[dev], dev, settings, result)
    if elsewhere:
        names = ", ".join(c.name for c in elsewhere)
        result.unchecked("cases cuda", f"cases {names}: the entry against the reference (needs a CUDA GPU)")
    if not ran_reference and kernel.manifest.cases:
        with steps.step(f"reference {kernel.name}: {len(kernel.manifest.cases)} case(s), the reference alone"):
            _reference_only(kernel, kernel.manifest.cases, settings, result)


def _builds(
    kernel: Kernel, settings: Settings, sandbox: Sandbox, env: Machine, result: KernelCheck, steps: Steps
) -> dict[str, Built]:
    """Every build of the kernel this machine can run (cached), one step each."""
    builds: dict[str, Built] = {}
    for device in ("cpu", "cuda"):
        spec = kernel.manifest.build.get(device)
        if spec is None:
            continue
        if device not in _devices(env):
            result.unchecked(f"build {device}", f"build {device}: [build.{device}] (needs a CUDA GPU)")
            continue
        try:
            with steps.step(f"build {kernel.name} ({device})"):
                built = build(
                    kernel.name,
                    kernel.folder,
                    spec,
                    kernel.config,
                    device,
                    settings.build_dir,
                    sandbox,
                    include_paths(kernel, device),
                    (kernel.path, *include_dirs(kernel, device)),  # the errors by repository path, as the review's
                )
        except InputError as exc:
            built = Built(ok=False, device=device, key="", log_tail=str(exc))
        if not built.ok:
            result.failed(f"build {device}", build_failure(built, kernel, device))
            continue
        how = "cached" if built.cached else f"compiled {', '.join(built.compiled) or 'nothing new'}"
        result.passed(f"build {device}", f"build {device}: {how} ({built.seconds:.1f} s)")
        builds[device] = built
    return builds


def resource_step(kernel: Kernel, check: ResourceCheckReport, result: KernelCheck) -> None:
    """One architecture's compile-only resource step, judged as the review's gate judges head's figures alone."""
    step, on = f"resources {check.arch}", f"resources on {check.arch}"
    if check.status == "no_nvcc":
        result.unchecked(step, f"{on}: nvcc is not on the PATH (install the CUDA toolkit)")
        return
    if check.status == "unsupported_arch":
        result.unchecked(step, f"{on}: {check.log_tail}")
        return
    if check.status == "compile_fail" and (lacks := runner_lacks(check)) is not None:
        result.unchecked(step, f"{on}: {lacks}")  # torch's CPU build here: a runner with its CUDA build checks it
        return
    if check.status == "compile_fail":
        if (where := first_compile_error(check.errors)) is not None:
            result.failed(step, f"{on}: does not compile: {where}")
        elif check.log_tail.startswith("head: "):  # the units could not even be planned: a manifest mistake
            result.failed(step, f"{on}: {kernel.path}/kernel.toml [build.cuda]: {_first_line(check.log_tail)}")
        else:
            result.failed(step, f"{on}: does not compile: {_first_line(check.log_tail)}")
        return
    failures = [f"{on}: {f}" for f in resource_failures(check, kernel.manifest.constraints)]
    for failure in failures:
        result.failed(step, failure)
    if failures:  # once, not on every line: each line keeps its reason and fix within a line (issue 54, 3)
        result.note(step, f"{on}: {IN_A_REVIEW}")
    unknown = _without_threads(kernel, check)
    for line in unknown:
        result.incomplete(step, f"occupancy on {check.arch}: {line}")
    if not failures and not unknown:
        how = "cached" if check.cached else f"compiled in {check.seconds:.1f} s"
        n = len(check.head)
        result.passed(step, f"{on}: {n} kernel function(s) ({how}), each with its threads and dynamic shared memory")


def _without_threads(kernel: Kernel, check: ResourceCheckReport) -> list[str]:
    """One line per kernel function (all its template instantiations together) whose threads per block neither
    the code (`__launch_bounds__`) nor kernel.toml [launch] gives: the review cannot compute its occupancy."""
    by_name: dict[str, list[str]] = {}
    for r in check.head:
        if r.threads is None:
            by_name.setdefault(base_name(r.function), []).append(r.function)
    manifest = f"{kernel.path}/kernel.toml"
    return [
        f"{instances(functions)}: threads per block unknown, so the review computes no occupancy: give "
        f"__launch_bounds__ in the code or [launch.functions.{name}] threads in {manifest}"
        for name, functions in by_name.items()
    ]


def _job(
    kernel: Kernel,
    cases: list[dict[str, object]],
    sides: dict[str, dict[str, str]],
    built: Built | None,
    device: str,
    settings: Settings,
) -> JudgeJob:
    """The dry run's job: `cases` against the `sides` built (none: the reference alone)."""
    ref = kernel.manifest.reference
    positional, keywords = entry_scalars(kernel, device)
    return JudgeJob(
        kernel=kernel.name,
        reference=ReferenceSource(
            path=str(kernel.folder / ref.module),
            shown=f"{kernel.path}/{ref.module}",
            inputs=ref.inputs,
            function=ref.function,
            probes=ref.probes,
        ),
        cases=cases,
        sides=sides,
        module=built.module if built is not None else "",
        entry=built.entry if built is not None else "",
        positional=positional,
        keywords=keywords,
        arguments=entry_arguments(kernel, device),
        measure=settings.measure,
        timeout_s=settings.case_timeout_s or kernel.manifest.timeout_s,
        time=False,
        probes=False,
        noise_limit_cores=settings.noise_limit_cores,
        secret=new_secret(),
    )


def _dry_run(
    kernel: Kernel, cases: list[Case], built: Built, device: str, settings: Settings, result: KernelCheck
) -> bool:
    """The sandboxed dry run of one device's cases; True when it got as far as running the reference."""
    constraints = kernel.manifest.constraints
    jobs = [case_job(c, constraints, kernel.manifest.written(c)) for c in cases]
    job = _job(kernel, jobs, {"head": {device: str(verify(built))}}, built, device, settings)
    runs = run_cases(job, "sandboxed", runner=DRY_RUN)
    step = f"cases {device}"
    for case in cases:
        run = runs.get(case.name)
        if run is None:
            continue  # the dry run stopped at an earlier case's problem
        if run.failed_label == REFERENCE_LABEL or (run.status == "crashed" and not run.checks):
            result.failed(step, _located(_said(run), kernel))
            return run.failed_label == REFERENCE_LABEL
        if run.status == "skipped":
            result.passed(step, f"{case.name}: {_said(run)}")
            continue
        failed, line = dry_case(case, constraints, run)
        (result.failed if failed else result.passed)(step, line)
        return True
    return False


def _reference_only(kernel: Kernel, cases: list[Case], settings: Settings, result: KernelCheck) -> None:
    """No case could run its entry here: draw every case's inputs on the CPU and run the reference once on the
    smallest, so a reference that raises (`NotImplementedError`, a typo) is found before a review. The reference is
    called as the review calls it: with the scalars (`args`, `kwargs`) of the case's own build — a cuda case's from
    [build.cuda] —, one run per device the cases name."""
    constraints = kernel.manifest.constraints
    by_device: dict[str, list[Case]] = {}
    for case in cases:
        by_device.setdefault(case.device, []).append(case)
    for device, group in by_device.items():
        jobs = [case_job(c, constraints, kernel.manifest.written(c)) | {"device": "cpu"} for c in group]
        runs = run_cases(_job(kernel, jobs, {}, None, device, settings), "sandboxed", runner=DRY_RUN)
        on_cpu = " (on the CPU: this runner has no GPU)" if device == "cuda" else ""
        for case in group:
            run: CaseRun | None = runs.get(case.name)
            if run is None:
                continue
            if run.status != "skipped":
                result.failed("reference", _located(_said(run), kernel) + on_cpu)
                return
            if run.detail is not None and run.detail.key == "dry.reference_ran":
                result.passed("reference", f"{case.name} (the smallest): {_said(run)}{on_cpu}")
                break


def _said(run: CaseRun) -> str:
    """What the dry run said of a case, in English (opgate check's lines)."""
    return phrase(run.detail) if run.detail is not None else ""


def _located(detail: str, kernel: Kernel) -> str:
    """A failure's text with any sandbox path turned back into the repository's."""
    return detail.replace(f"{SRC}/", f"{kernel.path}/").replace(f"{OBJ}/", "")
