"""`opgate review`: the flow of one review, from two revisions to report.json and comment.md."""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

import requests

from bot import __version__, gitio
from bot.agent.run import AgentFailed, ask
from bot.build import Built, build, defines, verify
from bot.candidates import CandidateError, applied
from bot.changes import FileChange, parse_diff, touching
from bot.config import RepoConfig
from bot.coverage import coverage, unclaimed_reason, with_coverage
from bot.environment import cpu_name, detect, driver_version
from bot.errors import BuildError, InputError
from bot.flags import check_defines, check_flags
from bot.gate import BASE, HEAD, Policy, judge_case, judge_kernel, overall
from bot.health import snapshot
from bot.launch import describe_kernel
from bot.ledger import BaselineRow, Ledger
from bot.manifest import MANIFEST_NAME, Case, Constraints, Kernel, find_manifests, load_kernel
from bot.progress import Steps
from bot.render import render_comment
from bot.report import (
    AgentReport,
    Build,
    CaseReport,
    CaseStatus,
    Coverage,
    Environment,
    KernelReport,
    Report,
    ResourceCheckReport,
)
from bot.resources import ResourceCheck, compile_resources
from bot.runner import CaseRun, JudgeJob, Measure, ReferenceSource, new_secret, run_cases
from bot.sandbox import Sandbox
from bot.settings import Settings
from bot.static import check_tunables

log = logging.getLogger(__name__)

RUNNER_DRIFT_PCT = 5.0  # base latency this far from its first measurement is worth a note
ARCH_FLAGS = ("-arch", "--gpu-architecture", "-gencode", "--generate-code", "-code", "--gpu-code")


@dataclass(frozen=True)
class ReviewRequest:
    repo: Path
    base: str
    head: str
    out: Path
    offline: bool = False
    pr: int | None = None
    only_kernel: str | None = None
    try_candidates: bool = False
    require_isolation: bool = False
    agent_only: bool = False  # ask the agent and stop: nothing is built or run (CI's agent job)


@dataclass
class ReviewOutcome:
    report: Report
    comment: str
    report_path: Path
    comment_path: Path
    service_errors: list[str] = field(default_factory=list)
    phases: dict[str, float] = field(default_factory=dict)

    @property
    def exit_code(self) -> int:
        if self.report.verdict != "pass":
            return 1
        return 3 if self.service_errors else 0


@dataclass
class _Side:
    """One revision checked out: its kernels, or the error that stopped a kernel loading."""

    sha: str
    tree: Path
    kernels: dict[str, Kernel] = field(default_factory=dict)
    broken: dict[str, str] = field(default_factory=dict)
    folders: dict[str, str] = field(default_factory=dict)  # kernel -> its folder from the repository root


def _load_side(sha: str, tree: Path, config: RepoConfig) -> _Side:
    """The kernels the configuration's manifest globs find in one checkout (its own manifests, base's config)."""
    side = _Side(sha=sha, tree=tree)
    for name, folder in find_manifests(tree, config.manifests).items():
        side.folders[name] = folder
        try:
            side.kernels[name] = load_kernel(tree / folder, config=config, path=folder)
        except InputError as exc:
            side.broken[name] = str(exc).replace(str(tree) + "/", "")
    return side


@contextlib.contextmanager
def _checkouts(repo: Path, base: str, head: str, config: RepoConfig) -> Iterator[tuple[_Side, _Side]]:
    with gitio.worktree(repo, base) as base_tree, gitio.worktree(repo, head) as head_tree:
        yield _load_side(base, base_tree, config), _load_side(head, head_tree, config)


def folder_of(name: str, base: _Side, head: _Side) -> str:
    return head.folders.get(name) or base.folders[name]


def _all_globs(names: list[str], base: _Side, head: _Side) -> list[str]:
    """Every kernel's globs, as review_kernel takes them (a kernel without a loadable manifest: its folder)."""
    globs = []
    for name in names:
        known = [k.manifest.globs for k in (head.kernels.get(name), base.kernels.get(name)) if k is not None]
        globs += [g for gs in known for g in gs] or [f"{folder_of(name, base, head)}/**"]
    return globs


def no_manifest(config: RepoConfig) -> InputError:
    globs = ", ".join(config.manifests)
    return InputError(
        f"no kernel manifest found: {globs} match no kernel.toml in base or head; set manifests in "
        f"{config.where()} to where your kernels are (opgate init writes one)"
    )


def _to_build(b: Built) -> Build:
    return Build(
        ok=b.ok, seconds=round(b.seconds, 2), cached=b.cached, device=b.device, key=b.key[:16], log_tail=b.log_tail
    )


class Reviewer:
    """Holds what one review needs; `run` walks every kernel through the gates."""

    def __init__(
        self, request: ReviewRequest, settings: Settings, ledger: Ledger, session: requests.Session | None = None
    ) -> None:
        self.request = request
        self.settings = settings
        self.ledger = ledger
        self.session = session
        self.env: Environment = detect()
        if not request.agent_only and (missing := _missing_runner()):
            raise InputError(
                f"opgate review builds and runs kernels, which needs {missing}: pip install 'opgate[runner]' "
                "(or use --plan, --agent-only or --merge, which do not)"
            )
        self.sandbox = Sandbox.detect()
        if (request.require_isolation or settings.require_isolation) and not self.sandbox.isolated:
            raise InputError(f"--require-isolation: {self.sandbox.isolation.reason}")
        self.secret = new_secret()
        self.health = snapshot()
        self.policy = Policy(inconclusive=settings.inconclusive_policy)
        self.phases: dict[str, float] = {}
        self.steps = Steps()
        self.repo = request.repo
        self.base_sha = ""
        self.head_sha = ""
        self.agents: list[AgentReport] = []
        self.unseen: list[str] = []
        self.service_errors: list[str] = []
        self.coverage: Coverage | None = None

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Accumulate wall time per phase (benchmarks/overhead.py prints them)."""
        started = time.perf_counter()
        try:
            yield
        finally:
            self.phases[name] = self.phases.get(name, 0.0) + time.perf_counter() - started

    def run(self) -> ReviewOutcome:
        req = self.request
        with self.phase("git"):
            repo = self.repo = gitio.toplevel(req.repo)
            base_sha, head_sha = gitio.resolve(repo, req.base), gitio.resolve(repo, req.head)
            self.base_sha, self.head_sha = base_sha, head_sha
            changes = parse_diff(gitio.diff(repo, base_sha, head_sha))
        kernels: list[KernelReport] = []
        with contextlib.ExitStack() as stack:
            stack.enter_context(self.steps)
            config = self.settings.repo_config
            with self.phase("checkout"):
                base, head = stack.enter_context(_checkouts(repo, base_sha, head_sha, config))
            names = sorted(set(base.folders) | set(head.folders))
            if not names:
                raise no_manifest(config)
            with self.phase("git"):
                globs = _all_globs(names, base, head)
                self.coverage = coverage(changes, globs, gitio.sizes(repo, head_sha), ignore=config.ignore)
            if self.coverage.kernel_sources.total:
                log.warning("%s", unclaimed_reason(self.coverage))
            if req.only_kernel is not None:
                if req.only_kernel not in names:
                    raise InputError(f"--kernel {req.only_kernel}: no such kernel (have: {', '.join(names)})")
                names = [req.only_kernel]
            for name in names:
                kernels.append(self.review_kernel(name, base, head, changes))
            with self.phase("checkout"):
                stack.close()  # remove the worktrees
        report = Report(
            base_sha=base_sha,
            head_sha=head_sha,
            pr=req.pr,
            verdict=with_coverage(overall(kernels), self.coverage),
            kernels=kernels,
            agents=self.agents,
            agent=aggregate_agents(self.agents),
            environment=self.env,
            isolation=self.sandbox.isolation,
            health=self.health,
            created_at=datetime.now(UTC).isoformat(timespec="seconds"),
            opgate_version=__version__,
            coverage=self.coverage,
        )
        with self.phase("report"):
            return self.write(report)

    def write(self, report: Report) -> ReviewOutcome:
        out = self.request.out
        out.mkdir(parents=True, exist_ok=True)
        comment = render_comment(report, unseen_files=self.unseen)
        report_path, comment_path = out / "report.json", out / "comment.md"
        report_path.write_text(report.to_json())
        comment_path.write_text(comment)
        if self.request.only_kernel is None and not self.request.agent_only:  # parts are recorded when merged
            self.ledger.record_review(report)
        return ReviewOutcome(report, comment, report_path, comment_path, self.service_errors, self.phases)

    # -- one kernel ---------------------------------------------------------------------------

    def review_kernel(
        self, name: str, base: _Side, head: _Side, changes: list[FileChange], *, candidate_pass: bool = False
    ) -> KernelReport:
        head_k, base_k = head.kernels.get(name), base.kernels.get(name)
        globs = [g for k in (head_k, base_k) if k for g in k.manifest.globs] or [f"{folder_of(name, base, head)}/**"]
        touched = touching(changes, globs)
        known = head_k or base_k
        domain = known.manifest.domain if known else "unknown"
        report = KernelReport(name=name, domain=domain, changed=bool(touched), verdict="skipped")
        if name in head.broken:
            report.verdict = "fail"
            report.reasons.append(f"invalid kernel definition: {head.broken[name]}")
            return report
        if head_k is None:
            report.notes.append("kernel removed in head")
            return report
        if not touched:
            return report
        judge = base_k or head_k  # the base branch's manifest and reference judge the change
        self._notes(report, touched, base_k, head_k)
        agent = None
        if not candidate_pass:
            # The task file (which key variable, which gateway) comes from base too: a PR cannot pick the key.
            asked = head_k.model_copy(update={"task": judge.task}) if base_k is not None else head_k
            with self.phase("agent"):
                agent = self._ask_agent(asked, touched, head.sha)
        if self.request.agent_only:
            report.notes.append("agent only: built, run and gated in another job")
            return report
        report = self._gate_kernel(report, judge, head_k, base_k)
        if agent is not None and agent.candidate_patch and self.request.try_candidates:
            self._try_candidate(report, agent.candidate_patch, base, head)
        return report

    def _gate_kernel(self, report: KernelReport, judge: Kernel, head_k: Kernel, base_k: Kernel | None) -> KernelReport:
        """Static checks, resource check, builds and cases of one changed kernel."""
        name = head_k.name
        findings = check_tunables(head_k.config, judge.manifest.tunables, head_k.manifest.config)
        findings += check_defines(head_k.config, head_k.manifest.config) + _flag_findings(head_k)
        if findings:
            return judge_kernel(report, findings, [], judge.manifest.constraints, self.policy)
        with self.phase("resources"), self.steps.step(f"ptxas resource check {name}"):
            report.resource_check = self._resources(head_k, base_k)
        with self.phase("build"):
            builds = self._build(head_k, base_k)
        device = "cuda" if self.env.device == "cuda" and "cuda" in builds.get(HEAD, {}) else "cpu"
        if (hb := builds.get(HEAD, {}).get(device)) is not None:
            report.build = _to_build(hb)
        if (bb := builds.get(BASE, {}).get(device)) is not None:
            report.base_build = _to_build(bb)
        if report.build is not None and report.resource_check is not None:
            report.build.resources = report.resource_check.head
        if report.base_build is not None and report.resource_check is not None:
            report.base_build.resources = report.resource_check.base
        with self.phase("run"):
            cases = self._cases(judge, builds, trusted_reference=base_k is not None)
        for c in cases:
            if c.base_drift_pct is not None and abs(c.base_drift_pct) > RUNNER_DRIFT_PCT:
                report.notes.append(
                    f"{c.name}: base measured {c.base_drift_pct:+.1f}% against its first measurement on this device"
                    " (same binary): the runner is noisier or slower than it was; head and base were interleaved,"
                    " so the verdict stands"
                )
        return judge_kernel(report, [], cases, judge.manifest.constraints, self.policy)

    def _try_candidate(self, report: KernelReport, patch: str, base: _Side, head: _Side) -> None:
        """--try-candidates: the agent's patch on top of head, through the same gates (never merged)."""
        with self.phase("candidate"):
            try:
                with applied(self.repo, head.sha, patch, report.name, folder_of(report.name, base, head)) as cand:
                    side = _load_side(cand.sha, cand.tree, self.settings.repo_config)
                    changes = parse_diff(gitio.diff(self.repo, base.sha, cand.sha))
                    report.candidate = self.review_kernel(report.name, base, side, changes, candidate_pass=True)
            except CandidateError as exc:
                report.notes.append(f"agent candidate not tried: {exc}")

    def _notes(self, report: KernelReport, touched: list[FileChange], base_k: Kernel | None, head_k: Kernel) -> None:
        added = sum(c.added for c in touched)
        removed = sum(c.removed for c in touched)
        report.notes.append(f"rollback: {len(touched)} file(s), +{added}/-{removed} lines in this kernel")
        if base_k is None:
            report.notes.append("new kernel: judged by its own manifest and reference")
            return
        judged = {MANIFEST_NAME, base_k.manifest.reference.module}
        prefix = f"{head_k.path}/"
        for c in touched:
            if c.path.removeprefix(prefix) in judged:
                report.notes.append(f"{c.path} changed: cases, limits and reference come from base")

    def _ask_agent(self, kernel: Kernel, touched: list[FileChange], head_sha: str) -> AgentReport:
        candidates = self.request.out / "agent_candidates"
        try:
            agent, unseen = ask(
                kernel,
                touched,
                settings=self.settings,
                ledger=self.ledger,
                head_sha=head_sha,
                pr=self.request.pr,
                offline=self.request.offline,
                candidates_dir=candidates,
                session=self.session,
            )
        except AgentFailed as exc:
            agent, unseen = exc.report, exc.unseen
            self.service_errors.append(agent.reason)
        self.agents.append(agent)
        self.unseen.extend(unseen)
        return agent

    def _resources(self, head_k: Kernel, base_k: Kernel | None) -> ResourceCheckReport | None:
        """ptxas -v on the kernel's .cu files for sm_90a, head and base, each with its own launch description
        (kernel.toml [launch]: threads, dynamic smem) and occupancy; None for a CPU-only kernel."""
        head = self._ptxas(head_k)
        if head is None:
            return None
        base = self._ptxas(base_k) if base_k is not None else None
        head_d = describe_kernel(head_k, head.resources, head.threads)
        base_d = None
        if base_k is not None and base is not None and base.status == "ok":
            base_d = describe_kernel(base_k, base.resources, base.threads)
        return ResourceCheckReport(
            status=head.status.value,
            head=head_d.resources,
            base=base_d.resources if base_d is not None else [],
            base_status=base.status.value if base is not None else None,
            threads=head.threads,
            launch_errors=head_d.errors,
            launch_notes=head_d.notes + [f"base: {e}" for e in (base_d.errors if base_d else [])],
            seconds=round(head.seconds + (base.seconds if base else 0.0), 2),
            cached=head.cached,
            log_tail=head.log if head.status != "ok" else "",
        )

    def _ptxas(self, k: Kernel) -> ResourceCheck | None:
        spec = k.manifest.build.get("cuda")
        sources = [k.folder / s for s in spec.sources if s.endswith(".cu")] if spec else []
        if spec is None or not sources:
            return None
        # The check compiles for sm_90a itself; an -arch/-gencode in the flags would add other targets.
        flags = [f for f in spec.cuda_cflags if not f.startswith(ARCH_FLAGS)] + defines(k.config)
        return compile_resources(
            sources, [k.folder], flags, cache_dir=self.settings.build_dir / "resources", sandbox=self.sandbox
        )

    def _baseline(self, judge: Kernel, case: Case, base_b: Built, result: CaseReport) -> None:
        """Keep the base latency by (base SHA, build, case, device, torch, driver); compare with the first one.

        Interleaving decides the verdict; the stored baseline only shows when a runner drifts.
        """
        device = self.env.gpu if case.device == "cuda" and self.env.gpu else cpu_name()
        parts = [self.base_sha, base_b.key, judge.name, case.name, device, self.env.torch, driver_version()]
        key = hashlib.sha256(json.dumps(parts).encode()).hexdigest()
        assert result.base_p50_ms is not None
        prior = self.ledger.baseline(key)
        if prior is not None:
            result.base_drift_pct = round((result.base_p50_ms / prior.p50_ms - 1.0) * 100.0, 2)
        self.ledger.record_baseline(
            BaselineRow(
                cache_key=key,
                base_sha=self.base_sha,
                kernel=judge.name,
                case_name=case.name,
                device_name=device,
                p50_ms=result.base_p50_ms,
                samples=result.base_samples,
            )
        )

    def _build(self, head_k: Kernel, base_k: Kernel | None) -> dict[str, dict[str, Built]]:
        """Head (and base) builds for every device this machine can run."""
        devices: list[Literal["cpu", "cuda"]] = ["cpu", "cuda"] if self.env.device == "cuda" else ["cpu"]
        out: dict[str, dict[str, Built]] = {HEAD: {}, BASE: {}}
        for label, k in ((BASE, base_k), (HEAD, head_k)):
            if k is None:
                continue
            for device in devices:
                spec = k.manifest.build.get(device)
                if spec is not None:
                    with self.steps.step(f"build {k.name} {label} ({device})"):
                        out[label][device] = build(
                            k.name, k.folder, spec, k.config, device, self.settings.build_dir, self.sandbox
                        )
        return out

    def _cases(
        self, judge: Kernel, builds: dict[str, dict[str, Built]], *, trusted_reference: bool
    ) -> list[CaseReport]:
        """Every case of the kernel: the runnable ones go to one judge run per device; the rest are skipped."""
        constraints = judge.manifest.constraints
        reports: dict[str, CaseReport] = {}
        runnable: dict[str, list[Case]] = {}
        for case in judge.manifest.cases:
            head_b = builds[HEAD].get(case.device)
            if case.device == "cuda" and self.env.device != "cuda":
                reports[case.name] = judge_case(case, constraints, None, "needs a CUDA GPU; this machine has none")
            elif head_b is None:
                reports[case.name] = judge_case(case, constraints, None, f"kernel.toml has no {case.device} build")
            elif not head_b.ok:
                report = judge_case(case, constraints, None, "")
                report.status, report.verdict, report.reasons = CaseStatus.compile_fail, "fail", ["head does not build"]
                reports[case.name] = report
            else:
                runnable.setdefault(case.device, []).append(case)
        for device, cases in runnable.items():
            reports.update(self._judge(judge, cases, builds, device, trusted_reference))
        return [reports[case.name] for case in judge.manifest.cases]

    def _judge(
        self, judge: Kernel, cases: list[Case], builds: dict[str, dict[str, Built]], device: str, trusted: bool
    ) -> dict[str, CaseReport]:
        """Run `cases` in the judge (once more, in fresh processes, for those that came back inconclusive)."""
        constraints = judge.manifest.constraints
        head_b, base_b = builds[HEAD][device], builds[BASE].get(device)
        # The same build key is the same binary: its latency cannot differ, so it is not timed again.
        identical = base_b is not None and base_b.ok and base_b.key == head_b.key
        sides = {HEAD: head_b} if identical or base_b is None or not base_b.ok else {BASE: base_b, HEAD: head_b}
        try:
            so = {label: {device: str(verify(b))} for label, b in sides.items()}
        except BuildError as exc:
            return {c.name: _refused(c, constraints, str(exc)) for c in cases}
        job = JudgeJob(
            kernel=judge.name,
            reference=ReferenceSource(
                path=str(judge.folder / judge.manifest.reference.module),
                inputs=judge.manifest.reference.inputs,
                function=judge.manifest.reference.function,
                probes=judge.manifest.reference.probes,
            ),
            cases=[],
            sides=so,
            module=head_b.module,
            entry=head_b.entry,
            measure=Measure(**self.settings.measure.model_dump()),
            timeout_s=self.settings.case_timeout_s or judge.manifest.timeout_s,
            time=not identical,
            noise_limit_cores=self.settings.noise_limit_cores,
            secret=self.secret,
        )
        launch: Literal["plain", "sandboxed"] = "plain" if trusted else "sandboxed"
        by_name = {c.name: c for c in cases}
        with self.steps.step(f"run {judge.name}: {len(cases)} {device} case(s)"):
            runs = run_cases(job.model_copy(update={"cases": [_case_job(c, constraints) for c in cases]}), launch)
        reports = {name: judge_case(by_name[name], constraints, runs.get(name)) for name in by_name}
        again = [name for name, r in reports.items() if r.verdict == "inconclusive"]
        if again:
            with self.steps.step(f"re-measure {judge.name}: {', '.join(again)} inconclusive, fresh processes"):
                # the re-measurement times the same binaries again; their probes passed in the first run
                cases2 = [_case_job(by_name[n], constraints) for n in again]
                job2 = job.model_copy(update={"cases": cases2, "secret": new_secret(), "probes": False})
                reruns = run_cases(job2, launch)
            for name in again:
                first = reports[name]
                reports[name] = judge_case(by_name[name], constraints, reruns.get(name))
                reports[name].attempts = 2
                reports[name].probes, reports[name].probe_count = first.probes, first.probe_count
                reports[name].probe_seconds = first.probe_seconds
                seconds = [s for s in (first.case_seconds, reports[name].case_seconds) if s is not None]
                reports[name].case_seconds = round(sum(seconds), 4) if seconds else None
        for name, result in reports.items():
            if identical:
                result.stop_reason = "identical_build"
            elif base_b is not None and result.base_p50_ms is not None:
                self._baseline(judge, by_name[name], base_b, result)  # the measurement the report shows
        return reports


def _missing_runner() -> str | None:
    """What the runner extra provides and this environment lacks (torch, ninja), or None."""
    missing = [m for m in ("torch", "ninja") if importlib.util.find_spec(m) is None]
    return " and ".join(missing) or None


def _case_job(case: Case, constraints: Constraints) -> dict[str, object]:
    limits = case.limits(constraints)
    return {
        **case.model_dump(),
        "tolerance": limits.max_abs_err,
        "limits": limits.model_dump(),
        "max_regression_pct": constraints.max_regression_pct,
    }


def _refused(case: Case, constraints: Constraints, why: str) -> CaseReport:
    report = judge_case(case, constraints, None, "")
    report.status, report.verdict, report.reasons = CaseStatus.crashed, "error", [f"artifact refused: {why}"]
    return report


def _flag_findings(k: Kernel) -> list[str]:
    """Compiler flags of every build spec against the allow-list (a PR cannot pick its compiler or plugins)."""
    findings = []
    for device, spec in k.manifest.build.items():
        where = f"kernel.toml [build.{device}]"
        findings += check_flags(spec.cflags, nvcc=False, where=f"{where} cflags")
        findings += check_flags(spec.cuda_cflags, nvcc=True, where=f"{where} cuda_cflags")
    return findings


def aggregate_agents(agents: list[AgentReport]) -> AgentReport:
    """The report's `agent` block: the sum over every domain asked in this review."""
    if not agents:
        return AgentReport(status="skipped", reason="no kernel changed")
    statuses = [a.status for a in agents]
    status = next((s for s in ("error", "over_budget", "ok", "offline") if s in statuses), "skipped")
    return AgentReport(
        status=status,  # type: ignore[arg-type]
        domain=",".join(sorted({a.domain or "" for a in agents})),
        model=",".join(sorted({a.model for a in agents if a.model})) or None,
        reason="; ".join(a.reason for a in agents if a.reason),
        requests=sum(a.requests for a in agents),
        prompt_tokens=sum(a.prompt_tokens for a in agents),
        completion_tokens=sum(a.completion_tokens for a in agents),
        total_tokens=sum(a.total_tokens for a in agents),
        usage_estimated=sum(a.usage_estimated for a in agents),
        risk_notes=[n for a in agents for n in a.risk_notes],
        candidate_patch=next((a.candidate_patch for a in agents if a.candidate_patch), None),
    )


__all__ = ["CaseRun", "ReviewOutcome", "ReviewRequest", "Reviewer"]
