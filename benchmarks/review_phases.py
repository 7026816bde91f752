"""Where an A/A review's time goes: a comment-only change to every example kernel, reviewed in-process, by phase.

Builds a scratch repository holding the project's kernels (from --tree, default this checkout), commits a comment
at the top of each kernel's CPU body, then runs the review (`bot.review.flow.Reviewer`, offline) and prints, per
phase of the review (git, checkout, resources, build, run: the judge's timing and callgrind's counts), its wall
seconds and the CPU seconds of opgate and the unsandboxed children it waited for (a sandbox's processes — the
builds, the workers, valgrind — are reaped in bubblewrap's pid namespace and missing from it; the workers' own CPU
seconds, from the judge's accounting, are printed apart) — CPU seconds barely move with other processes' load.
Then per case: how the judge's sequential rule stopped, its process pairs, the judge's own phases and whether
callgrind was asked. Usage:

  .venv/bin/python benchmarks/review_phases.py [--tree DIR] [--build-dir DIR] [--runs 1] [--change comment|no-op]

`--tree DIR` reviews with DIR's opgate (another worktree, e.g. main, for a before/after in one run); `--build-dir`
keeps the build cache between runs (default: a fresh one per run, every build cold).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COMMENT = "// A/A: a comment, no behaviour change\n"
NO_OP = '\nextern "C" int opgate_aa_marker() { return 1; }\n'  # other bytes, the same behaviour: timed


def cpu_seconds() -> float:
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


class CpuPhases(dict[str, float]):
    """bot.phases.Phases with CPU seconds beside the wall seconds (works with an opgate that has no `cpu`)."""

    def __init__(self) -> None:
        super().__init__()
        self.cpu: dict[str, float] = {}

    @contextlib.contextmanager
    def timed(self, name: str) -> Iterator[None]:
        started, cpu = time.perf_counter(), cpu_seconds()
        try:
            yield
        finally:
            self.add(name, time.perf_counter() - started)
            self.cpu[name] = self.cpu.get(name, 0.0) + cpu_seconds() - cpu

    def add(self, name: str, seconds: float) -> None:
        self[name] = self.get(name, 0.0) + seconds


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


def scratch_repo(tree: Path, tmp: Path, change: str) -> tuple[Path, str, str, list[str]]:
    """The kernels of `tree` at base; head: a comment at the top of each kernel's CPU body (`no-op`: an unused
    function at its end)."""
    import tomllib

    repo = tmp / "repo"
    shutil.copytree(tree / "kernels", repo / "kernels", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(tree / "pyproject.toml", repo / "pyproject.toml")
    git(tmp, "init", "-q", "-b", "main", str(repo))
    ident = ("-c", "user.name=aa", "-c", "user.email=aa@localhost")
    git(repo, "add", "-A")
    git(repo, *ident, "commit", "-qm", "base")
    base = git(repo, "rev-parse", "HEAD")
    names = sorted(p.parent.name for p in (repo / "kernels").glob("*/kernel.toml"))
    for name in names:
        manifest = tomllib.loads((repo / "kernels" / name / "kernel.toml").read_text())
        body = next(s for s in manifest["build"]["cpu"]["sources"] if not s.startswith("binding"))
        source = repo / "kernels" / name / body
        text = source.read_text()
        source.write_text(COMMENT + text if change == "comment" else text + NO_OP)
    git(repo, *ident, "commit", "-qam", "comment only")
    return repo, base, git(repo, "rev-parse", "HEAD"), names


def review(tree: Path, build_dir: Path | None, tmp: Path, change: str) -> None:
    sys.path.insert(0, str(tree))
    load_config = importlib.import_module("bot.config.repo").load_config
    load_settings = importlib.import_module("bot.config.settings").load_settings
    open_ledger = importlib.import_module("bot.ledger").open_ledger
    flow = importlib.import_module("bot.review.flow")
    repo, base, head, names = scratch_repo(tree, tmp, change)
    env = {"OPGATE_DATABASE_URL": str(tmp / "ledger.sqlite"), "OPGATE_BUILD_DIR": str(build_dir or tmp / "build")}
    settings = load_settings(env, load_config(repo))
    ledger = open_ledger(settings.database_url, create=True)
    asked = {"repo": repo, "base": base, "head": head, "out": tmp / "out", "offline": True}
    started, cpu = time.perf_counter(), cpu_seconds()
    load = os.getloadavg()[0]
    if importlib.util.find_spec("bot.review.host") is None:  # a tree before the host was passed in
        reviewer = flow.Reviewer(flow.ReviewRequest(**asked), settings, ledger)
    else:
        request = importlib.import_module("bot.review.request").ReviewRequest(**asked)
        reviewer = flow.Reviewer(request, settings, ledger, importlib.import_module("bot.review.host").here(settings))
    reviewer.phases = phases = CpuPhases()
    report = reviewer.run()
    wall, cpu = time.perf_counter() - started, cpu_seconds() - cpu
    ledger.close()
    print(f"# {len(names)} kernels ({', '.join(names)}), {change} change, opgate from {tree}")
    print(f"# load average {load:.1f} at the start, {os.getloadavg()[0]:.1f} at the end; {os.cpu_count()} cores")
    workers = sum(
        use.timed_cpu_s + use.untimed_cpu_s for k in report.kernels for c in k.cases for use in c.sandbox_cpu.values()
    )
    timed_wall = sum(use.timed_wall_s for k in report.kernels for c in k.cases for use in c.sandbox_cpu.values())
    print(f"# review: {wall:.1f} s wall, {cpu:.1f} s CPU (unsandboxed); verdict {report.verdict}")
    print(f"# the workers' timed calls: {timed_wall:.1f} s wall, their sandboxes {workers:.1f} s CPU in all")
    print("| phase | wall s | CPU s |")
    print("|---|---|---|")
    for phase, seconds in phases.items():
        print(f"| {phase} | {seconds:.1f} | {phases.cpu.get(phase, 0.0):.1f} |")
    print("| kernel | case | verdict | stop | pairs | p50 ms | calls a block | judge s (top phases) | callgrind |")
    print("|---|---|---|---|---|---|---|---|---|")
    for k in report.kernels:
        builds = [b for b in (k.build, k.base_build) if b is not None]
        cached = ", ".join(f"{'cached' if b.cached else f'{b.seconds:.0f} s'}" for b in builds)
        print(f"| {k.name} ({k.verdict}; builds head, base: {cached}) | | | | | | | | |")
        for c in k.cases:
            if c.verdict == "skipped":
                continue
            top = sorted(c.judge_seconds.items(), key=lambda kv: -kv[1])[:4]
            judge = ", ".join(f"{n} {s:.1f}" for n, s in top)
            sim = "yes" if c.simulated is not None else "no"
            p50 = f"{c.p50_ms:.3f}" if c.p50_ms is not None else "—"
            calls = getattr(c, "calls_per_sample", None) or "—"  # a tree before it was reported: —
            print(f"| | {c.name} | {c.verdict} | {c.stop_reason} | {c.processes} | {p50} | {calls} | {judge} | {sim} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", type=Path, default=ROOT, help="the opgate checkout to review with")
    parser.add_argument("--build-dir", type=Path, help="a build cache kept between runs (default: fresh)")
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--change", choices=("comment", "no-op"), default="comment", help="head's change")
    args = parser.parse_args()
    for _ in range(args.runs):
        with tempfile.TemporaryDirectory(prefix="opgate-phases-") as tmp:
            review(args.tree.resolve(), args.build_dir, Path(tmp), args.change)


if __name__ == "__main__":
    main()
