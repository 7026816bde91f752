"""What the round-two judge costs (issue 24): the same review with this checkout and with another one, alternating.

This checkout commits every CPU batch's outputs (the sandbox frozen at `done`, one call of every block
checked from the worker's memory), confines every worker with a seccomp filter and looks for renames;
`--against` is an opgate checkout without them (e.g. a worktree of main). Both review one change (default:
the README demo's patch) N times each, alternating, on their own warm build caches, and it prints:
  - the review's wall time each way (median) and the difference: the cost per review;
  - per case, from report.json's `judge_seconds`: the case's wall time, the reference (every block is now
    checked, so the reference runs for every block), the freeze-and-read of outputs (`capture`), the
    output fetches (`fetch`), worker spawns (the filter is installed there) and the timed calls;
  - the checked blocks per case (spot checks) and the fresh processes per side, each way.
With `--processes N` both judges run exactly N process pairs per case (OPGATE_MEASURE_MIN/MAX_PROCESSES), so
they do the same work and the per-case difference is the cost of the checks alone; without it, each stops
as a review does (the cost a user sees, stopping rule included).
Usage:

  git worktree add --detach /tmp/opgate-main main
  .venv/bin/python benchmarks/judge_overhead.py --against /tmp/opgate-main [--runs 5] [--processes 3]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from scratch import ROOT, commit_all, git, kernel_repo

KEYS = ("total", "reference", "capture", "fetch", "spawn", "timed", "warmup", "start")
MEASURE: dict[str, str] = {}  # --processes: the same number of process pairs for both judges


def review(repo: Path, out: Path, code: Path, cache: Path) -> tuple[float, dict]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TAOTOKEN_", "GITHUB_", "OPGATE_"))}
    out.mkdir(parents=True, exist_ok=True)
    env.update(OPGATE_DATABASE_URL=str(out / "ledger.sqlite"), OPGATE_BUILD_DIR=str(cache), PYTHONPATH=str(code))
    env.update(MEASURE)
    started = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "bot", "-q", "review", "--repo", str(repo), "--base", "HEAD~1", "--head", "HEAD",
         "--offline", "--out", str(out)],
        capture_output=True, text=True, env=env, cwd=out,
    )  # fmt: skip
    seconds = time.perf_counter() - started
    if proc.returncode not in (0, 1):
        raise SystemExit(proc.stderr[-2000:])
    return seconds, json.loads((out / "report.json").read_text())


def cases(report: dict) -> list[dict]:
    return [c for k in report["kernels"] for c in k["cases"] if c.get("judge_seconds")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", type=Path, required=True, help="another opgate checkout (e.g. main)")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--patch", default="examples/changes/deepgemm_tile_tile_n_256.patch")
    parser.add_argument("--processes", type=int, default=0, help="exactly this many process pairs per case")
    args = parser.parse_args()
    if args.processes:
        n = str(args.processes)
        MEASURE.update(OPGATE_MEASURE_MIN_PROCESSES=n, OPGATE_MEASURE_MAX_PROCESSES=n, OPGATE_MEASURE_MAX_SECONDS="600")
    sides = {"this": ROOT, "against": args.against.resolve()}
    with tempfile.TemporaryDirectory(prefix="opgate-judge-overhead-") as tmp_name:
        tmp = Path(tmp_name)
        repo = tmp / "repo"
        kernel_repo(repo)
        git(repo, "apply", str(ROOT / args.patch))
        commit_all(repo, "change")
        for label, code in sides.items():  # builds once per side: every measured run finds its cache warm
            review(repo, tmp / f"warm-{label}", code, tmp / f"cache-{label}")
        walls: dict[str, list[float]] = {label: [] for label in sides}
        per: dict[str, list[dict]] = {label: [] for label in sides}
        for i in range(args.runs):
            for label in list(sides) if i % 2 == 0 else list(sides)[::-1]:
                seconds, report = review(repo, tmp / f"run-{i}-{label}", sides[label], tmp / f"cache-{label}")
                walls[label].append(seconds)
                per[label] += cases(report)
    commit = git(ROOT, "rev-parse", "--short", "HEAD")
    against = git(sides["against"], "rev-parse", "--short", "HEAD")
    print(f"# {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, this {commit} against {against}, {platform.node()}, "
          f"{os.cpu_count()} cores")  # fmt: skip
    pairs = f"{args.processes} process pairs per case" if args.processes else "the review's own stopping rule"
    print(f"# {args.patch}, {args.runs} reviews each way, warm build caches, {pairs}; per case: medians of "
          "judge_seconds (s)")  # fmt: skip
    columns = ["judge", "review wall (median s)", "case total", *KEYS[1:], "checked blocks", "processes"]
    print("| " + " | ".join(columns) + " |")
    print("|" + "---|" * len(columns))
    for label in sides:
        rows = per[label]

        def med(key: str, rows: list[dict] = rows) -> float:
            return statistics.median(c["judge_seconds"].get(key, 0.0) for c in rows)

        spots = statistics.median(c.get("spot_checks") or 0 for c in rows)
        processes = statistics.median(c.get("processes") or 0 for c in rows)
        print(
            f"| {label} | {statistics.median(walls[label]):.1f} | "
            + " | ".join(f"{med(k):.3f}" for k in KEYS)
            + f" | {spots:g} | {processes:g} |"
        )
    extra = statistics.median(walls["this"]) - statistics.median(walls["against"])
    print(f"# this judge adds {extra:+.1f} s per review ({extra / statistics.median(walls['against']) * 100:+.1f}%)")


if __name__ == "__main__":
    main()
