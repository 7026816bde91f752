"""A change reviewed N times with the real CLI: does code that behaves the same pass, a ~5 % slowdown fail?

Each run is `opgate review --offline` on a scratch repository of kernels/<kernel> (a real rebuild the first time,
cached afterwards; always a real, interleaved timing). `--change noop` (default): head adds one unused function to
the CPU body (other bytes, the same behaviour: a comment alone compiles to base's ext.so, which the review checks
but does not time, docs/review.md). `--change slow5` (deepgemm_tile only): after the GEMM, head
runs a dependent multiply-add chain of m*n*k/DIV steps (`--slow-div`, default 320: about 5 % more time on the 2-core
runner). `--load busy` keeps one core busy with a spinning process for the whole run. `--tree DIR` reviews with DIR's
opgate (another checkout, for a before/after in one run).
Prints one line per run (exit code, verdict, seconds, each case's p50 and what decided it) and the tally:

  .venv/bin/python benchmarks/aa_reviews.py [--runs 10] [--kernel deepgemm_tile] [--change noop|slow5]
      [--load idle|busy] [--tree DIR] [--keep DIR]

`--keep DIR` leaves each run's report.json in DIR/runN (benchmarks/coverage.py reads them).
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
import tomllib
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
from gate_power import load  # noqa: E402  (the same bounded spinning process as the gate's power table)

UNUSED = '\nextern "C" int opgate_aa_marker() { return 1; }\n'
# ~5 % more time: after the GEMM, a dependent multiply-add chain of m*n*k/DIV steps in a function of its own (the
# GEMM's code is untouched and stays inlined; a second GEMM pass changed its code layout and made head faster)
SLOW = """
__attribute__((noinline)) void opgate_slow(int64_t m, int64_t n, int64_t k) {
  static volatile float sink;
  float x = 1.0f;
  for (int64_t i = 0, steps = m * n * k / DIV; i < steps; ++i) x = x * 0.999999f + 1e-7f;
  sink = x;
}
"""


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


def head_source(text: str, change: str, div: int) -> str:
    if change == "noop":
        return text + UNUSED
    call = "  gemm_tiled<TILE_M, TILE_N, TILE_K>(a, b, c, m, n, k);\n"
    text = text.replace(call, call + "  opgate_slow(m, n, k);\n")
    marker = "}  // namespace\n"
    return text.replace(marker, SLOW.replace("DIV", str(div)) + marker, 1)


def decided_by(case: dict) -> str:
    """What decided a timed CPU case: wall time, CPU time, the simulated cost, or nothing (undecided)."""
    if case["verdict"] == "inconclusive":
        return "undecided"
    if (case.get("simulated") or {}).get("decided"):
        return "simulated"
    keys = {f["key"] for f in case.get("findings", [])}
    if "performance.cpu_time" in keys:
        return "cpu"
    low, high = case["ci95_pct"]
    limit = case.get("max_regression_pct") or 3.0
    wall_decides = high <= limit or low > limit
    return "wall" if wall_decides else "cpu"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--kernel", default="deepgemm_tile")
    parser.add_argument("--change", choices=("noop", "slow5"), default="noop")
    parser.add_argument("--slow-div", type=int, default=320, help="slow5: the chain's steps are m*n*k/DIV")
    parser.add_argument("--load", choices=("idle", "busy"), default="idle")
    parser.add_argument("--tree", type=Path, default=ROOT, help="the opgate checkout to review with")
    parser.add_argument("--keep", type=Path, help="copy each run's report.json into DIR/runN")
    args = parser.parse_args()
    if args.change == "slow5" and args.kernel != "deepgemm_tile":
        raise SystemExit("aa_reviews: --change slow5 edits deepgemm_tile's gemm_f32; use --kernel deepgemm_tile")
    tree = args.tree.resolve()
    manifest = tomllib.loads((tree / "kernels" / args.kernel / "kernel.toml").read_text())
    body = next(s for s in manifest["build"]["cpu"]["sources"] if not s.startswith("binding"))
    with tempfile.TemporaryDirectory(prefix="opgate-aa-") as tmp_name:
        repo = Path(tmp_name) / "repo"
        shutil.copytree(tree / "kernels" / args.kernel, repo / "kernels" / args.kernel)
        shutil.copy(tree / "pyproject.toml", repo / "pyproject.toml")  # [tool.opgate]: domains, budgets
        git(Path(tmp_name), "init", "-q", "-b", "main", str(repo))
        ident = ("-c", "user.name=aa", "-c", "user.email=aa@localhost")
        git(repo, "add", "-A")
        git(repo, *ident, "commit", "-qm", "base")
        base = git(repo, "rev-parse", "HEAD")
        source = repo / "kernels" / args.kernel / body
        source.write_text(head_source(source.read_text(), args.change, args.slow_div))
        git(repo, *ident, "commit", "-qam", args.change)
        head = git(repo, "rev-parse", "HEAD")
        tally: Counter[str] = Counter()
        exits: Counter[int] = Counter()
        deciders: Counter[str] = Counter()
        seconds: list[float] = []
        env = {**_env(), "OPGATE_DATABASE_URL": str(Path(tmp_name) / "ledger.sqlite"), "PYTHONPATH": str(tree)}
        print(
            f"# {args.kernel}, {args.change}, load {args.load}, opgate from {tree} at "
            f"{git(tree, 'rev-parse', '--short', 'HEAD')}; load average {os.getloadavg()[0]:.2f} at the start",
            flush=True,
        )
        with load(args.load, 7200.0):
            for i in range(1, args.runs + 1):
                out = Path(tmp_name) / f"out{i}"
                started = time.perf_counter()
                cmd = [
                    sys.executable,
                    "-m",
                    "bot",
                    "-q",
                    "review",
                    "--repo",
                    str(repo),
                    "--base",
                    base,
                    "--head",
                    head,
                    "--offline",
                    "--out",
                    str(out),
                ]
                proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=tree)
                took = time.perf_counter() - started
                if not (out / "report.json").is_file():
                    raise SystemExit(f"run {i}: no report.json (exit {proc.returncode}):\n{proc.stderr[-2000:]}")
                report = json.loads((out / "report.json").read_text())
                if args.keep is not None:
                    (args.keep / f"run{i}").mkdir(parents=True, exist_ok=True)
                    shutil.copy(out / "report.json", args.keep / f"run{i}" / "report.json")
                kernel = next(k for k in report["kernels"] if k["name"] == args.kernel)
                timed = [c for c in kernel["cases"] if c["ci95_pct"]]
                parts = []
                for c in timed:
                    by = decided_by(c)
                    deciders[by] += 1
                    cpu = c.get("cpu_ci95_pct")
                    cpu_text = f", CPU {c['cpu_regression_pct']:+.2f}% [{cpu[0]:+.2f},{cpu[1]:+.2f}]" if cpu else ""
                    parts.append(
                        f"{c['name']} {c['regression_pct']:+.2f}% [{c['ci95_pct'][0]:+.2f},"
                        f"{c['ci95_pct'][1]:+.2f}]{cpu_text} {c['verdict']} ({by})"
                    )
                tally[report["verdict"]] += 1
                exits[proc.returncode] += 1
                seconds.append(took)
                print(
                    f"run {i:2d}: exit {proc.returncode}, {report['verdict']}, {took:.1f} s — {'; '.join(parts)}",
                    flush=True,
                )
        cases = sum(deciders.values())
        print(
            f"# {args.kernel}, {args.change}, load {args.load}, {args.runs} reviews: "
            + ", ".join(f"{v} {n}" for v, n in sorted(tally.items()))
            + "; exit "
            + ", ".join(f"{c}×{n}" for c, n in sorted(exits.items()))
            + f"; case comparisons {cases}: "
            + ", ".join(f"{k} {n}" for k, n in sorted(deciders.items()))
            + f"; seconds per review: first {seconds[0]:.1f}, median of the rest "
            f"{sorted(seconds[1:])[len(seconds[1:]) // 2] if seconds[1:] else float('nan'):.1f}"
            f"; load average {os.getloadavg()[0]:.2f} at the end"
        )


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("TAOTOKEN_", "GITHUB_"))}


if __name__ == "__main__":
    main()
