"""A scratch git repository of this project's kernels and configuration, for benchmarks that review with the CLI."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
IDENT = ("-c", "user.name=bench", "-c", "user.email=bench@localhost")


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


def kernel_repo(repo: Path) -> str:
    """Make `repo` a repository of kernels/ and pyproject.toml (its [tool.opgate]: domains, budgets) on branch
    main, one commit; return that commit."""
    shutil.copytree(ROOT / "kernels", repo / "kernels", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", repo / "pyproject.toml")
    git(repo.parent, "init", "-q", "-b", "main", str(repo))
    git(repo, "add", "-A")
    git(repo, *IDENT, "commit", "-qm", "base")
    return git(repo, "rev-parse", "HEAD")


def commit_all(repo: Path, message: str) -> str:
    """Commit every tracked change in `repo`; return the commit."""
    git(repo, *IDENT, "commit", "-qam", message)
    return git(repo, "rev-parse", "HEAD")


# -- a main line to bisect (tests/test_bisect_e2e.py, benchmarks/bisect16.py) ------------------------------

GEMM = "kernels/deepgemm_tile/gemm_cpu.cpp"
CALL = "  gemm_tiled<TILE_M, TILE_N, TILE_K>(a, b, c, m, n, k);\n"
SLOW_CASE = "square_512"  # m = 512 is a multiple of tile_m (128); ragged_200x328x264 is not, and stays as fast
# Commit 11's change: the aligned path computes the whole product twice (2x), or its first twelfth again (~8%).
SLOWER = {
    "2x": CALL + "  if (m % TILE_M == 0) gemm_tiled<TILE_M, TILE_N, TILE_K>(a, b, c, m, n, k);\n",
    "8pct": CALL + "  if (m % TILE_M == 0) gemm_tiled<TILE_M, TILE_N, TILE_K>(a, b, c, m / 12, n, k);\n",
}
BROKEN = 8  # does not build (a missing semicolon); commit 9 fixes it
COMMENT_ONLY = 5
KERNEL_COMMITS = (1, 3, COMMENT_ONLY, BROKEN, 9, 11, 12, 15)  # the others change only README.md


def _revision(text: str, i: int) -> str:
    """An exported function that tags the revision: new object code, the same speed."""
    end = "}  // namespace deepgemm_tile"
    return text.replace(end, f"int revision_{i}() {{ return {i}; }}\n\n{end}")


def bisect_repo(repo: Path, slower: str = "2x") -> list[str]:
    """Sixteen commits on main (index = commit number, 0 the base) of deepgemm_tile alone: commit 11 makes the
    square_512 case slower (`slower`: 2x or 8pct), commit 5 changes only a comment, commit 8 does not build,
    commits 2, 4, 6, 7, 10, 13, 14 change only README.md. Returns the 16 SHAs."""
    (repo / "kernels").mkdir(parents=True)
    shutil.copytree(ROOT / "kernels" / "deepgemm_tile", repo / "kernels" / "deepgemm_tile",
                    ignore=shutil.ignore_patterns("__pycache__"))  # fmt: skip
    shutil.copy(ROOT / "pyproject.toml", repo / "pyproject.toml")
    (repo / "README.md").write_text("scratch main line for opgate history bisect\n")
    git(repo.parent, "init", "-q", "-b", "main", str(repo))
    git(repo, "add", "-A")
    git(repo, *IDENT, "commit", "-qm", "base")
    shas = [git(repo, "rev-parse", "HEAD")]
    gemm = repo / GEMM
    for i in range(1, 16):
        text = gemm.read_text()
        if i == COMMENT_ONLY:
            gemm.write_text(text.replace("// One output tile of TM x TN", "// One output tile (TM x TN)"))
            subject = "kernel: reword a comment"
        elif i == BROKEN:
            gemm.write_text(text.replace(CALL, CALL.rstrip(";\n") + "\n"))
            subject = "kernel: start a refactor (does not build)"
        elif i == 9:
            gemm.write_text(_revision(text.replace(CALL.rstrip(";\n") + "\n", CALL), i))
            subject = "kernel: finish the refactor"
        elif i == 11:
            gemm.write_text(text.replace(CALL, SLOWER[slower]))
            subject = "kernel: recompute the aligned tiles"
        elif i in KERNEL_COMMITS:
            gemm.write_text(_revision(text, i))
            subject = f"kernel: tag revision {i}"
        else:
            (repo / "README.md").write_text(f"{(repo / 'README.md').read_text()}note {i}\n")
            subject = f"docs: note {i}"
        shas.append(commit_all(repo, subject))
    return shas
