"""Time from `opgate init` to the first meaningful review on the tutorial-layout fixture, step by step.

The README's adoption steps on tests/fixtures/torch_library_repo (a TORCH_LIBRARY op with a scalar, a CPU source
and a CUDA source in a subfolder) with a cold build cache: init, the team's reference written, lint, check (the
first build), commit, the first review (the kernel new to main), then a comment-only pull request's review.
`python benchmarks/adoption.py [--runs 1] [--keep-nvcc]`; prints one line per step and the total.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.scratch import IDENT, git  # noqa: E402
from tests.test_torch_library import COMMENT, CPU_SOURCE, FIXTURE, REFERENCE, REFERENCE_PY  # noqa: E402


def _env(build_dir: Path, keep_nvcc: bool) -> dict[str, str]:
    path = [d for d in os.environ.get("PATH", "").split(os.pathsep) if keep_nvcc or not (Path(d) / "nvcc").exists()]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TAOTOKEN_", "OPGATE_", "GITHUB_"))}
    env.update(PATH=os.pathsep.join([str(Path(sys.executable).parent), *path]), OPGATE_BUILD_DIR=str(build_dir))
    return env


def one_run(keep_nvcc: bool) -> list[tuple[str, float, int]]:
    with tempfile.TemporaryDirectory(prefix="opgate-adoption-") as tmp:
        root = Path(tmp)
        repo, origin = root / "ext", root / "origin.git"
        shutil.copytree(FIXTURE, repo)
        git(root, "init", "-q", "-b", "main", str(repo))
        git(repo, "add", "-A")
        git(repo, *IDENT, "commit", "-qm", "before opgate")
        subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(origin)], check=True)
        git(repo, "remote", "add", "origin", str(origin))
        git(repo, "push", "-q", "origin", "main")
        env = _env(root / "build", keep_nvcc)
        steps: list[tuple[str, float, int]] = []

        def step(label: str, command: str) -> None:
            started = time.perf_counter()
            code = subprocess.run(["bash", "-c", command], cwd=repo, env=env, capture_output=True).returncode
            steps.append((label, time.perf_counter() - started, code))

        step("opgate init --kernels ops --domain moe", "opgate init --kernels ops --domain moe")
        (repo / REFERENCE_PY).write_text(REFERENCE)
        step("opgate lint", "opgate lint")
        step("opgate check (cold build)", "opgate check")
        step("git commit", 'git add -A && git -c user.name=b -c user.email=b@l commit -qm "Adopt opgate"')
        step("first review (new kernel)", "opgate review --base origin/main --head HEAD")
        git(repo, "push", "-q", "origin", "main")
        text = (repo / CPU_SOURCE).read_text()
        (repo / CPU_SOURCE).write_text(text.replace(*COMMENT, 1))
        git(repo, *IDENT, "commit", "-qam", "comment")
        step("comment-only PR review", "opgate review --base origin/main --head HEAD")
        return steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--keep-nvcc", action="store_true", help="leave nvcc on the PATH (the resource check runs)")
    args = parser.parse_args()
    for run in range(args.runs):
        steps = one_run(args.keep_nvcc)
        print(f"run {run + 1}:")
        for label, seconds, code in steps:
            print(f"  {label:<40} {seconds:7.1f} s  exit {code}")
        first = sum(s for label, s, _ in steps if label != "comment-only PR review")
        print(
            f"  init → first review: {first:.1f} s; with the first pull request's review: "
            f"{sum(s for _, s, _ in steps):.1f} s"
        )


if __name__ == "__main__":
    main()
