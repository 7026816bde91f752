"""How long does `opgate history bisect` take, and how many probes? The 16-commit main of tests/test_bisect_e2e.py
(benchmarks/scratch.py `bisect_repo`: commit 11 makes square_512 2x or 8 % slower, commit 5 changes a comment,
commit 8 does not build), bisected from commit 0 to commit 15 with the real CLI, N times.

Each run has a fresh ledger; the build cache is shared (the first run compiles the good build's binding, about a
minute; later runs only the changed bodies). Prints per run the verdict, the commit named, probes, measurements,
wall time, and the median. Usage:

  .venv/bin/python benchmarks/bisect16.py [--runs 3] [--slower 2x|8pct] [--build-dir DIR] [--quick]

--quick: the test's settings (OPGATE_MEASURE_MAX_SECONDS=0.5, 5 processes per side, and, as every test, judged
however busy the machine is: OPGATE_NOISE_LIMIT_CORES=64); default: opgate's defaults (a busy runner decides nothing,
so on a shared machine the bisection stops undecided at the bad end and says so).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from scratch import ROOT, SLOW_CASE, bisect_repo


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--slower", choices=["2x", "8pct"], default="2x")
    p.add_argument("--build-dir", type=Path, help="build cache (default: a fresh temporary one)")
    p.add_argument("--quick", action="store_true", help="the test's short measurement settings")
    args = p.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        shas = bisect_repo(work / "repo", args.slower)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OPGATE_", "GITHUB_", "TAOTOKEN_"))}
        env["OPGATE_BUILD_DIR"] = str(args.build_dir or work / "builds")
        if args.quick:
            env.update(OPGATE_MEASURE_MAX_SECONDS="0.5", OPGATE_MEASURE_MIN_PROCESSES="5")
            env["OPGATE_NOISE_LIMIT_CORES"] = "64"
        print(f"main: 16 commits, commit 11 makes {SLOW_CASE} {args.slower} slower; cpu: {os.cpu_count()} cores")
        print(f"{'run':>3}  {'verdict':<9}  {'named':<12}  {'probes':>6}  {'measurements':>12}  {'wall s':>7}")
        walls = []
        for i in range(args.runs):
            env["OPGATE_DATABASE_URL"] = str(work / f"ledger-{i}.sqlite")
            out = work / f"out-{i}"
            argv = [sys.executable, "-m", "bot", "--json", "history", "bisect", "--repo", str(work / "repo"),
                    "--kernel", "deepgemm_tile", "--case", SLOW_CASE, "--good", shas[0], "--bad", shas[15],
                    "--out", str(out)]  # fmt: skip
            start = time.monotonic()
            proc = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=ROOT)
            wall = time.monotonic() - start
            if proc.returncode not in (0, 1):
                print(proc.stderr, file=sys.stderr)
                return proc.returncode
            data = json.loads(proc.stdout)
            named = shas.index(data["first_bad"]) if data["first_bad"] in shas else None
            walls.append(wall)
            label = f"commit {named}" if named is not None else "—"
            print(f"{i:>3}  {data['verdict']:<9}  {label:<12}  {data['probes']:>6}  {data['measurements']:>12}  "
                  f"{wall:>7.0f}")  # fmt: skip
            report = json.loads((out / "bisect.json").read_text())
            for line in report["undecided"] + report["reasons"]:
                print(f"     {line[:160]}")
        print(f"median wall time: {statistics.median(walls):.0f} s over {len(walls)} run(s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
