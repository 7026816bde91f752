"""Cold and warm review times of the FlashMLA-shaped fixture (tests/fixtures/flashmla_shape) on a CPU runner.

Each round makes the fixture repository (a kernel in instantiations/, a real submodule, FlashMLA's flags,
resource-only), commits one change and runs `opgate review --offline` twice: first on an empty build
cache (the toolchain probe, both sides' compiles and the launch probe), then again on the warm cache.

    .venv/bin/python benchmarks/flashmla_shape.py --rounds 3
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.flashmla_repo import KERNEL, make_flashmla_repo  # noqa: E402

CHANGES = {
    "comment": (f"{KERNEL}/kernel.cuh", "// Dense decode,", "// Dense decode (reworded),"),
    "threads": (f"{KERNEL}/traits.h", "NUM_THREADS = 256", "NUM_THREADS = 384"),
}


def _review(repo: Path, base: str, head: str, work: Path, build: Path) -> tuple[float, int]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TAOTOKEN_", "OPGATE_", "GITHUB_"))}
    env.update(OPGATE_BUILD_DIR=str(build), OPGATE_DATABASE_URL=str(work / "ledger.sqlite"))
    argv = [sys.executable, "-m", "bot", "review", "--repo", str(repo), "--base", base, "--head", head]
    started = time.perf_counter()
    proc = subprocess.run([*argv, "--offline", "--out", str(work / "out")], env=env, cwd=work, capture_output=True)
    return time.perf_counter() - started, proc.returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--change", choices=sorted(CHANGES), default="comment")
    args = parser.parse_args()
    cold, warm = [], []
    for i in range(args.rounds):
        with tempfile.TemporaryDirectory(prefix="opgate-flashmla-") as tmp:
            work = Path(tmp)
            repo, _ = make_flashmla_repo(work / f"r{i}")
            repo.edit(*CHANGES[args.change])
            head = repo.commit(args.change)
            for times in (cold, warm):
                seconds, code = _review(repo.path, repo.base, head, work, work / "build")
                times.append(seconds)
                print(f"round {i + 1}: {'cold' if times is cold else 'warm'} {seconds:.1f} s (exit {code})")
    print(f"{args.change} change, {args.rounds} round(s), {os.cpu_count()} cores:")
    print(f"  cold review: median {statistics.median(cold):.1f} s (min {min(cold):.1f}, max {max(cold):.1f})")
    print(f"  warm review: median {statistics.median(warm):.1f} s (min {min(warm):.1f}, max {max(warm):.1f})")


if __name__ == "__main__":
    main()
