"""Work hidden on a second thread (issue 37, 3), reviewed N times with the real CLI: is it failed on CPU time?

The head is deepgemm_tile's CPU body with a quarter of the rows on a helper std::thread that computes them twice (25 %
more work beside the main thread; tests/redteam.py `TWO_THREADS`, the red-team test's body), or with `--body issue`
the issue's body (12 % more work on the main thread, `TWO_THREADS_ISSUE`): faster on the clock of one call on an idle
machine, more CPU time per call counted over every thread of the sandbox. Each run is `opgate review --offline` of
that change on a scratch repository (the build cached after the first run; the simulated cost off). Prints per run
the exit code, the kernel's verdict and per CPU case its verdict, wall Δ p50 and CPU Δ per call with their 95 %
intervals, how the measurement stopped, the cores other processes kept busy (the judge's own figure) and the
machine's load average; then the tally. Usage:

  .venv/bin/python benchmarks/two_thread.py [--runs 5] [--busy] [--body test|issue]

`--busy` keeps one core busy with a spinning process for the whole run (ended with the script).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.scratch import commit_all, git  # noqa: E402
from tests.redteam import GEMM, TWO_THREADS, TWO_THREADS_ISSUE, body  # noqa: E402

KERNEL = "deepgemm_tile"
BODIES = {"test": TWO_THREADS, "issue": TWO_THREADS_ISSUE}


def _repo(tmp: Path, hostile: str) -> tuple[Path, str, str]:
    """A repository of kernels/deepgemm_tile and pyproject.toml; (path, base, head) with head the two-thread body."""
    repo = tmp / "repo"
    shutil.copytree(ROOT / "kernels" / KERNEL, repo / "kernels" / KERNEL, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", repo / "pyproject.toml")  # [tool.opgate]: domains, budgets
    git(tmp, "init", "-q", "-b", "main", str(repo))
    git(repo, "add", "-A")
    base = commit_all(repo, "base")
    source = repo / GEMM
    source.write_text(body(source.read_text(), replace=hostile))
    return repo, base, commit_all(repo, "a quarter of the rows on a helper thread, more work")


def _interval(delta: float | None, ci: list[float] | None) -> str:
    if delta is None or not ci:
        return "—"
    return f"{delta:+.2f}% [{ci[0]:+.2f}, {ci[1]:+.2f}]"


def _spin() -> subprocess.Popen:
    """One core kept busy until killed (and at most an hour)."""
    code = "import time\nend = time.monotonic() + 3600\nwhile time.monotonic() < end: pass\n"
    return subprocess.Popen([sys.executable, "-c", code])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--busy", action="store_true", help="keep one core busy while it reviews")
    parser.add_argument("--body", choices=sorted(BODIES), default="test", help="the test's body or the issue's")
    args = parser.parse_args()
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    spinner = _spin() if args.busy else None
    tally: dict[str, int] = {}
    try:
        with tempfile.TemporaryDirectory(prefix="opgate-two-thread-") as tmp_name:
            tmp = Path(tmp_name)
            repo, base, head = _repo(tmp, BODIES[args.body])
            env = {k: v for k, v in os.environ.items() if not k.startswith(("TAOTOKEN_", "GITHUB_"))}
            env.update(OPGATE_DATABASE_URL=str(tmp / "ledger.sqlite"), OPGATE_SIMULATE="off")
            print(f"# {os.cpu_count()} cores, load {' '.join(f'{x:.2f}' for x in os.getloadavg())} before the first"
                  f" review{', one core kept busy' if spinner else ''}", flush=True)  # fmt: skip
            for i in range(1, args.runs + 1):
                out = tmp / f"out{i}"
                started = time.perf_counter()
                argv = [sys.executable, "-m", "bot", "-q", "review", "--repo", str(repo), "--base", base]
                argv += ["--head", head, "--offline", "--out", str(out)]
                proc = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=tmp)
                seconds = time.perf_counter() - started
                load = os.getloadavg()[0]
                try:
                    report = json.loads((out / "report.json").read_text())
                except (OSError, ValueError):
                    print(f"run {i}: exit {proc.returncode}, no report.json: {proc.stderr.strip()[-400:]}")
                    tally["no report"] = tally.get("no report", 0) + 1
                    continue
                kernel = next(k for k in report["kernels"] if k["name"] == KERNEL)
                tally[kernel["verdict"]] = tally.get(kernel["verdict"], 0) + 1
                print(f"run {i}: exit {proc.returncode}, {kernel['verdict']}, {seconds:.0f} s, load1 {load:.2f}")
                for c in kernel["cases"]:
                    if c["device"] != "cpu":
                        continue
                    wall = _interval(c.get("regression_pct"), c.get("ci95_pct"))
                    cpu = _interval(c.get("cpu_regression_pct"), c.get("cpu_ci95_pct"))
                    stopped, busy = c.get("stop_reason"), c.get("other_cores")
                    print(f"  {c['name']}: {c['verdict']}, wall {wall}, CPU {cpu}, stopped {stopped},"
                          f" {c.get('processes')} processes, other cores busy {busy}", flush=True)  # fmt: skip
    finally:
        if spinner is not None:
            spinner.kill()
            spinner.wait()
    print(
        f"# {KERNEL}, two-thread body ({args.body}), {args.runs} reviews: "
        + ", ".join(f"{v} {n}" for v, n in sorted(tally.items()))
    )


if __name__ == "__main__":
    main()
