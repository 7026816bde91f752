"""Thin git edge: resolve revisions, read diffs, check out revisions in temporary worktrees."""

from __future__ import annotations

import contextlib
import logging
import shutil
import subprocess
import tarfile
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


SUBMODULE_DEPTH = 4  # submodules inside submodules, at most this deep


def submodules(repo: Path, sha: str) -> dict[str, str]:
    """Path -> pinned commit of every submodule (a gitlink, mode 160000) in `sha`'s tree."""
    pinned: dict[str, str] = {}
    for entry in git_bytes(repo, "ls-tree", "-r", "-z", "--full-tree", sha).split(b"\0"):
        meta, sep, name = entry.partition(b"\t")
        fields = meta.split()
        if sep and len(fields) == 3 and fields[0] == b"160000":
            pinned[name.decode("utf-8", "replace")] = fields[2].decode()
    return pinned


def _has_commit(args: list[str], commit: str) -> bool:
    try:
        subprocess.run(["git", *args, "cat-file", "-e", f"{commit}^{{commit}}"], capture_output=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return False
    return True


def _module_names(repo: Path, sha: str) -> dict[str, str]:
    """Submodule path -> name, from `sha`'s .gitmodules (where git keeps its objects: .git/modules/<name>)."""
    try:
        text = git(repo, "config", "--blob", f"{sha}:.gitmodules", "--get-regexp", r"^submodule\..*\.path$")
    except GitError:
        return {}
    names = {}
    for line in text.splitlines():
        key, _, path = line.partition(" ")
        names[path] = key.removeprefix("submodule.").removesuffix(".path")
    return names


def _submodule_source(repo: Path, sha: str, path: str, commit: str) -> list[str] | None:
    """git arguments that reach a repository holding `commit` of the submodule at `path` of `repo`, or None."""
    checked_out = repo / path
    if (checked_out / ".git").exists():
        try:
            top = Path(git(checked_out, "rev-parse", "--show-toplevel").strip()).resolve()
        except GitError:
            top = None
        if top == checked_out.resolve() and _has_commit(["-C", str(checked_out)], commit):
            return ["-C", str(checked_out)]
    name = _module_names(repo, sha).get(path)
    if name is not None:
        common = Path(git(repo, "rev-parse", "--path-format=absolute", "--git-common-dir").strip())
        gitdir = common / "modules" / name
        if gitdir.is_dir() and _has_commit([f"--git-dir={gitdir}"], commit):
            return [f"--git-dir={gitdir}"]
    return None


def _extract(source: list[str], commit: str, target: Path) -> None:
    """`git archive` of `commit` unpacked into `target` (links and paths that leave it are refused)."""
    target.mkdir(parents=True, exist_ok=True)
    with subprocess.Popen(["git", *source, "archive", "--format=tar", commit], stdout=subprocess.PIPE) as proc:
        assert proc.stdout is not None
        try:
            with tarfile.open(fileobj=proc.stdout, mode="r|") as tar:
                for member in tar:
                    tar.extract(member, target, filter="data")
        except (tarfile.TarError, OSError) as exc:
            raise GitError(f"git archive {commit[:12]}: cannot unpack: {exc}") from exc
    if proc.returncode != 0:
        raise GitError(f"git archive {commit[:12]} failed (exit {proc.returncode})")


def populate_submodules(repo: Path, sha: str, tree: Path, *, depth: int = 0) -> dict[str, str]:
    """Put every submodule `sha` pins into `tree` (a worktree of `sha`), at the pinned commit, from the objects
    already in `repo`'s checkout: nothing is fetched, nothing of `repo` is written. Returns path -> why a
    submodule could not be put there (its commit is not in the checkout); nested submodules included."""
    missing: dict[str, str] = {}
    for path, commit in submodules(repo, sha).items():
        source = _submodule_source(repo, sha, path, commit)
        if source is None:
            missing[path] = f"pinned at {commit[:12]}, which the checkout does not hold"
            continue
        _extract(source, commit, tree / path)
        if source[0] == "-C" and depth < SUBMODULE_DEPTH:
            nested = populate_submodules(Path(source[1]), commit, tree / path, depth=depth + 1)
        else:  # only git's own folder holds it: a submodule of it has no checkout to come from
            links = subprocess.run(["git", *source, "ls-tree", "-r", "--full-tree", commit], capture_output=True)
            inner = [line.split("\t", 1)[1] for line in links.stdout.decode("utf-8", "replace").splitlines()
                     if line.startswith("160000 ")]  # fmt: skip
            nested = {p: f"a submodule of {path}, whose own submodules are not checked out" for p in inner}
        missing.update({f"{path}/{p}": why for p, why in nested.items()})
    return missing
