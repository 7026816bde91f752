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


def git_bytes(repo: Path, *args: str) -> bytes:
    """Run one git command in `repo` and return its stdout as bytes (file names and contents are bytes, not
    necessarily UTF-8); failures become GitError with git's last line, decoded with replacement."""
    try:
        proc = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, check=False)
    except FileNotFoundError as exc:
        raise GitError("git is not installed or not on the PATH") from exc
    if proc.returncode != 0:
        stderr = proc.stderr.decode("utf-8", "replace").strip()
        message = stderr.splitlines()[-1] if stderr else "failed"
        command = next((a for a in args if not a.startswith("-") and "=" not in a), args[0])
        raise GitError(f"git {command}: {message}")
    return proc.stdout


def git(repo: Path, *args: str) -> str:
    """Run one git command in `repo` and return its stdout as text (bytes that are not UTF-8 become U+FFFD)."""
    return git_bytes(repo, *args).decode("utf-8", "replace")


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
    """The unified diff of what `head` changed since its merge base with `base`, in one fixed form whatever
    the user's git configuration says: a/ and b/ prefixes, C-quoted special file names, no external diff or
    text conversion; contents that are not UTF-8 are shown with U+FFFD."""
    return git(
        repo,
        *("-c", "core.quotePath=true", "diff", "--no-color", "--no-ext-diff", "--no-textconv", "-M"),
        *("--src-prefix=a/", "--dst-prefix=b/", f"{base}...{head}"),
    )


def copies(repo: Path, base: str, head: str, paths: list[str]) -> list[tuple[str, str]]:
    """(source, target) of every file git's rename and copy detection finds in what `head` changed since its merge
    base with `base`, under `paths` (unmodified files are candidate sources too: --find-copies-harder)."""
    out = git_bytes(
        repo,
        *("-c", "core.quotePath=true", "diff", "--no-color", "--no-ext-diff", "--name-status", "-z"),
        *("-M", "-C", "--find-copies-harder", f"{base}...{head}", "--", *paths),
    )
    fields = [f.decode("utf-8", "replace") for f in out.split(b"\0")]
    found, i = [], 0
    while i < len(fields) and fields[i]:
        status = fields[i]
        if status[:1] in ("R", "C") and i + 2 < len(fields):
            found.append((fields[i + 1], fields[i + 2]))
            i += 3
        else:
            i += 2
    return found


def sizes(repo: Path, sha: str) -> dict[str, int]:
    """Path -> size in bytes of every file in `sha`'s tree (names read as bytes, decoded with replacement,
    as the diff's names are); submodules have no size and are left out."""
    sized: dict[str, int] = {}
    for entry in git_bytes(repo, "ls-tree", "-r", "-l", "-z", "--full-tree", sha).split(b"\0"):
        meta, sep, name = entry.partition(b"\t")
        fields = meta.split()
        if sep and len(fields) == 4 and fields[3].isdigit():
            sized[name.decode("utf-8", "replace")] = int(fields[3])
    return sized


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
