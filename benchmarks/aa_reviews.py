"""A comment-only change reviewed N times with the real CLI: how often does identical code pass?

Each run is `opgate review --offline` on a scratch repository whose head adds one comment to
kernels/<kernel>'s CPU body (a real rebuild the first time, cached afterwards; always a real, interleaved
timing). Prints one line per run and the tally. Usage:

  .venv/bin/python benchmarks/aa_reviews.py [--runs 10] [--kernel deepgemm_tile] [--keep DIR]

`--keep DIR` leaves each run's report.json in DIR/runN (benchmarks/coverage.py reads them).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--kernel", default="deepgemm_tile")
    parser.add_argument("--keep", type=Path, help="copy each run's report.json into DIR/runN")
    args = parser.parse_args()
    manifest = tomllib.loads((ROOT / "kernels" / args.kernel / "kernel.toml").read_text())
    body = next(s for s in manifest["build"]["cpu"]["sources"] if not s.startswith("binding"))
    with tempfile.TemporaryDirectory(prefix="opgate-aa-") as tmp_name:
        repo = Path(tmp_name) / "repo"
        shutil.copytree(ROOT / "kernels" / args.kernel, repo / "kernels" / args.kernel)
        shutil.copy(ROOT / "pyproject.toml", repo / "pyproject.toml")  # [tool.opgate]: domains, budgets
        git(Path(tmp_name), "init", "-q", "-b", "main", str(repo))
        ident = ("-c", "user.name=aa", "-c", "user.email=aa@localhost")
        git(repo, "add", "-A")
        git(repo, *ident, "commit", "-qm", "base")
        base = git(repo, "rev-parse", "HEAD")
        source = repo / "kernels" / args.kernel / body
        source.write_text("// A/A: a comment, no behaviour change\n" + source.read_text())
        git(repo, *ident, "commit", "-qam", "comment only")
        head = git(repo, "rev-parse", "HEAD")
        tally: dict[str, int] = {}
        for i in range(1, args.runs + 1):
            out = Path(tmp_name) / f"out{i}"
            started = time.perf_counter()
            proc = subprocess.run(
                [
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
                ],
                capture_output=True,
                text=True,
                env={**_env(), "OPGATE_DATABASE_URL": str(Path(tmp_name) / "ledger.sqlite")},
            )
            report = json.loads((out / "report.json").read_text())
            if args.keep is not None:
                (args.keep / f"run{i}").mkdir(parents=True, exist_ok=True)
                shutil.copy(out / "report.json", args.keep / f"run{i}" / "report.json")
            kernel = next(k for k in report["kernels"] if k["name"] == args.kernel)
            cases = "; ".join(
                f"{c['name']} {c['regression_pct']:+.2f}% [{c['ci95_pct'][0]:+.2f},{c['ci95_pct'][1]:+.2f}] "
                f"{c['verdict']}"
                for c in kernel["cases"]
                if c["ci95_pct"]
            )
            tally[report["verdict"]] = tally.get(report["verdict"], 0) + 1
            print(
                f"run {i:2d}: exit {proc.returncode}, {report['verdict']}, {time.perf_counter() - started:.1f} s"
                f" — {cases}",
                flush=True,
            )
        print(
            f"# {args.kernel}, comment-only change, {args.runs} reviews: "
            + ", ".join(f"{v} {n}" for v, n in sorted(tally.items()))
        )


def _env() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if not k.startswith(("TAOTOKEN_", "GITHUB_"))}


if __name__ == "__main__":
    main()
