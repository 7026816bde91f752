"""Past one GPU box: plan one matrix job per changed kernel, then merge the jobs' parts into one report."""

from __future__ import annotations

import json
import logging
import re
from datetime import UTC, datetime
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from bot import __version__
from bot.agent.review import MAX_ITEMS
from bot.config.includes import claimed_globs, watched_globs
from bot.config.manifest import find_manifests, folder_glob, load_kernel
from bot.config.repo import RepoConfig
from bot.edges import gitio
from bot.edges.machine import detect
from bot.errors import InputError
from bot.models.agent_report import AgentReport, ProposedCase, aggregate_agents
from bot.models.report import KernelReport, Report
from bot.review.arch_jobs import job_arches
from bot.review.changes import parse_diff, touching
from bot.review.checkout import no_manifest
from bot.review.coverage import coverage, unclaimed_reason
from bot.text.safe import one_line
from bot.verdict.change import lost_part
from bot.verdict.folds import combine, review_verdict
from bot.wording.messages import phrase

log = logging.getLogger(__name__)

NAME = re.compile(r"[A-Za-z0-9_.-]+")  # a kernel folder name safe for a matrix value and an artifact name
PART_PREFIX = "part-"  # a part folder is named part-<kernel> (the artifact name in opgate-review.yml)
ARCH_SEP = "@"  # part-<kernel>@<arch>: the part of a further architecture's GPU job (never in a kernel's NAME)
AGENT_PREFIX = "agent-"  # an agent part (an --agent-only run) is named agent-<kernel>
UNSEEN_FILE = "unseen_files.json"  # beside report.json: files the agent did not see (for the merged comment)


class PlannedKernel(BaseModel):
    """One matrix entry: a kernel the change touches and the domain whose key its job may use."""

    model_config = ConfigDict(frozen=True)

    kernel: str
    domain: str


class PlannedJob(BaseModel):
    """One GPU job: a kernel's cases on one architecture (`arch` "" for a kernel without a CUDA build), the
    folder its part lands in (`part-<part>`), and the domain of its kernel."""

    model_config = ConfigDict(frozen=True)

    kernel: str
    domain: str
    arch: str = ""
    part: str


Found = tuple[list[str], str, list[str], list[str]]  # watched globs, domain, job architectures, claimed globs


def _manifests(tree: Path, config: RepoConfig) -> dict[str, tuple[str, Found | None]]:
    """Kernel name -> (its folder, (the globs whose change touches it, domain, the architectures its cases need a
    GPU job on, the globs it claims for coverage)), the second None for a kernel whose definition does not load."""
    found: dict[str, tuple[str, Found | None]] = {}
    for name, folder in find_manifests(tree, config.manifests).items():
        try:
            kernel = load_kernel(tree / folder, config=config, path=folder)
        except InputError:
            found[name] = (folder, None)
            continue
        found[name] = (
            folder,
            (watched_globs(kernel), kernel.manifest.domain, job_arches(kernel), claimed_globs(kernel)),
        )
    return found


class Plan(BaseModel):
    """What `--plan` found: the kernels to review (one agent job each), their GPU jobs (one per architecture the
    cases need), and kernel sources no manifest claims (which fail it)."""

    kernels: list[PlannedKernel]
    jobs: list[PlannedJob] = []
    unclaimed: str | None = None  # the reason, when a changed *.cu/*.cuh lies in no kernel's globs


def plan(repo: Path, base: str, head: str, config: RepoConfig | None = None) -> Plan:
    """The kernels `base...head` touches (as `opgate review` decides it), with the base branch's domain."""
    config = config or RepoConfig()
    top = gitio.toplevel(repo)
    base_sha, head_sha = gitio.resolve(top, base), gitio.resolve(top, head)
    changes = parse_diff(gitio.diff(top, base_sha, head_sha))
    with gitio.worktree(top, base_sha) as base_tree, gitio.worktree(top, head_sha) as head_tree:
        at_base, at_head = _manifests(base_tree, config), _manifests(head_tree, config)
    if not at_base and not at_head:
        raise no_manifest(config)
    planned, jobs, every_glob = [], [], []
    for name in sorted(set(at_base) | set(at_head)):
        folder = (at_head.get(name) or at_base[name])[0]
        if not NAME.fullmatch(name):
            raise InputError(f"{folder}: a kernel folder name must match {NAME.pattern}")
        b, h = at_base.get(name, (folder, None))[1], at_head.get(name, (folder, None))[1]
        globs = [g for side in (b, h) if side for g in side[0]] or [folder_glob(folder)]
        every_glob += [g for side in (b, h) if side for g in side[3]] or [folder_glob(folder)]
        broken = name in at_head and h is None
        if broken or touching(changes, globs):
            domain = (b or h or ([], "unknown", [""], []))[1]
            planned.append(PlannedKernel(kernel=name, domain=domain))
            arches = (b or h or ([], "", [""], []))[2]  # base's cases, as the review runs them
            for i, arch in enumerate(arches):
                part = name if i == 0 else f"{name}{ARCH_SEP}{arch}"
                jobs.append(PlannedJob(kernel=name, domain=domain, arch=arch, part=part))
    cov = coverage(changes, every_glob, {}, ignore=config.ignore)
    return Plan(kernels=planned, jobs=jobs, unclaimed=unclaimed_reason(cov) if cov.kernel_sources.total else None)


def matrix(planned: list[PlannedKernel], jobs: list[PlannedJob] | None = None) -> str:
    """The plan as a GitHub Actions matrix, one line of JSON: `include` one entry per kernel (the agent job),
    `gpu` one per kernel and architecture (the review job: `matrix: include: ${{ fromJSON(…).gpu }}`)."""
    gpu = jobs if jobs is not None else [PlannedJob(kernel=p.kernel, domain=p.domain, part=p.kernel) for p in planned]
    return json.dumps(
        {"include": [p.model_dump() for p in planned], "gpu": [j.model_dump() for j in gpu]}, separators=(",", ":")
    )


class Part(BaseModel):
    """One matrix job's output folder: its report (None when the job left none, or none that reads) and
    unseen files."""

    folder: Path
    kernel: str
    report: Report | None
    unseen: list[str] = []
    arch: str = ""  # the architecture job of a part-<kernel>@<arch> folder
    problem: str | None = None  # why a report that is there could not be read (its first error)


MAX_PART_BYTES = 16 * 1024 * 1024


def read_plan(path: Path) -> list[PlannedKernel]:
    """The matrix `--plan` printed (what the publish job expects one part of per kernel)."""
    try:
        include = json.loads(path.read_text())["include"]
        return [PlannedKernel.model_validate(entry) for entry in include]
    except (OSError, ValueError, KeyError, TypeError) as exc:  # a ValidationError is a ValueError
        raise InputError(f'{path}: not a plan matrix ({{"include": [{{kernel, domain}}]}}): {exc}') from exc


def read_part(folder: Path, prefix: str = PART_PREFIX) -> Part:
    """A part as its job left it. The job ran PR code: a report.json that is not UTF-8, not JSON, not the
    schema or too large makes the kernel an `error` (with the reason), never a crash of the merge."""
    name, _, arch = folder.name.removeprefix(prefix).partition(ARCH_SEP)
    path = folder / "report.json"
    if not path.exists():
        return Part(folder=folder, kernel=name, report=None, arch=arch)
    try:
        if path.stat().st_size > MAX_PART_BYTES:
            raise ValueError(f"over {MAX_PART_BYTES // 2**20} MiB")
        report = Report.model_validate_json(path.read_bytes())
        unseen_path = folder / UNSEEN_FILE
        unseen = json.loads(unseen_path.read_bytes()) if unseen_path.exists() else []
        if not isinstance(unseen, list):
            raise ValueError(f"{UNSEEN_FILE} is not a list")
    except (OSError, ValueError, RecursionError) as exc:  # ValidationError and JSONDecodeError are ValueErrors
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        problem = one_line(first, limit=200)
        log.warning("its part %s holds no readable opgate report (%s)", folder.name, problem)
        return Part(folder=folder, kernel=name, report=None, problem=problem, arch=arch)
    return Part(folder=folder, kernel=name, report=report, unseen=[str(u) for u in unseen], arch=arch)


MAX_AGENT_CASES = MAX_ITEMS  # entries of a test matrix an agent part may hold: what one reply may hold


class AgentMatrix(BaseModel):
    """What `opgate review --agent-cases DIR` takes from an agent part (data, never code): the kernel's test matrix
    as the agent job validated it and who proposed it, or why there is none (`not_run`: the agent did not answer)."""

    model_config = ConfigDict(frozen=True)

    cases: list[ProposedCase] = []
    proposer: str = ""
    not_run: str = ""


def read_agent_cases(folder: Path, kernel: str, base_sha: str, head_sha: str) -> AgentMatrix:
    """The test matrix of `kernel`'s agent part (the --out folder of `opgate review --agent-only --kernel K`) for
    base_sha...head_sha. A folder that is not there, holds no readable report, reviewed other revisions or another
    kernel, or a matrix over MAX_AGENT_CASES entries is bad input (InputError). Nothing else of the part is read."""
    made = f"the --out folder of `opgate review --agent-only --kernel {kernel}`"
    if not folder.is_dir():
        raise InputError(f"--agent-cases {folder}: no such folder ({made})")
    part = read_part(folder, prefix=AGENT_PREFIX)
    if part.report is None:
        why = (
            f"its part {folder.name} holds no readable opgate report ({part.problem})"
            if part.problem
            else f"it holds no report.json ({made})"
        )
        raise InputError(f"--agent-cases {folder}: not an agent part: {why}")
    r = part.report
    if (r.base_sha, r.head_sha) != (base_sha, head_sha):
        raise InputError(
            f"--agent-cases {folder}: the agent part is of {r.base_sha[:10]}...{r.head_sha[:10]}, "
            f"not {base_sha[:10]}...{head_sha[:10]}"
        )
    named = {k.name for k in r.kernels} | {a.kernel for a in r.agents if a.kernel is not None}
    if others := sorted(named - {kernel}):
        raise InputError(f"--agent-cases {folder}: an agent part of {', '.join(others)}, not of {kernel}")
    agents = [a for a in r.agents if a.kernel == kernel]
    if not agents:
        return AgentMatrix(not_run=f"the agent part holds no agent review of {kernel}: no test matrix to run")
    agent = agents[0]
    if agent.status != "ok":
        why = f"{agent.status}: {one_line(phrase(agent.reason), limit=200)}" if agent.reason else agent.status
        return AgentMatrix(not_run=f"the agent's review did not answer ({why}): no test matrix to run")
    if len(agent.test_matrix) > MAX_AGENT_CASES:
        raise InputError(
            f"--agent-cases {folder}: its test matrix holds {len(agent.test_matrix)} entries "
            f"(an agent reply holds at most {MAX_AGENT_CASES})"
        )
    return AgentMatrix(cases=list(agent.test_matrix), proposer=agent.model or "the agent")


def _check_part(part: Part, base_sha: str, head_sha: str) -> None:
    r = part.report
    assert r is not None
    if (r.base_sha, r.head_sha) != (base_sha, head_sha):
        raise InputError(
            f"{part.folder}: the part reviewed {r.base_sha[:10]}...{r.head_sha[:10]}, "
            f"not {base_sha[:10]}...{head_sha[:10]}"
        )
    others = sorted({k.name for k in r.kernels} - {part.kernel})
    if others:
        raise InputError(f"{part.folder}: a part of {part.kernel!r} reports other kernels too: {', '.join(others)}")


def merge(
    parts: list[Part],
    base_sha: str,
    head_sha: str,
    pr: int | None,
    *,
    agents: list[Part] | None = None,
    planned: list[PlannedKernel] | None = None,
) -> tuple[Report, list[str]]:
    """One report from the parts; a part without a report is an `error` kernel (its job crashed or timed out).

    Every part is untrusted data (the job that wrote it ran pull-request code): its SHAs must be the ones
    merged, it may report only its own kernel, and with `planned` only a planned kernel; an agent part may
    report only its kernel's planned domain. Agent parts replace the parts' own (offline) agent reviews.
    """
    domains = {p.kernel: p.domain for p in planned} if planned is not None else None
    for part in [*parts, *(agents or [])]:
        if domains is not None and part.kernel not in domains:
            raise InputError(f"{part.folder}: {part.kernel!r} is not a planned kernel ({', '.join(domains)})")
        if part.report is not None:
            _check_part(part, base_sha, head_sha)
    kernels: dict[str, KernelReport] = {}
    agent_reports: list[AgentReport] = []
    unseen: list[str] = []
    environment = None
    health = next((p.report.health for p in parts if p.report is not None and p.report.health), None)
    isolation = next((p.report.isolation for p in parts if p.report is not None and p.report.isolation), None)
    for part in agents or []:
        for a in part.report.agents if part.report is not None else []:
            if domains is not None and a.domain != domains[part.kernel]:
                raise InputError(
                    f"{part.folder}: agent domain {a.domain!r} is not {part.kernel}'s {domains[part.kernel]!r}"
                )
            agent_reports.append(a)
        unseen.extend(part.unseen)
    by_arch: dict[str, dict[str, KernelReport]] = {}  # kernel -> architecture job -> its part's section
    for part in sorted(parts, key=lambda p: (p.kernel, p.arch != "", p.arch)):  # the first job's part first
        r = part.report
        jobs = by_arch.setdefault(part.kernel, {})
        if part.arch in jobs:
            raise InputError(f"{part.folder}: kernel {part.kernel} is in two parts")
        if r is None:
            jobs[part.arch] = lost_part(part.kernel, part.folder.name, part.problem or "")
            continue
        for k in r.kernels:  # _check_part: only its own kernel
            jobs[part.arch] = k
        if agents is None and not part.arch:  # a further architecture's job asked nobody (its part is offline)
            agent_reports.extend(r.agents)
            unseen.extend(part.unseen)
        environment = environment or r.environment
    if environment is None:
        environment = detect()
    for name, jobs in by_arch.items():
        if jobs:
            kernels[name] = combine(list(jobs.values())) if len(jobs) > 1 else next(iter(jobs.values()))
    ordered = [kernels[name] for name in sorted(kernels)]
    cov = next((p.report.coverage for p in parts if p.report and p.report.coverage), None)
    report = Report(
        base_sha=base_sha,
        head_sha=head_sha,
        pr=pr,
        verdict=review_verdict(ordered, cov),
        kernels=ordered,
        agents=agent_reports,
        agent=aggregate_agents(agent_reports),
        environment=environment,
        isolation=isolation,
        health=health,
        created_at=datetime.now(UTC).isoformat(timespec="seconds"),
        opgate_version=__version__,
        coverage=cov,
    )
    return report, list(dict.fromkeys(unseen))
