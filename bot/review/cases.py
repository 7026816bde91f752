"""One changed kernel's builds and cases as evidence: both sides built in the sandbox, the runnable cases run by the
judge (one sequential measurement each, docs/review.md), the others recorded as not run and why, base's latency kept
as a baseline. The gate (`bot/verdict/kernel.py`) decides; nothing here sets a verdict."""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Container
from pathlib import Path
from typing import Any, Literal

from bot.config.includes import include_dirs, include_paths
from bot.config.manifest import Kernel
from bot.config.manifest_tables import Case, Constraints
from bot.config.settings import Settings
from bot.edges.machine import cpu_name, device_key, driver_version
from bot.edges.peak import cpu_peak
from bot.errors import BuildError, InputError
from bot.ledger import Ledger
from bot.models.evidence import CaseEvidence, KernelEvidence, NotRun
from bot.models.judging import JudgeJob, ReferenceSource, SideEntry
from bot.models.ledger import BaselineRow
from bot.models.report import Build, KernelReport, Machine
from bot.present.progress import Steps
from bot.review.arch_jobs import other_job
from bot.text.redact import scrub
from bot.untrusted.build import Built, build, same_binary, verify
from bot.untrusted.runner.cost import run_costs
from bot.untrusted.runner.spawn import run_cases
from bot.untrusted.sandbox import Sandbox
from bot.untrusted.toolchain import toolchain
from bot.verdict.compile_errors import manifest_error
from bot.verdict.findings import BASE, HEAD
from bot.verdict.kernel import second_looks
from bot.verdict.occupancy import family

Builds = dict[str, dict[str, Built]]  # side (base/head) -> device -> its build


def to_build(b: Built) -> Build:
    return Build(
        ok=b.ok, seconds=round(b.seconds, 2), cached=b.cached, device=b.device, key=b.key[:16], log_tail=b.log_tail,
        errors=b.errors,
    )  # fmt: skip


def probe_once(devices: Container[str], build_dir: Path) -> None:
    """The toolchain probed before the resource check and the builds start side by side (both read it): one probe
    answers both devices (bot/untrusted/toolchain.py), never two at once. A toolchain that cannot be probed is left
    to each step, which names it."""
    with contextlib.suppress(BuildError):
        toolchain("cpu" if "cpu" in devices else "cuda", build_dir / "toolchain")


class KernelCases:
    """Builds and runs one kernel's cases for a review (its settings, sandbox, secret and ledger)."""

    def __init__(
        self,
        settings: Settings,
        env: Machine,
        ledger: Ledger,
        sandbox: Sandbox,
        steps: Steps,
        *,
        secret: str,
        base_sha: str,
        arch: str | None = None,
    ) -> None:
        self.settings, self.env, self.ledger, self.sandbox, self.steps = settings, env, ledger, sandbox, steps
        self.secret, self.base_sha = secret, base_sha
        self.arch = arch  # --arch: run only the cases of this architecture (one job of the fan-out)
        self._baseline_keys: dict[str, str] = {}  # case -> its baseline's ledger key (base timed)

    def build(self, head_k: Kernel, base_k: Kernel | None) -> Builds:
        """Head (and base) builds for every device this machine can run."""
        devices: list[Literal["cpu", "cuda"]] = ["cpu", "cuda"] if self.env.device == "cuda" else ["cpu"]
        out: Builds = {HEAD: {}, BASE: {}}
        for label, k in ((BASE, base_k), (HEAD, head_k)):
            if k is None:
                continue
            for device in devices:
                spec = k.manifest.build.get(device)
                if spec is not None:
                    with self.steps.step(f"build {k.name} {label} ({device})"):
                        try:
                            includes = include_paths(k, device)
                        except InputError as exc:
                            error = manifest_error(str(exc))
                            out[label][device] = Built(
                                ok=False, device=device, key="", log_tail=str(exc), errors=[error]
                            )
                            continue
                        names = (k.path, *include_dirs(k, device))
                        out[label][device] = build(
                            k.name, k.folder, spec, k.config, device, self.settings.build_dir, self.sandbox, includes,
                            names,
                        )  # fmt: skip
        return out

    def run(
        self,
        rules: Kernel,
        builds: Builds,
        evidence: KernelEvidence,
        *,
        trusted_reference: bool,
        held_out: frozenset[str] = frozenset(),
        looks: bool = True,
    ) -> None:
        """Every case of `rules` (the manifest the change is held to) into `evidence`: the runnable ones go to one
        judge run per device, the rest are recorded as not run and why (`held_out` ones too); then, unless `looks` is
        off, the second looks the gate asks for (callgrind, the CPU peak measured again). Nothing here decides."""
        by_name: dict[str, CaseEvidence] = {}
        runnable: dict[str, list[Case]] = {}
        for case in rules.manifest.cases:
            head_b = builds[HEAD].get(case.device)
            why: tuple[NotRun, str] | None = None
            if case.name in held_out:
                why = NotRun.held_out, ""
            elif (elsewhere := other_job(case, rules.manifest.constraints.architectures, self.arch)) is not None:
                why = NotRun.other_job, elsewhere
            elif case.device == "cuda" and self._wrong_gpu(case):
                why = NotRun.wrong_gpu, ""
            elif case.device == "cuda" and self.env.device != "cuda":
                why = NotRun.no_gpu, ""
            elif head_b is None:
                why = NotRun.no_build, ""
            elif not head_b.ok:
                why = NotRun.head_build_failed, ""
            if why is not None:
                by_name[case.name] = CaseEvidence(name=case.name, not_run=why[0], detail=why[1])
            else:
                runnable.setdefault(case.device, []).append(case)
        jobs: dict[str, JudgeJob] = {}
        for device, cases in runnable.items():
            measured, job = self._measure(rules, cases, builds, device, trusted_reference)
            by_name.update(measured)
            if job is not None:
                jobs[device] = job
        evidence.cases = [by_name[case.name] for case in rules.manifest.cases]
        if any(_timed_work(case, by_name[case.name]) for case in rules.manifest.cases if case.device == "cpu"):
            evidence.cpu_peak = cpu_peak(self.settings.build_dir / "peak")
        if not looks:  # agent cases: their latency is reported, never gated, so no second look is bought for it
            return
        second = second_looks(evidence, rules, self.settings.simulate)
        if second.simulate and "cpu" in jobs:
            self._simulate(rules, jobs["cpu"], evidence, second.simulate, "plain" if trusted_reference else "sandboxed")
        if second.refresh_cpu_peak:  # a case above the measured peak: measured again, longer, before it may fail
            evidence.cpu_peak = cpu_peak(self.settings.build_dir / "peak", refresh=True)

    def record_baselines(self, rules: Kernel, report: KernelReport) -> None:
        """Keep each timed case's base latency by (base SHA, build, case, device model and architecture, torch,
        driver): the first one kept is what later reviews compare base with (runner drift, never the verdict)."""
        for c in report.cases:
            key = self._baseline_keys.get(c.name)
            if key is None or c.base_p50_ms is None or c.stop_reason == "identical_build":
                continue
            self.ledger.record_baseline(
                BaselineRow(
                    cache_key=key,
                    base_sha=self.base_sha,
                    kernel=rules.name,
                    case_name=c.name,
                    device_name=self._device_name(c.device),
                    p50_ms=c.base_p50_ms,
                    samples=c.base_samples,
                )
            )

    def _wrong_gpu(self, case: Case) -> bool:
        """This runner's GPU is not the architecture the case names (sm_100a on an H100)."""
        if case.arch is None or self.env.device != "cuda" or self.env.arch is None:
            return False
        return family(case.arch) != self.env.arch

    def _measure(
        self, rules: Kernel, cases: list[Case], builds: Builds, device: str, trusted: bool
    ) -> tuple[dict[str, CaseEvidence], JudgeJob | None]:
        """Run `cases` in the judge: each is measured until its sequential rule stops (never measured again: a second
        measurement judged on its own would double the error rate the interval claims). Also the job (for a second
        look under callgrind) and, for each case whose base is timed, the ledger's first base latency of it."""
        constraints = rules.manifest.constraints
        head_b, base_b = builds[HEAD][device], builds[BASE].get(device)
        # The same binary (the same build key, or the same ext.so bytes: a comment-only change): its latency cannot
        # differ, so it is checked but not timed again (nor counted under callgrind: nothing straddles).
        identical = base_b is not None and same_binary(base_b, head_b)
        sides = {HEAD: head_b} if identical or base_b is None or not base_b.ok else {BASE: base_b, HEAD: head_b}
        try:
            so = {label: {device: str(verify(b))} for label, b in sides.items()}
        except BuildError as exc:
            refused = NotRun.artifact_refused
            return {c.name: CaseEvidence(name=c.name, not_run=refused, detail=str(exc)) for c in cases}, None
        job = JudgeJob(
            kernel=rules.name,
            reference=ReferenceSource(
                path=str(rules.folder / rules.manifest.reference.module),
                shown=f"{rules.path}/{rules.manifest.reference.module}",
                inputs=rules.manifest.reference.inputs,
                function=rules.manifest.reference.function,
                probes=rules.manifest.reference.probes,
            ),
            cases=[],
            sides=so,
            module=head_b.module,
            entry=head_b.entry,
            entries=side_entries(
                {label: b for label, b in ((HEAD, head_b), (BASE, base_b)) if b is not None and label in so}
            ),
            positional=entry_scalars(rules, device)[0],
            keywords=entry_scalars(rules, device)[1],
            arguments=entry_arguments(rules, device),
            measure=self.settings.measure,
            timeout_s=self.settings.case_timeout_s or rules.manifest.timeout_s,
            time=not identical,
            noise_limit_cores=self.settings.noise_limit_cores,
            secret=self.secret,
        )
        launch: Literal["plain", "sandboxed"] = "plain" if trusted else "sandboxed"
        secrets = self.settings.secrets()
        with self.steps.step(f"run {rules.name}: {len(cases)} {device} case(s)"):
            jobs = [case_job(c, constraints, rules.manifest.written(c)) for c in cases]
            runs = run_cases(job.model_copy(update={"cases": jobs}), launch)
        out: dict[str, CaseEvidence] = {}
        for case in cases:
            run = runs.get(case.name)
            ce = CaseEvidence(name=case.name, run=run, identical_build=identical)
            if run is not None and run.output_tail:
                ce.log_tail = scrub(run.output_tail, secrets)
            if not identical and base_b is not None and BASE in sides:
                ce.prior_base_p50_ms = self._prior_baseline(rules, case, base_b)
            out[case.name] = ce
        return out, job

    def _simulate(
        self,
        rules: Kernel,
        job: JudgeJob,
        evidence: KernelEvidence,
        wanted: list[str],
        launch: Literal["plain", "sandboxed"],
    ) -> None:
        """The CPU cases the gate asks a second look at (`second_looks`) under callgrind: counted, not timed."""
        constraints = rules.manifest.constraints
        by_name = {c.name: c for c in rules.manifest.cases}
        with self.steps.step(f"simulate {rules.name}: {', '.join(wanted)} under callgrind"):
            cases = [case_job(by_name[name], constraints, rules.manifest.written(by_name[name])) for name in wanted]
            costs = run_costs(job.model_copy(update={"cases": cases, "probes": False}), launch)
        for name in wanted:
            ce = evidence.case(name)
            if ce is not None:
                ce.simulated = costs[name]

    def _device_name(self, device: str) -> str:
        gpu = device == "cuda" and self.env.gpu
        return device_key(self.env.gpu, self.env.arch) if gpu else cpu_name()  # model and architecture, never mixed

    def _prior_baseline(self, rules: Kernel, case: Case, base_b: Built) -> float | None:
        """The first base latency the ledger kept of this base binary, case and device (None: this is the first).

        Interleaving decides the verdict; the stored baseline only shows when a runner drifts.
        """
        parts = [self.base_sha, base_b.key, rules.name, case.name, self._device_name(case.device), self.env.torch]
        key = hashlib.sha256(json.dumps([*parts, driver_version()]).encode()).hexdigest()
        self._baseline_keys[case.name] = key
        prior = self.ledger.baseline(key)
        return prior.p50_ms if prior is not None else None


def _timed_work(case: Case, ce: CaseEvidence) -> bool:
    """The judge timed head on a case that declares its work: its rate needs the device's peak."""
    flops, nbytes = case.work()
    return (flops is not None or nbytes is not None) and ce.run is not None and HEAD in ce.run.timings


def agent_rules(rules: Kernel, cases: list[Case]) -> Kernel:
    """`rules` with the agent's admitted cases in place of the manifest's (its reference, builds, constraints and
    buffers unchanged): `KernelCases.run` judges them after the manifest's, the same way, on both sides."""
    return rules.model_copy(update={"manifest": rules.manifest.model_copy(update={"cases": cases})})


def side_entries(builds: dict[str, Built]) -> dict[str, SideEntry]:
    """Each side's module and entry from its own build: base's worker never runs the function head's manifest names."""
    return {label: SideEntry(module=b.module, entry=b.entry) for label, b in builds.items()}


def entry_arguments(rules: Kernel, device: str) -> list[str]:
    """The entry's positional arguments in order when it writes into some (base's manifest: the contract), else []."""
    spec = rules.manifest.build.get(device)  # type: ignore[call-overload]
    return list(spec.arguments) if spec is not None else []


def entry_scalars(rules: Kernel, device: str) -> tuple[list[str], list[str]]:
    """The case params the entry takes after its tensors, as base's manifest (the contract) says."""
    spec = rules.manifest.build.get(device)  # type: ignore[call-overload]
    return (list(spec.args), list(spec.kwargs)) if spec is not None else ([], [])


def case_job(case: Case, constraints: Constraints, buffers: list[dict[str, Any]] | None = None) -> dict[str, object]:
    """The case as the judge reads it: its limits resolved and, for an entry that writes into its arguments, the
    buffers to allocate (name, role, shape, dtype: `KernelManifest.written`)."""
    limits = case.limits(constraints)
    return {
        **case.model_dump(),
        "buffers": buffers or [],
        "tolerance": limits.max_abs_err,
        "limits": limits.model_dump(),
        "max_regression_pct": constraints.max_regression_pct,
    }
