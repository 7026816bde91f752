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
