"""Past one GPU box: plan one matrix job per changed kernel, then merge the jobs' parts into one report."""

from __future__ import annotations

import json
import logging
import re
from datetime import UTC, datetime
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from bot import __version__, gitio
from bot.changes import parse_diff, touching
from bot.environment import detect
from bot.errors import InputError
from bot.gate import overall
from bot.manifest import KERNELS_DIR, MANIFEST_NAME, load_kernel
from bot.report import KernelReport, Report
from bot.review import aggregate_agents
from bot.safe import one_line

log = logging.getLogger(__name__)

NAME = re.compile(r"[A-Za-z0-9_.-]+")  # a kernel folder name safe for a matrix value and an artifact name
PART_PREFIX = "part-"  # a part folder is named part-<kernel> (the artifact name in pr-review.yml)
UNSEEN_FILE = "unseen_files.json"  # beside report.json: files the agent did not see (for the merged comment)


class PlannedKernel(BaseModel):
    """One matrix entry: a kernel the change touches and the domain whose key its job may use."""

    model_config = ConfigDict(frozen=True)

    kernel: str
    domain: str


def _manifests(tree: Path) -> dict[str, tuple[list[str], str] | None]:
    """Kernel name -> (globs, domain), or None for a kernel whose definition does not load."""
    found: dict[str, tuple[list[str], str] | None] = {}
    for manifest in sorted((tree / KERNELS_DIR).glob(f"*/{MANIFEST_NAME}")):
        try:
            kernel = load_kernel(manifest.parent)
        except InputError:
            found[manifest.parent.name] = None
            continue
        found[kernel.name] = (list(kernel.manifest.globs), kernel.manifest.domain.value)
    return found


def plan(repo: Path, base: str, head: str) -> list[PlannedKernel]:
    """The kernels `base...head` touches (as `opgate review` decides it), with the base branch's domain."""
    top = gitio.toplevel(repo)
    base_sha, head_sha = gitio.resolve(top, base), gitio.resolve(top, head)
    changes = parse_diff(gitio.diff(top, base_sha, head_sha))
    with gitio.worktree(top, base_sha) as base_tree, gitio.worktree(top, head_sha) as head_tree:
        at_base, at_head = _manifests(base_tree), _manifests(head_tree)
    planned = []
    for name in sorted(set(at_base) | set(at_head)):
        if not NAME.fullmatch(name):
            raise InputError(f"{KERNELS_DIR}/{name}: a kernel folder name must match {NAME.pattern}")
        b, h = at_base.get(name), at_head.get(name)
        globs = [g for side in (b, h) if side for g in side[0]] or [f"{KERNELS_DIR}/{name}/**"]
        broken = name in at_head and h is None
        if broken or touching(changes, globs):
            domain = (b or h or ([], "unknown"))[1]
            planned.append(PlannedKernel(kernel=name, domain=domain))
    return planned


def matrix(planned: list[PlannedKernel]) -> str:
    """The plan as a GitHub Actions matrix (`{"include": [...]}`), one line of JSON."""
    return json.dumps({"include": [p.model_dump() for p in planned]}, separators=(",", ":"))


class Part(BaseModel):
    """One matrix job's output folder: its report (None when the job left none, or none that reads) and
    unseen files."""

    folder: Path
    kernel: str
    report: Report | None
    unseen: list[str] = []
    problem: str | None = None  # why a report that is there could not be read


MAX_PART_BYTES = 16 * 1024 * 1024


def read_part(folder: Path) -> Part:
    """A part as its job left it. The job ran PR code: a report.json that is not UTF-8, not JSON, not the
    schema or too large makes the kernel an `error` (with the reason), never a crash of the merge."""
    name = folder.name.removeprefix(PART_PREFIX)
    path = folder / "report.json"
    if not path.exists():
        return Part(folder=folder, kernel=name, report=None)
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
        problem = f"its part {folder.name} holds no readable opgate report ({one_line(first, limit=200)})"
        log.warning("%s", problem)
        return Part(folder=folder, kernel=name, report=None, problem=problem)
    return Part(folder=folder, kernel=name, report=report, unseen=[str(u) for u in unseen])


def merge(parts: list[Part], base_sha: str, head_sha: str, pr: int | None) -> tuple[Report, list[str]]:
    """One report from the parts; a part without a report is an `error` kernel (its job crashed or timed out)."""
    kernels: dict[str, KernelReport] = {}
    agents, unseen = [], []
    environment = None
    for part in parts:
        r = part.report
        if r is None:
            reason = (
                part.problem or f"its matrix job left no report ({part.folder.name}: crashed, cancelled or timed out)"
            )
            kernels[part.kernel] = KernelReport(
                name=part.kernel, domain="unknown", changed=True, verdict="error", reasons=[reason]
            )
            continue
        if (r.base_sha, r.head_sha) != (base_sha, head_sha):
            raise InputError(
                f"{part.folder}: the part reviewed {r.base_sha[:10]}...{r.head_sha[:10]}, "
                f"not {base_sha[:10]}...{head_sha[:10]}"
            )
        for k in r.kernels:
            if k.name in kernels:
                raise InputError(f"{part.folder}: kernel {k.name} is in two parts")
            kernels[k.name] = k
        agents.extend(r.agents)
        unseen.extend(part.unseen)
        environment = environment or r.environment
    if environment is None:
        environment = detect()
    ordered = [kernels[name] for name in sorted(kernels)]
    report = Report(
        base_sha=base_sha,
        head_sha=head_sha,
        pr=pr,
        verdict=overall(ordered),
        kernels=ordered,
        agents=agents,
        agent=aggregate_agents(agents),
        environment=environment,
        created_at=datetime.now(UTC).isoformat(timespec="seconds"),
        opgate_version=__version__,
        coverage=next((p.report.coverage for p in parts if p.report and p.report.coverage), None),
    )
    return report, list(dict.fromkeys(unseen))
