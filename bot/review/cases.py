"""One changed kernel's builds and cases: both sides built in the sandbox, the runnable cases run by the judge (one
sequential measurement each, docs/review.md), base's latency kept as a baseline."""

from __future__ import annotations

import hashlib
import json
from typing import Any, Literal

from bot.config.includes import include_dirs, include_paths
from bot.config.manifest import Case, Constraints, Kernel
from bot.config.settings import Settings
from bot.edges.machine import cpu_name, device_key, driver_version
from bot.edges.peak import cpu_peak
from bot.errors import BuildError, InputError
from bot.ledger import Ledger
from bot.models.judging import CaseRun, JudgeJob, ReferenceSource, SideEntry
from bot.models.ledger import BaselineRow
from bot.models.report import Build, CaseReport, CaseStatus, Machine
from bot.present.progress import Steps
from bot.review.arch_jobs import other_job
from bot.text.redact import scrub
from bot.untrusted.build import Built, build, verify
from bot.untrusted.runner.cost import run_costs
from bot.untrusted.runner.spawn import run_cases
from bot.untrusted.sandbox import Sandbox
from bot.verdict.compile_errors import manifest_error, new_errors
from bot.verdict.gate import BASE, HEAD, case_verdict, simulated_verdict
from bot.verdict.occupancy import family
from bot.verdict.throughput import Peak, device_peak, judge_throughput, over_peak, throughput

Builds = dict[str, dict[str, Built]]  # side (base/head) -> device -> its build


def to_build(b: Built) -> Build:
    return Build(
        ok=b.ok, seconds=round(b.seconds, 2), cached=b.cached, device=b.device, key=b.key[:16], log_tail=b.log_tail,
        errors=b.errors,
    )  # fmt: skip


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
        self, rules: Kernel, builds: Builds, *, trusted_reference: bool, held_out: frozenset[str] = frozenset()
    ) -> list[CaseReport]:
        """Every case of `rules` (the manifest the change is held to): the runnable ones go to one judge run per
        device; the rest are reported as skipped (`held_out` ones too), or failed when head does not build."""
        constraints = rules.manifest.constraints
        reports: dict[str, CaseReport] = {}
        runnable: dict[str, list[Case]] = {}
        for case in rules.manifest.cases:
            head_b = builds[HEAD].get(case.device)
            if case.name in held_out:
                reports[case.name] = case_verdict(
                    case, constraints, None, "held out of the tuning search (its re-verification runs it)"
                )
            elif (elsewhere := other_job(case, rules.manifest.constraints.architectures, self.arch)) is not None:
                reports[case.name] = case_verdict(case, constraints, None, elsewhere)
            elif case.device == "cuda" and (why := self._wrong_gpu(case)) is not None:
                reports[case.name] = case_verdict(case, constraints, None, why)
            elif case.device == "cuda" and self.env.device != "cuda":
                reports[case.name] = case_verdict(case, constraints, None, "needs a CUDA GPU; this machine has none")
            elif head_b is None:
                reports[case.name] = case_verdict(case, constraints, None, f"kernel.toml has no {case.device} build")
            elif not head_b.ok and shared_failure(head_b, builds[BASE].get(case.device)):
                reports[case.name] = case_verdict(case, constraints, None, "base and head fail to build alike")
            elif not head_b.ok:
                report = case_verdict(case, constraints, None, "")
                report.status, report.verdict, report.reasons = CaseStatus.compile_fail, "fail", ["head does not build"]
                reports[case.name] = report
            else:
                runnable.setdefault(case.device, []).append(case)
        for device, cases in runnable.items():
            reports.update(self._measure(rules, cases, builds, device, trusted_reference))
        for case in rules.manifest.cases:
            self._throughput(case, reports[case.name])
        return [reports[case.name] for case in rules.manifest.cases]

    def _wrong_gpu(self, case: Case) -> str | None:
        """Why this runner's GPU is not the architecture the case names (sm_100a on an H100), else None."""
        if case.arch is None or self.env.device != "cuda" or self.env.arch is None:
            return None
        if family(case.arch) == self.env.arch:
            return None
        return f"runs on {case.arch}; this runner's GPU is {self.env.arch} ({self.env.gpu})"

    def _throughput(self, case: Case, report: CaseReport) -> None:
        """Achieved rates and peak share from the case's declared work; above the peak it fails as implausible.
        A CPU runner's own measured peak is measured again, longer, before a case is failed against it."""
        if report.device == "cuda" and report.status != CaseStatus.skipped:
            report.arch, report.gpu = self.env.arch, self.env.gpu
        flops, nbytes = case.work()
        if (flops is None and nbytes is None) or report.p50_ms is None:
            return
        peak = self._peak(case.device)
        if case.device == "cpu" and peak is not None:
            t = throughput(flops, nbytes, report, peak)
            if t is not None and over_peak(t, "head"):
                peak = self._peak(case.device, refresh=True)
        judge_throughput(report, flops, nbytes, peak)

    def _peak(self, device: str, *, refresh: bool = False) -> Peak | None:
        if device == "cuda":
            return device_peak(self.env.gpu)
        return cpu_peak(self.settings.build_dir / "peak", refresh=refresh)

    def _measure(
        self, rules: Kernel, cases: list[Case], builds: Builds, device: str, trusted: bool
    ) -> dict[str, CaseReport]:
        """Run `cases` in the judge: each is measured until its sequential rule stops (never measured again: a second
        measurement judged on its own would double the error rate the interval claims)."""
        constraints = rules.manifest.constraints
        head_b, base_b = builds[HEAD][device], builds[BASE].get(device)
        # The same build key is the same binary: its latency cannot differ, so it is not timed again.
        identical = base_b is not None and base_b.ok and base_b.key == head_b.key
        sides = {HEAD: head_b} if identical or base_b is None or not base_b.ok else {BASE: base_b, HEAD: head_b}
        try:
            so = {label: {device: str(verify(b))} for label, b in sides.items()}
        except BuildError as exc:
            return {c.name: _refused(c, constraints, str(exc)) for c in cases}
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
        by_name = {c.name: c for c in cases}
        secrets = self.settings.secrets()
        with self.steps.step(f"run {rules.name}: {len(cases)} {device} case(s)"):
            jobs = [case_job(c, constraints, rules.manifest.written(c)) for c in cases]
            runs = run_cases(job.model_copy(update={"cases": jobs}), launch)
        reports = {name: _judged(by_name[name], constraints, runs.get(name), secrets) for name in by_name}
        if device == "cpu" and BASE in sides and self.settings.simulate != "off":
            self._simulate(rules, job, reports, launch)
        for name, result in reports.items():
            if identical:
                result.stop_reason = "identical_build"
            elif base_b is not None and result.base_p50_ms is not None:
                self._baseline(rules, by_name[name], base_b, result)  # the measurement the report shows
        return reports

    def _simulate(
        self, rules: Kernel, job: JudgeJob, reports: dict[str, CaseReport], launch: Literal["plain", "sandboxed"]
    ) -> None:
        """The CPU cases whose p50 stays undecided (every timed one: `always`) under callgrind: counted, not timed."""
        constraints = rules.manifest.constraints
        by_name = {c.name: c for c in rules.manifest.cases}
        wanted = [
            name
            for name, r in reports.items()
            if r.regression_pct is not None and (r.verdict == "inconclusive" or self.settings.simulate == "always")
        ]
        if not wanted:
            return
        with self.steps.step(f"simulate {rules.name}: {', '.join(wanted)} under callgrind"):
            cases = [case_job(by_name[name], constraints, rules.manifest.written(by_name[name])) for name in wanted]
            costs = run_costs(job.model_copy(update={"cases": cases, "probes": False}), launch)
        for name in wanted:
            simulated_verdict(reports[name], costs[name], constraints.max_regression_pct)

    def _baseline(self, rules: Kernel, case: Case, base_b: Built, result: CaseReport) -> None:
        """Keep the base latency by (base SHA, build, case, device model and architecture, torch, driver); compare
        with the first one.

        Interleaving decides the verdict; the stored baseline only shows when a runner drifts.
        """
        gpu = case.device == "cuda" and self.env.gpu
        device = device_key(self.env.gpu, self.env.arch) if gpu else cpu_name()  # model and architecture, never mixed
        parts = [self.base_sha, base_b.key, rules.name, case.name, device, self.env.torch, driver_version()]
        key = hashlib.sha256(json.dumps(parts).encode()).hexdigest()
        assert result.base_p50_ms is not None
        prior = self.ledger.baseline(key)
        if prior is not None:
            result.base_drift_pct = round((result.base_p50_ms / prior.p50_ms - 1.0) * 100.0, 2)
        self.ledger.record_baseline(
            BaselineRow(
                cache_key=key,
                base_sha=self.base_sha,
                kernel=rules.name,
                case_name=case.name,
                device_name=device,
                p50_ms=result.base_p50_ms,
                samples=result.base_samples,
            )
        )


def agent_rules(rules: Kernel, cases: list[Case]) -> Kernel:
    """`rules` with the agent's admitted cases in place of the manifest's (its reference, builds, constraints and
    buffers unchanged): `KernelCases.run` judges them after the manifest's, the same way, on both sides."""
    return rules.model_copy(update={"manifest": rules.manifest.model_copy(update={"cases": cases})})


def shared_failure(head: Built, base: Built | None) -> bool:
    """Head's build fails with first errors base's failed build has too (the runner's or the manifest's)."""
    return base is not None and not base.ok and bool(head.errors) and not new_errors(head.errors, base.errors)


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


def _judged(case: Case, constraints: Constraints, run: CaseRun | None, secrets: list[str]) -> CaseReport:
    """The gate's verdict on one run, keeping the workers' last output (secrets masked) when a side crashed or hung."""
    report = case_verdict(case, constraints, run)
    if run is not None and run.output_tail:
        report.log_tail = scrub(run.output_tail, secrets)
    return report


def _refused(case: Case, constraints: Constraints, why: str) -> CaseReport:
    report = case_verdict(case, constraints, None, "")
    report.status, report.verdict, report.reasons = CaseStatus.crashed, "error", [f"artifact refused: {why}"]
    return report
