"""What isolation costs: the same review with the sandbox and without it, and where a case's time goes.

Reviews one change (default: the README demo's patch, deepgemm_tile tile_n 128 → 256) N times with
bubblewrap and N times with `OPGATE_SANDBOX=none`, alternating, on a warm build cache, and prints:
  - the review's wall time each way (median) and the difference: the sandbox's cost per review;
  - from report.json's `judge_seconds`, per case: zygote start (python + torch), worker spawn, input
    files loaded, outputs fetched, worker exits — the sandbox and IPC share of the case — against the
    timed calls, warm-ups, input drawing and the reference.
Usage:

  .venv/bin/python benchmarks/sandbox_overhead.py [--runs 5] [--patch examples/changes/deepgemm_tile_tile_n_256.patch]
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

IPC = ("start", "spawn", "load", "fetch", "exit")


def review(repo: Path, out: Path, sandbox: bool) -> tuple[float, dict]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TAOTOKEN_", "GITHUB_"))}
    out.mkdir(parents=True, exist_ok=True)  # the ledger's folder must exist (opgate never creates one by itself)
    env["OPGATE_DATABASE_URL"] = str(out / "ledger.sqlite")
    env["OPGATE_SANDBOX"] = "" if sandbox else "none"
    started = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "bot", "-q", "review", "--repo", str(repo), "--base", "HEAD~1", "--head", "HEAD",
         "--offline", "--out", str(out)],
        capture_output=True, text=True, env=env,
    )  # fmt: skip
    seconds = time.perf_counter() - started
    if proc.returncode not in (0, 1):
        raise SystemExit(proc.stderr[-2000:])
    return seconds, json.loads((out / "report.json").read_text())


def phases(report: dict) -> list[dict[str, float]]:
    return [c["judge_seconds"] for k in report["kernels"] for c in k["cases"] if c.get("judge_seconds")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--patch", default="examples/changes/deepgemm_tile_tile_n_256.patch")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="opgate-overhead-") as tmp_name:
        tmp = Path(tmp_name)
        repo = tmp / "repo"
        kernel_repo(repo)
        git(repo, "apply", str(ROOT / args.patch))
        commit_all(repo, "change")
        review(repo, tmp / "warm", True)  # builds once: every measured run below finds the cache warm
        walls: dict[bool, list[float]] = {True: [], False: []}
        cases: dict[bool, list[dict[str, float]]] = {True: [], False: []}
        for i in range(args.runs):
            for sandbox in (True, False) if i % 2 == 0 else (False, True):
                seconds, report = review(repo, tmp / f"run-{i}-{sandbox}", sandbox)
                walls[sandbox].append(seconds)
                cases[sandbox] += phases(report)
    commit = git(ROOT, "rev-parse", "--short", "HEAD")
    print(f"# {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, commit {commit}, {platform.node()}, {os.cpu_count()} cores")
    print(f"# {args.patch}, {args.runs} reviews each way, warm build cache")
    print("| isolation | review wall (median s) | per case: start | spawn | load | fetch | exit | sandbox+IPC share "
          "| timed | warm-up | draw | reference | case total |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for sandbox in (True, False):
        per = cases[sandbox]

        def med(key: str, per: list[dict[str, float]] = per) -> float:
            return statistics.median(p.get(key, 0.0) for p in per)

        ipc = statistics.median(sum(p.get(k, 0.0) for k in IPC) / p["total"] for p in per)
        print(
            f"| {'bwrap' if sandbox else 'none'} | {statistics.median(walls[sandbox]):.1f} | "
            + " | ".join(f"{med(k):.2f}" for k in IPC)
            + f" | {ipc * 100:.0f}% | "
            + " | ".join(f"{med(k):.2f}" for k in ("timed", "warmup", "draw", "reference", "total"))
            + " |"
        )
    extra = statistics.median(walls[True]) - statistics.median(walls[False])
    print(f"# the sandbox adds {extra:+.1f} s per review ({extra / statistics.median(walls[True]) * 100:+.0f}%)")


if __name__ == "__main__":
    main()
