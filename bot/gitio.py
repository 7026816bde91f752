"""Thin git edge: resolve revisions, read diffs, check out revisions in temporary worktrees."""

from __future__ import annotations

import contextlib
import logging
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

from bot.errors import GitError

log = logging.getLogger(__name__)


def git(repo: Path, *args: str) -> str:
    """Run one git command in `repo` and return its stdout; failures become GitError."""
    try:
        proc = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=False)
    except FileNotFoundError as exc:
        raise GitError("git is not installed or not on the PATH") from exc
    if proc.returncode != 0:
        message = proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else "failed"
        raise GitError(f"git {args[0]}: {message}")
    return proc.stdout


def toplevel(path: Path) -> Path:
    if not path.is_dir():
        raise GitError(f"{path}: no such directory")
    return Path(git(path, "rev-parse", "--show-toplevel").strip())


def resolve(repo: Path, rev: str) -> str:
    """The full commit SHA of `rev`, or a GitError naming it."""
    if not rev or rev.startswith("-"):
        raise GitError(f"not a revision: {rev!r}")
    try:
        return git(repo, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}").strip()
    except GitError:
        raise GitError(f"unknown revision {rev!r} in {repo}") from None


def diff(repo: Path, base: str, head: str) -> str:
    """The unified diff of what `head` changed since its merge base with `base`."""
    return git(repo, "diff", "--no-color", "--no-ext-diff", "-M", f"{base}...{head}")


@contextlib.contextmanager
def worktree(repo: Path, sha: str) -> Iterator[Path]:
    """A detached temporary worktree of `sha`; the user's working tree is never touched."""
    parent = Path(tempfile.mkdtemp(prefix=f"opgate-{sha[:10]}-"))
    path = parent / "tree"
    git(repo, "worktree", "add", "--detach", "--quiet", str(path), sha)
    try:
        yield path
    finally:
        try:
            git(repo, "worktree", "remove", "--force", str(path))
        except GitError as exc:
            log.warning("could not remove worktree %s: %s", path, exc)
        shutil.rmtree(parent, ignore_errors=True)
