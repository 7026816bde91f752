"""One review, from two revisions to a Report: the changed kernels, each through the agent, its checks and gates."""

from __future__ import annotations

import contextlib
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime

import requests

from bot import __version__
from bot.agent.functions import language
from bot.agent.materials import Sources
from bot.agent.run import AgentFailed, ask
from bot.config.manifest import MANIFEST_NAME, Kernel, in_folder
from bot.config.settings import Settings
from bot.edges import gitio
from bot.errors import InputError
from bot.ledger import Ledger
from bot.models.agent_report import AgentReport, ProposedCase, aggregate_agents
from bot.models.diff import FileChange
from bot.models.evidence import KernelEvidence, Lineage
from bot.models.finding import Finding
from bot.models.report import Coverage, KernelReport, Machine, Report, ResourceCheckReport
from bot.phases import Phases
from bot.present.progress import Steps
from bot.review.candidates import CandidateError, applied
from bot.review.cases import agent_rules, probe_once, to_build
from bot.review.changes import parse_diff, touching
from bot.review.checkout import (
    Checkout,
    checkouts,
    folder_of,
    kernel_claims,
    kernel_globs,
    load_checkout,
    missing_submodule,
    no_manifest,
)
from bot.review.ci_summary import diff_stat
from bot.review.coverage import coverage, not_judged_findings, not_read_findings, unclaimed_reason
from bot.review.host import CaseRunner, Host
from bot.review.lineage import Origin, origins, renamed_to
from bot.review.notes import place_notes
from bot.review.request import ReviewRequest
from bot.review.resource_check import flag_findings, resource_checks, resource_reads, without_unchanged
from bot.untrusted.build import compiled_files
from bot.untrusted.runner.spawn import new_secret
from bot.verdict import agent_cases
from bot.verdict.change import candidate_not_tried
from bot.verdict.findings import BASE, HEAD
from bot.verdict.flags import define_findings
from bot.verdict.folds import review_verdict
from bot.verdict.gate import Policy
from bot.verdict.kernel import judge_kernel
from bot.verdict.static import tunable_findings
from bot.wording.messages import phrase

log = logging.getLogger(__name__)


class Reviewer:
    """Holds what one review needs; `run` walks every kernel through the gates and returns the report."""

    def __init__(
        self,
        request: ReviewRequest,
        settings: Settings,
        ledger: Ledger,
        host: Host,
        session: requests.Session | None = None,
    ) -> None:
        self.request = request
        self.settings = settings
        self.ledger = ledger
        self.session = session
        self.env: Machine = host.machine
        self.sandbox = host.sandbox
        self.health = host.health
        self.cases = host.cases  # one kernel's builds and cases (KernelCases; a test's recorded runner)
        self.secret = new_secret()
        self.policy = Policy(inconclusive=settings.inconclusive_policy)
        self.phases = Phases()  # wall time per phase (benchmarks/overhead.py prints them)
        self.steps = Steps()
        self.repo = request.repo
        self.base_sha = ""
        self.head_sha = ""
        self.agents: list[AgentReport] = []
        self.unseen: list[str] = []
        self.service_errors: list[str] = []
        self.coverage: Coverage | None = None
        self.changes: list[FileChange] = []  # base...head, as the review read it
        self.head: Checkout | None = None  # head's checkout while it lasts (`run`'s `keep`): the annotations read it
        self.origins: dict[str, Origin] = {}  # head kernel new by name -> the base kernel it was renamed or copied from

    def run(self, keep: contextlib.ExitStack | None = None) -> Report:
        """Every kernel through its gates, into the report. Base's and head's worktrees are removed before it returns,
        or with `keep` when that closes, the review stopped or not (the annotations read head's: `self.head`)."""
        req = self.request
        with self.phases.timed("git"):
            repo = self.repo = gitio.toplevel(req.repo)
            base_sha, head_sha = gitio.resolve(repo, req.base), gitio.resolve(repo, req.head)
            self.base_sha, self.head_sha = base_sha, head_sha
            changes = self.changes = parse_diff(gitio.diff(repo, base_sha, head_sha))
        kernels: list[KernelReport] = []
        with contextlib.ExitStack() as stack:
            stack.enter_context(self.steps)
            config = self.settings.repo_config
            with self.phases.timed("checkout"):
                base, head = (keep or stack).enter_context(checkouts(repo, base_sha, head_sha, config))
            if keep is not None:
                self.head = head
            names = sorted(set(base.folders) | set(head.folders))
            if not names:
                raise no_manifest(config)
            with self.phases.timed("git"):
                globs = [g for name in names for g in kernel_claims(name, base, head)]
                sizes = gitio.sizes(repo, head_sha)
                self.coverage = coverage(changes, globs, sizes, ignore=config.ignore)
                self.origins = self._origins(base, head, sizes)
            if self.coverage.kernel_sources.total:
                log.warning("%s", unclaimed_reason(self.coverage))
            if req.only_kernel is not None:
                if req.only_kernel not in names:
                    raise InputError(f"--kernel {req.only_kernel}: no such kernel (have: {', '.join(names)})")
                names = [req.only_kernel]
            for name in names:
                kernels.append(self.review_kernel(name, base, head, changes))
            with self.phases.timed("checkout"):
                stack.close()  # remove the worktrees (with `keep`: when it closes)
        return Report(
            base_sha=base_sha,
            head_sha=head_sha,
            pr=req.pr,
            verdict=review_verdict(kernels, self.coverage),
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

    def _origins(self, base: Checkout, head: Checkout, sizes: dict[str, int]) -> dict[str, Origin]:
        """Git's rename and copy detection for the kernels head has and base has not (none: no git call)."""
        new = [folder for name, folder in head.folders.items() if name not in base.folders]
        if not new:
            return {}
        copies = gitio.copies(self.repo, base.sha, head.sha, [*new, *base.folders.values()])
        return origins(copies, sizes, head.folders, base.folders)

    # -- one kernel ---------------------------------------------------------------------------

    def review_kernel(
        self,
        name: str,
        base: Checkout,
        head: Checkout,
        changes: list[FileChange],
        *,
        candidate_pass: bool = False,
        matrix: tuple[list[ProposedCase], str] | None = None,
    ) -> KernelReport:
        """Gather the kernel's evidence (what changed, its static checks, builds, resource checks and cases), then
        ask the gate once (`judge_kernel`); an agent candidate goes through the same steps on its own, with `matrix`:
        the test matrix head was judged with and who proposed it (the same cases admitted by the same rules)."""
        origin = self.origins.get(name)
        head_k, base_k = head.kernels.get(name), base.kernels.get(origin.base if origin else name)
        touched = touching(changes, kernel_globs(name, base, head))
        known = head_k or base_k
        domain = known.manifest.domain if known else "unknown"
        evidence = KernelEvidence(name=name, domain=domain, changed=bool(touched))
        rules = base_k or head_k  # the base branch's manifest and reference hold the change to account
        case = self.request.only_case
        if rules is not None and head_k is not None and touched and name not in head.broken and case is not None:
            rules = only_case(rules, case, self.request.latency_limit_pct)
        agent = self._gather(evidence, base, head, touched, origin, candidate_pass=candidate_pass)
        evidence.agent_matrix, evidence.agent_proposer = list(self.request.agent_cases), self.request.agent_name
        if matrix is not None:
            evidence.agent_matrix, evidence.agent_proposer = list(matrix[0]), matrix[1]
        if agent is not None and agent.status == "ok":
            task_model = rules.task.model if rules is not None and rules.task else "the agent"
            evidence.agent_matrix, evidence.agent_proposer = list(agent.test_matrix), agent.model or task_model
        if rules is not None:  # admitted once, by base's bounds (a new kernel has none): the gate judges from this
            manifest = rules.manifest if base_k is not None else None
            evidence.agent_admission = agent_cases.admit(evidence.agent_matrix, manifest)
            if not evidence.agent_matrix and self.request.agent_cases_not_run:  # never a silent drop
                evidence.agent_admission.note = self.request.agent_cases_not_run
        runner = None
        if evidence.gathered and rules is not None and head_k is not None:
            runner = self._gate_evidence(evidence, rules, head_k, base_k, touched)
        report = judge_kernel(evidence, rules, self.policy)  # the one decision on this kernel
        if runner is not None and rules is not None:
            runner.record_baselines(rules, report)
        if agent is not None and agent.candidate_patch and self.request.try_candidates:
            matrix_of_head = (evidence.agent_matrix, evidence.agent_proposer)
            self._try_candidate(report, agent.candidate_patch, base, head, matrix_of_head)
        return report

    def _gather(
        self,
        evidence: KernelEvidence,
        base: Checkout,
        head: Checkout,
        touched: list[FileChange],
        origin: Origin | None,
        *,
        candidate_pass: bool,
    ) -> AgentReport | None:
        """What the change is, before anything is built: invalid, removed, untouched, or gathered further (its
        diff, notes, the agent's reply, the changed files no gate reads). Returns the agent's report."""
        name = evidence.name
        head_k, base_k = head.kernels.get(name), base.kernels.get(origin.base if origin else name)
        if name in head.broken:
            evidence.invalid = head.broken[name]
            return None
        if head_k is None:
            evidence.removed, evidence.renamed_to = True, renamed_to(self.origins).get(name, "")
            return None
        if not touched:
            return None
        evidence.diff = diff_stat(touched)
        for label, side, k in ((HEAD, head, head_k), (BASE, base, base_k)):
            if k is not None and (why := missing_submodule(k, side, label)) is not None:
                raise InputError(why)
        rules = base_k or head_k
        self._notes(evidence, touched, base_k, head_k, origin)
        agent = None
        if not candidate_pass:
            # The task file (which key variable, which gateway) comes from base too: a PR cannot pick the key.
            asked = head_k.model_copy(update={"task": rules.task}) if base_k is not None else head_k
            with self.phases.timed("agent"):
                agent = self._ask_agent(
                    asked, touched, head.sha, rules=rules, sources=read_sources(touched, base, head)
                )
        if self.request.agent_only:
            evidence.gated_elsewhere = True
            return agent
        evidence.gathered = True
        evidence.unread = self._not_judged(touched, head_k, base_k)
        return agent

    def _gate_evidence(
        self,
        evidence: KernelEvidence,
        rules: Kernel,
        head_k: Kernel,
        base_k: Kernel | None,
        touched: list[FileChange] | None = None,
    ) -> CaseRunner | None:
        """Static checks, resource check, builds and cases of one changed kernel into `evidence` (`touched`: its
        changed files); the kernel's builds and cases, or None when nothing was built. Static findings stop it
        before anything is built: refused flags never reach a compiler."""
        name = head_k.name
        config = head_k.manifest.config
        at, lines = f"{head_k.path}/{config}", head_k.config_lines  # each finding at its key's line of the config
        evidence.static = [
            *tunable_findings(head_k.config, rules.manifest.tunables, config, at, lines),
            *define_findings(head_k.config, config, at, lines),
            *flag_findings(head_k),
        ]
        if evidence.static:
            return None
        probe_once(head_k.manifest.build, self.settings.build_dir)
        pool = ThreadPoolExecutor(max_workers=1)  # the resource check's nvcc compiles beside the builds
        pending = None
        if self.request.resource_check:
            arches = rules.manifest.constraints.architectures  # base's: a PR cannot drop the architecture it breaks
            changed = [p for c in touched or [] for p in c.paths]
            pending = pool.submit(self._resources, name, head_k, base_k, arches, changed)
        runner = self.cases(
            self.settings,
            self.env,
            self.ledger,
            self.sandbox,
            self.steps,
            secret=self.secret,
            base_sha=self.base_sha,
            arch=self.request.arch,
        )
        with pool:
            with self.phases.timed("build"):
                builds = runner.build(head_k, base_k)
            if pending is not None:
                checks = pending.result()
                for check in checks if evidence.unread else []:
                    without_unchanged(check)
                evidence.resource_checks = checks
        evidence.builds = {side: {d: to_build(b) for d, b in by_device.items()} for side, by_device in builds.items()}
        evidence.device, evidence.arch, evidence.gpu = self.env.device, self.env.arch, self.env.gpu
        with self.phases.timed("run"):
            runner.run(rules, builds, evidence, trusted_reference=base_k is not None, held_out=self.request.held_out)
        admitted = agent_cases.cases(evidence.agent_admission)
        if admitted:  # after the manifest's: both sides, base's reference, the judge's own inputs
            agent_ev = KernelEvidence(name=evidence.name, domain=evidence.domain)
            with self.phases.timed("run"):
                runner.run(agent_rules(rules, admitted), builds, agent_ev, trusted_reference=True, looks=False)
            # a shape under a manifest-free name has no history: no drift figure against an earlier base
            evidence.agent_runs = [c.model_copy(update={"prior_base_p50_ms": None}) for c in agent_ev.cases]
        return runner

    def _resources(
        self, name: str, head_k: Kernel, base_k: Kernel | None, arches: list[str], changed: list[str]
    ) -> list[ResourceCheckReport]:
        """The kernel's resource check (run beside its builds: its wall time is the phase's, its CPU time is counted
        with the builds')."""
        started = time.perf_counter()
        with self.steps.step(f"ptxas resource check {name} ({', '.join(arches)})"):
            cache = self.settings.build_dir / "resources"
            checks = resource_checks(head_k, base_k, arches, cache, self.sandbox, changed)
        self.phases.add("resources", time.perf_counter() - started)
        return checks

    def _not_judged(self, touched: list[FileChange], head_k: Kernel, base_k: Kernel | None) -> list[Finding]:
        """The kernel's changed sources that no build which runs on this machine compiles (head's or base's); for a
        kernel without cases, judged by its resource check alone, every changed file that check does not read."""
        paths = [p for c in touched for p in c.paths]
        if not (base_k or head_k).manifest.cases:
            same = [base_k] if base_k is not None and base_k.path == head_k.path else []
            return not_read_findings(paths, set().union(*(resource_reads(k) for k in [head_k, *same])))
        compiled: dict[str, set[str]] = {}
        for k in [head_k, *([base_k] if base_k is not None and base_k.path == head_k.path else [])]:
            for device, spec in k.manifest.build.items():
                compiled.setdefault(device, set()).update(compiled_files(k.folder, spec, device))
        ran = ["cpu", "cuda"] if self.env.device == "cuda" else ["cpu"]
        return not_judged_findings(paths, head_k.path, compiled, ran)

    def _try_candidate(
        self, report: KernelReport, patch: str, base: Checkout, head: Checkout, matrix: tuple[list[ProposedCase], str]
    ) -> None:
        """--try-candidates: the agent's patch on top of head, through the same gates and head's agent cases (never
        merged)."""
        with self.phases.timed("candidate"):
            try:
                with applied(self.repo, head.sha, patch, report.name, folder_of(report.name, base, head)) as cand:
                    missing = gitio.populate_submodules(self.repo, cand.sha, cand.tree)
                    side = load_checkout(cand.sha, cand.tree, self.settings.repo_config)
                    side.missing = missing
                    changes = parse_diff(gitio.diff(self.repo, base.sha, cand.sha))
                    report.candidate = self.review_kernel(
                        report.name, base, side, changes, candidate_pass=True, matrix=matrix
                    )
            except CandidateError as exc:
                candidate_not_tried(report, str(exc))

    def _notes(
        self,
        evidence: KernelEvidence,
        touched: list[FileChange],
        base_k: Kernel | None,
        head_k: Kernel,
        origin: Origin | None = None,
    ) -> None:
        """What the change is besides its diff: a new kernel, where one new by name came from, base's rules it
        touched (the gate states them)."""
        if base_k is None:  # judged by the manifest and reference this change wrote (the gate asks for a person)
            evidence.new_kernel = True
            return
        if origin is not None:
            evidence.origin = Lineage(base=origin.base, how=origin.how, share=origin.share)
        judged = {MANIFEST_NAME, base_k.manifest.reference.module}
        evidence.rules_changed = [c.path for c in touched if in_folder(head_k.path, c.path) in judged]

    def _ask_agent(
        self,
        kernel: Kernel,
        touched: list[FileChange],
        head_sha: str,
        *,
        rules: Kernel | None = None,
        sources: Sources | None = None,
    ) -> AgentReport:
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
                rules=rules,
                sources=sources,
                base_sha=self.base_sha,
            )
        except AgentFailed as exc:
            agent, unseen = exc.report, exc.unseen
            self.service_errors.append(phrase(agent.reason) if agent.reason is not None else agent.status)
        agent.inline_notes = place_notes(agent.risk_notes, touched)
        self.agents.append(agent)
        self.unseen.extend(unseen)
        return agent


MAX_SOURCE_BYTES = 1 << 20  # a changed file larger than this is not read for its functions


def read_sources(touched: list[FileChange], base: Checkout, head: Checkout) -> Sources:
    """The text of every changed C/C++/CUDA or Python file on each side that has it (for the agent's changed
    functions); a file a side lacks, a link, one that resolves outside its checkout or one over MAX_SOURCE_BYTES
    is absent (a pull request's link to a file of the runner never reaches the gateway)."""
    texts: tuple[dict[str, str], dict[str, str]] = ({}, {})
    for change in touched:
        for out, side, path in ((texts[0], base, change.old_path or change.path), (texts[1], head, change.path)):
            file = side.tree / path
            if language(path) is None or file.is_symlink() or not file.is_file():
                continue
            if not file.resolve().is_relative_to(side.tree.resolve()) or file.stat().st_size > MAX_SOURCE_BYTES:
                continue
            out[path] = file.read_text(encoding="utf-8", errors="replace")
    return Sources(base=texts[0], head=texts[1])


def only_case(rules: Kernel, name: str, latency_limit_pct: float | None = None) -> Kernel:
    """`rules` with one case left (the others are not run), judged against `latency_limit_pct` when given."""
    cases = [c for c in rules.manifest.cases if c.name == name]
    if not cases:
        have = ", ".join(c.name for c in rules.manifest.cases)
        raise InputError(f"--case {name}: kernel {rules.name} has no such case (have: {have})")
    update: dict[str, object] = {"cases": cases}
    if latency_limit_pct is not None:
        update["constraints"] = rules.manifest.constraints.model_copy(update={"max_regression_pct": latency_limit_pct})
    return rules.model_copy(update={"manifest": rules.manifest.model_copy(update=update)})
