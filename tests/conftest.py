"""Shared fixtures: scratch git repositories holding real kernels, and the CLI run as a process."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from bot.config.manifest import KERNELS_DIR, MANIFEST_NAME, Kernel, find_manifests, load_kernel
from bot.config.repo import RepoConfig, load_config
from bot.models.finding import Gate, Outcome
from bot.models.report import CaseReport

ROOT = Path(__file__).resolve().parent.parent
KERNELS = ROOT / "kernels"
SUMMARY_TASK = "ci_summary_task.json"  # the ci_summary domain's task file ([tool.opgate.domains.ci_summary] task)
# No precompiled torch header in the tests (builds in this process and the CLI's): a session's build cache compiles
# about three bindings of a flag set, and the header costs two (benchmarks/README.md, "One precompiled torch
# header"); tests/test_pch.py turns it on where it tests it. OPGATE_PCH in the environment still wins.
os.environ.setdefault("OPGATE_PCH", "off")


def discover(root: Path, config: RepoConfig | None = None) -> dict[str, Kernel]:
    """Every kernel the configuration's manifest globs find under `root`, by name (a load error raises)."""
    globs = config.manifests if config is not None else [f"{KERNELS_DIR}/*/{MANIFEST_NAME}"]
    return {
        name: load_kernel(root / folder, config=config, path=folder)
        for name, folder in find_manifests(root, globs).items()
    }


def repo_config_toml() -> str:
    """This repository's [tool.opgate] tables (pyproject.toml) as an opgate.toml for a scratch repository."""
    text = (ROOT / "pyproject.toml").read_text()
    section = text[text.index("[tool.opgate]") : text.index("[tool.ruff]")]
    return section.replace("[tool.opgate]\n", "").replace("[tool.opgate.", "[")


REPO_CONFIG = load_config(ROOT)


def only_latency_can_fail(report: CaseReport) -> bool:
    """An untimed test runs beside another test's builds, so its latency verdict is the load's (a same-binary
    comparison failed there: tests/test_redteam.py, fresh-clone CI 2026-12-07): what it may assert is that nothing but
    the latency could fail the case — no error, every failing finding a performance one."""
    failing = [f for f in report.findings if f.outcome == Outcome.fail]
    return report.verdict != "error" and all(f.gate == Gate.performance for f in failing)


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


@dataclass
class KernelRepo:
    """A throwaway git repository with copies of the project's kernels; `base` is its first commit."""

    path: Path
    base: str

    def edit(self, relpath: str, old: str, new: str) -> None:
        target = self.path / relpath
        text = target.read_text()
        assert old in text, f"{old!r} not found in {relpath}"
        target.write_text(text.replace(old, new, 1))

    def write(self, relpath: str, text: str) -> None:
        target = self.path / relpath
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)

    def commit(self, message: str = "change") -> str:
        git(self.path, "add", "-A")
        git(self.path, "commit", "-q", "-m", message)
        return git(self.path, "rev-parse", "HEAD")


@pytest.fixture
def kernel_repo(tmp_path: Path) -> KernelRepo:
    """A repository holding kernels/deepgemm_tile (the spine's kernel) and a README."""
    return make_repo(tmp_path / "repo", ["deepgemm_tile"])


CHECK_REPO = Path(__file__).parent / "fixtures" / "check_repo"


def check_repo(path: Path) -> Path:
    """tests/fixtures/check_repo (the vec_scale kernel) committed as a scratch repository at `path`."""
    shutil.copytree(CHECK_REPO, path, dirs_exist_ok=True)
    git(path, "init", "-q", "-b", "main")
    git(path, "config", "user.email", "test@opgate.local")
    git(path, "config", "user.name", "opgate tests")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "vec_scale")
    return path


def make_repo(path: Path, kernels: list[str]) -> KernelRepo:
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    git(path, "config", "user.email", "test@opgate.local")
    git(path, "config", "user.name", "opgate tests")
    for name in kernels:
        shutil.copytree(KERNELS / name, path / "kernels" / name, ignore=shutil.ignore_patterns("__pycache__"))
    (path / "README.md").write_text("scratch repository for opgate tests\n")
    (path / "opgate.toml").write_text(repo_config_toml())
    shutil.copy(ROOT / SUMMARY_TASK, path / SUMMARY_TASK)
    repo = KernelRepo(path=path, base="")
    repo.base = repo.commit("base")
    return repo


@pytest.hookimpl(trylast=True)  # after `-m` deselected what this run leaves out
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The files with the most slow tests first, each file's tests together and in order: scripts/test.sh's
    parallel run (`--dist loadfile --no-loadscope-reorder`) then hands the longest files out first and the fast
    ones fill in at the end, so neither worker is left finishing a long file alone."""
    slow: dict[Path, int] = {}
    for item in items:
        if item.get_closest_marker("slow") is not None:
            slow[item.path] = slow.get(item.path, 0) + 1
    items.sort(key=lambda item: -slow.get(item.path, 0))  # stable: every other order is kept


@pytest.fixture(scope="session")
def build_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One build cache for the whole session: an unchanged base is compiled once. Under OPGATE_TEST_BUILD_CACHE
    (scripts/test.sh sets it) the cache outlives the session: each pytest-xdist worker keeps its own, never two
    at once in one, and the timed run after the parallel one reuses the first worker's."""
    shared = os.environ.get("OPGATE_TEST_BUILD_CACHE")
    if shared:
        worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
        return Path(shared) / worker / "opgate" / "build"  # laid out like the default ~/.cache/opgate/build
    return tmp_path_factory.getbasetemp() / "opgate" / "build"


@dataclass
class Run:
    code: int
    stdout: str
    stderr: str
    out: Path

    @property
    def report(self) -> dict:
        return json.loads((self.out / "report.json").read_text())

    @property
    def comment(self) -> str:
        """comment.md, checked: headline first, no dash-only row, each reason once, under GitHub's limit."""
        from bot.models.report import Report
        from tests.comment_checks import structure_problems

        text = (self.out / "comment.md").read_text()
        assert structure_problems(text, Report.model_validate_json((self.out / "report.json").read_text())) == []
        return text

    def kernel(self, name: str) -> dict:
        return next(k for k in self.report["kernels"] if k["name"] == name)


@pytest.fixture
def opgate(tmp_path: Path, build_dir: Path):
    """Run the real CLI in a child process with a test environment; returns a Run."""

    def run(*args: str, env: dict[str, str] | None = None, timeout: float = 900) -> Run:
        out = tmp_path / "out"
        if not (tmp_path / "opgate.toml").exists():  # the commands run here: this repository's domains and budgets
            (tmp_path / "opgate.toml").write_text(repo_config_toml())
            shutil.copy(ROOT / SUMMARY_TASK, tmp_path / SUMMARY_TASK)
        full_env = {k: v for k, v in os.environ.items() if not k.startswith(("TAOTOKEN_", "OPGATE_", "GITHUB_"))}
        full_env.update(
            OPGATE_BUILD_DIR=str(build_dir),
            OPGATE_DATABASE_URL=str(tmp_path / "ledger.sqlite"),
            OPGATE_MEASURE_MAX_SECONDS="0.5",
            # Tests assert verdicts, not the machine's quiet: a busy test machine must not double the timing caps
            # (tests/test_judge.py proves the busy-runner rule with its own load).
            OPGATE_NOISE_LIMIT_CORES="64",
            # The default, said here so a developer's own setting does not count every review's cases under valgrind
            # (a minute each on this machine): tests/test_simcost.py proves the simulated cost on its own.
            OPGATE_SIMULATE="off",
            OPGATE_CASE_TIMEOUT_S="60",
            OPGATE_PCH=os.environ["OPGATE_PCH"],
        )
        full_env.update(env or {})
        argv = [sys.executable, "-m", "bot", *args]
        if args and args[0] == "review" and "--out" not in args:
            argv += ["--out", str(out)]
        proc = subprocess.run(argv, capture_output=True, text=True, env=full_env, cwd=tmp_path, timeout=timeout)
        return Run(proc.returncode, proc.stdout, proc.stderr, out)

    return run
