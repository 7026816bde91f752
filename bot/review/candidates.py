"""Apply an agent's validated candidate patch in a scratch worktree of the head, for the same gates."""

from __future__ import annotations

import contextlib
import logging
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from bot.agent.review import EXECUTABLE, MODE_NAMES, PatchError, confined_path, validate_patch
from bot.config.manifest import KERNELS_DIR
from bot.edges import gitio
from bot.text.safe import one_line

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Candidate:
    """The head with the agent's patch applied: a temporary tree and a commit only this repository holds."""

    tree: Path
    sha: str
    kernel: str
    patch: str


class CandidateError(ValueError):
    """The candidate patch was refused (not a confined unified diff) or does not apply to the head."""


def _git(tree: Path, *args: str, stdin: str | None = None) -> str:
    """One git command; its output (which names files of the patch) is read as bytes, decoded with replacement."""
    data = stdin.encode("utf-8", "surrogateescape") if stdin is not None else None
    proc = subprocess.run(["git", "-C", str(tree), *args], input=data, capture_output=True, check=False)
    if proc.returncode != 0:
        stderr = proc.stderr.decode("utf-8", "replace").strip()
        last = stderr.splitlines()[-1] if stderr else "failed"
        raise CandidateError(f"git {args[0]}: {one_line(last, limit=200)}")
    return proc.stdout.decode("utf-8", "replace")


def staged_problem(raw: str, kernel: str, folder: str | None = None) -> str | None:
    """What git itself applied (`git diff --cached --raw -z --no-renames`), checked once more whatever the
    patch text looked like to validate_patch: every path a plain file under kernels/<kernel>/, no symbolic
    link or submodule, no file that gains the executable bit. None when all is well."""
    fields = raw.split("\0")
    folder = f"{folder or f'{KERNELS_DIR}/{kernel}'}/"
    for meta, path in zip(fields[0::2], fields[1::2], strict=False):
        parts = meta.lstrip(":").split()
        if len(parts) < 5:
            return f"left an entry opgate cannot read: {meta!r}"
        old_mode, new_mode = parts[0], parts[1]
        if (why := confined_path(path, folder)) is not None:
            return why
        if new_mode in MODE_NAMES:
            return f"would make {MODE_NAMES[new_mode]} of {path!r}"
        if new_mode == EXECUTABLE and old_mode != EXECUTABLE:
            return f"gives {path!r} the executable bit"
    return None


@contextlib.contextmanager
def applied(repo: Path, head_sha: str, patch: str, kernel: str, folder: str | None = None) -> Iterator[Candidate]:
    """A detached worktree of `head_sha` with `patch` applied and committed; removed on exit.

    The patch is validated again here (confined to kernels/<kernel>/, size-limited), applied with
    `git apply` (no hooks, no scripts: text only) and committed with a fixed identity, so the caller
    can review `base...candidate.sha` exactly like a pull request.
    """
    try:
        text = validate_patch(patch, kernel, folder)
    except PatchError as exc:
        raise CandidateError(str(exc)) from exc
    with gitio.worktree(repo, head_sha) as tree:
        _git(tree, "apply", "--check", "-p1", "--whitespace=nowarn", "-", stdin=text)
        _git(tree, "apply", "-p1", "--whitespace=nowarn", "--index", "-", stdin=text)
        staged = _git(tree, "diff", "--cached", "--raw", "-z", "--no-renames")
        if (why := staged_problem(staged, kernel, folder)) is not None:
            raise CandidateError(f"candidate_patch as git applied it {why}")
        _git(
            tree,
            *("-c", "user.name=opgate", "-c", "user.email=opgate@localhost", "-c", "commit.gpgsign=false"),
            *("commit", "--quiet", "--no-verify", "-m", f"opgate: agent candidate for {kernel}"),
        )
        sha = _git(tree, "rev-parse", "HEAD").strip()
        log.info("candidate patch for %s applied on %s as %s", kernel, head_sha[:10], sha[:10])
        yield Candidate(tree=tree, sha=sha, kernel=kernel, patch=text)
