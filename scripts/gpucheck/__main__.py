"""`python -m scripts.gpucheck [--quick] [--budget S] [--steps A,B] [--out DIR] [--list]`: scripts/gpu-check.sh."""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tarfile
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from scripts.gpucheck.render import render_json, render_markdown
from scripts.gpucheck.steps import Result, Runner, Step, one_line

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_BUDGET_S = 450.0  # 7.5 minutes of steps: the whole command fits the 8 minutes a GPU lease allows
QUICK_BUDGET_S = 300.0
MARKER = ".gpu-check"  # marks a working folder this command may clear
MAX_OUT_FILES = 8  # a device call brings back at most 8 files from $OUT
# Cheaper measurement for the reviews run here: 2 fresh processes per side, 2 blocks each (docs/configuration.md).
REVIEW_ENV = {
    "OPGATE_MEASURE_MIN_BLOCKS": "2",
    "OPGATE_MEASURE_MIN_PROCESSES": "2",
    "OPGATE_MEASURE_MAX_PROCESSES": "2",
    "OPGATE_MEASURE_MAX_SECONDS": "1",
    "OPGATE_CASE_TIMEOUT_S": "120",
}


# name, what it proves, command (a module and its arguments), typical seconds, limit seconds, in --quick
STEPS: tuple[tuple[str, str, tuple[str, ...], float, float, bool], ...] = (
    ("machine", "a CUDA GPU that torch sees, nvcc, ncu; their versions",
     ("scripts.gpucheck.tasks", "machine"), 5, 90, True),
    ("setup", "opgate and its dependencies install with no network (wheels from .whl/)",
     ("scripts.gpucheck.tasks", "setup"), 20, 240, True),
    ("sandbox", "bubblewrap starts with /dev/nvidia* and /sys bound, and CUDA works inside it",
     ("scripts.gpucheck.gpu_tasks", "sandbox"), 10, 90, True),
    ("build", "each kernel's CUDA and CPU extension builds with ninja in the sandbox (seconds per build)",
     ("scripts.gpucheck.gpu_tasks", "build"), 60, 420, True),
    ("cases", "every cuda case of every kernel runs in the judge and matches its reference",
     ("benchmarks.kernels_vs_torch", "--mode", "check"), 30, 300, True),
    ("bench", "each kernel against its torch baseline, timed by opgate's judge (TFLOP/s, GB/s, % of torch)",
     ("benchmarks.kernels_vs_torch", "--mode", "time"), 90, 240, True),
    ("ncu", "Nsight Compute: occupancy, DRAM throughput, registers, spills of each headline case",
     ("benchmarks.kernels_vs_torch", "--mode", "ncu"), 30, 180, False),
    ("review", "opgate review A/A on the GPU: a comment added to each kernel's .cu",
     ("scripts.gpucheck.gpu_tasks", "review"), 90, 420, False),
    ("example", "opgate review of examples/changes/*.patch on the GPU",
     ("scripts.gpucheck.gpu_tasks", "example"), 60, 300, False),
    ("pytest", "pytest -m gpu (each kernel's review through the CLI, occupancy against the CUDA runtime)",
     ("scripts.gpucheck.gpu_tasks", "pytest"), 240, 600, False),
)  # fmt: skip


def plan(python: str, quick: bool) -> list[Step]:
    """Every step, most telling first: what a budget cuts off is at the end."""
    steps = []
    for name, title, command, estimate, limit, in_quick in STEPS:
        argv = (python, "-m", *command, *(("--quick",) if quick and name == "bench" else ()))
        needs = () if name in ("machine", "setup") else ("machine", "setup")
        env = REVIEW_ENV if name in ("review", "example") else {}
        steps.append(Step(name, title, argv, estimate, limit, needs, in_quick, env))
    return steps


def select(steps: Sequence[Step], quick: bool, only: Sequence[str]) -> tuple[list[Step], dict[str, str]]:
    """(steps to run, name -> why a step is left out); --steps pulls in what the named steps need."""
    known = {s.name: s for s in steps}
    unknown = [name for name in only if name not in known]
    if unknown:
        raise ValueError(f"unknown step {', '.join(unknown)} (steps: {', '.join(known)})")
    wanted: set[str] = set()
    if only:
        stack = list(only)
        while stack:
            name = stack.pop()
            if name not in wanted:
                wanted.add(name)
                stack += known[name].needs
    left_out = {}
    for s in steps:
        if only and s.name not in wanted:
            left_out[s.name] = "not asked for (--steps)"
        elif not only and quick and not s.quick:
            left_out[s.name] = "not part of --quick"
    return [s for s in steps if s.name not in left_out], left_out


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="scripts/gpu-check.sh",
        description="Prove opgate's GPU path on a GPU machine: every step passed, failed or skipped, and why, "
        "in gpu-check.md. A failing step never stops the ones after it.",
    )
    p.add_argument("--quick", action="store_true", help="machine, setup, sandbox, build, cases and a short benchmark")
    p.add_argument(
        "--budget", type=float, help=f"seconds for all steps (default {DEFAULT_BUDGET_S:g}; --quick {QUICK_BUDGET_S:g})"
    )
    p.add_argument("--steps", default="", help="only these steps (comma-separated) and the steps they need")
    p.add_argument("--out", type=Path, help="where the summary goes (default: $OUT if set, else reports/gpu-check)")
    p.add_argument("--work", type=Path, default=ROOT / "reports" / "gpu-check", help="working folder (logs, builds)")
    p.add_argument("--list", action="store_true", help="print the steps this run would take, and exit")
    args = p.parse_args(argv)
    if args.budget is not None and not 0 < args.budget <= 3600:
        p.error(f"--budget must be between 0 and 3600 seconds, got {args.budget:g}")
    args.only = [s.strip() for s in args.steps.split(",") if s.strip()]
    return args


def commit() -> str:
    try:
        out = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    except OSError:
        return "unknown (no git)"
    return out.stdout.strip() or "unknown (no .git here)"


def collect(work: Path, out: Path, results: Sequence[Result]) -> list[Path]:
    """Copy the summary into `out`; where `out` is not the work folder, the rest (files under 8 MiB) in one tarball."""
    if out.resolve() == work.resolve():
        return [work / "gpu-check.md", work / "gpu-check.json"]
    out.mkdir(parents=True, exist_ok=True)
    copied: list[Path] = []
    for name in ("gpu-check.md", "gpu-check.json", "kernels_vs_torch.md", "kernels_vs_torch.json"):
        if (work / name).is_file() and len(copied) < MAX_OUT_FILES - 1:
            copied.append(Path(shutil.copy(work / name, out / name)))
    archive = out / "gpu-check-logs.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for path in sorted(work.rglob("*")):
            rel = path.relative_to(work)
            if path.is_file() and rel.parts[0] not in ("build", "scratch") and path.stat().st_size < 8 << 20:
                tar.add(path, arcname=str(Path("gpu-check") / rel))
    return [*copied, archive]


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    python = sys.executable
    try:
        _, left_out = select(plan(python, args.quick), args.quick, args.only)
    except ValueError as exc:
        print(f"gpu-check: error: {exc}", file=sys.stderr)
        return 2
    budget = args.budget if args.budget is not None else (QUICK_BUDGET_S if args.quick else DEFAULT_BUDGET_S)
    if args.list:
        for s in plan(python, args.quick):
            state = (
                f"left out: {left_out[s.name]}"
                if s.name in left_out
                else f"~{s.estimate_s:.0f} s, at most {s.limit_s:.0f} s"
            )
            print(f"{s.name:8s} {state}  — {s.title}")
        print(f"budget {budget:.0f} s")
        return 0
    work = args.work.resolve()
    out = args.out or (Path(os.environ["OUT"]) if os.environ.get("OUT") else work)
    if work.exists() and any(work.iterdir()) and not (work / MARKER).exists():
        print(f"gpu-check: error: refusing to clear {work}: not a folder gpu-check made (no {MARKER})", file=sys.stderr)
        return 2
    if work.exists():
        for child in work.iterdir():  # a fresh summary each run; the build cache is kept
            if child.name not in ("build", MARKER):
                shutil.rmtree(child) if child.is_dir() else child.unlink()
    work.mkdir(parents=True, exist_ok=True)
    (work / MARKER).touch()
    env = {**os.environ, "OPGATE_BUILD_DIR": str(work / "build"), "OPGATE_DATABASE_URL": str(work / "ledger.sqlite")}
    env["GPU_CHECK_QUICK"] = "1" if args.quick else "0"
    runner = Runner(ROOT, work, budget, env=env, echo=lambda line: print(line, flush=True))
    started = datetime.now(UTC)
    for s in plan(python, args.quick):
        if s.name in left_out:
            runner.skip(s, left_out[s.name])
        else:
            runner.run(s)
    results = list(runner.results.values())
    machine = runner.results.get("machine")
    meta = {
        "started": started.strftime("%Y-%m-%d %H:%M UTC"),
        "commit": commit(),
        "mode": "quick" if args.quick else ("steps " + ",".join(args.only) if args.only else "full"),
        "budget_s": budget,
        "elapsed_s": round(time.monotonic() - runner.started, 1),
        "machine": machine.details if machine else {},
    }
    (work / "gpu-check.md").write_text(render_markdown(results, meta))
    (work / "gpu-check.json").write_text(render_json(results, meta))
    try:
        written = collect(work, out, results)
    except OSError as exc:
        print(f"gpu-check: could not write into {out}: {one_line(str(exc))}", file=sys.stderr)
        written = [work / "gpu-check.md"]
    print((work / "gpu-check.md").read_text())
    print("gpu-check: wrote " + ", ".join(str(p) for p in written))
    return 1 if any(r.status == "failed" for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
