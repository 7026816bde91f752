"""opgate's own overhead: wall time of a review whose change touches no kernel, by phase.

Builds a scratch repository holding the project's kernels, commits a README change on top, then
  1. times `opgate review` as users run it (a fresh process each time) against bare Python start-up;
  2. runs the same review in-process and prints where the time goes (bot.review.flow.Reviewer.phases).
Target: at most 2 s of opgate overhead on top of Python start-up. Usage:

  .venv/bin/python benchmarks/overhead.py [--runs 5]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bot.config.repo import load_config
from bot.config.settings import load_settings
from bot.ledger import open_ledger
from bot.review.flow import Reviewer
from bot.review.host import here
from bot.review.request import ReviewRequest

ROOT = Path(__file__).resolve().parent.parent


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


def scratch_repo(tmp: Path) -> tuple[Path, str, str]:
    repo = tmp / "repo"
    shutil.copytree(ROOT / "kernels", repo / "kernels", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", repo / "pyproject.toml")  # its [tool.opgate]: the domains, the layout
    (repo / "README.md").write_text("base\n")
    git(tmp, "init", "-q", "-b", "main", str(repo))
    for args in (("add", "-A"), ("-c", "user.name=b", "-c", "user.email=b@x", "commit", "-qm", "base")):
        git(repo, *args)
    base = git(repo, "rev-parse", "HEAD")
    (repo / "README.md").write_text("head: docs only\n")
    git(repo, "-c", "user.name=b", "-c", "user.email=b@x", "commit", "-qam", "docs")
    return repo, base, git(repo, "rev-parse", "HEAD")


def timed(cmd: list[str]) -> float:
    started = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="opgate-overhead-") as tmp_name:
        tmp = Path(tmp_name)
        repo, base, head = scratch_repo(tmp)
        cli = [
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
            str(tmp / "out"),
        ]
        python = [timed([sys.executable, "-c", "pass"]) for _ in range(args.runs)]
        review = [timed(cli) for _ in range(args.runs)]
        startup, total = statistics.median(python), statistics.median(review)
        print(
            f"# {len(list((repo / 'kernels').glob('*/kernel.toml')))} kernels, no kernel changed, "
            f"median of {args.runs} runs"
        )
        print("| what | seconds |")
        print("|---|---|")
        print(f"| python start-up (`python -c pass`) | {startup:.3f} |")
        print(f"| `opgate review` end to end | {total:.3f} |")
        print(f"| **opgate overhead** (target ≤ 2 s) | **{total - startup:.3f}** |")

        settings = load_settings({"OPGATE_DATABASE_URL": str(tmp / "phases.sqlite")}, load_config(repo))
        ledger = open_ledger(settings.database_url)
        request = ReviewRequest(repo=repo, base=base, head=head, out=tmp / "out-phases", offline=True)
        started = time.perf_counter()
        reviewer = Reviewer(request, settings, ledger, here(settings))
        setup = time.perf_counter() - started
        reviewer.run()
        ledger.close()
        print(f"| in-process: environment detection | {setup:.3f} |")
        for phase, seconds in reviewer.phases.items():
            print(f"| in-process: {phase} | {seconds:.3f} |")
        imports = subprocess.run(
            [sys.executable, "-c", "import time; t=time.perf_counter(); import bot.cli; print(time.perf_counter()-t)"],
            capture_output=True,
            text=True,
            check=True,
        )
        print(f"| import bot.cli | {float(imports.stdout):.3f} |")


if __name__ == "__main__":
    main()
