"""Propose a tuning run's winner: its patch as a branch and a pull request, through the GitHub API (no push)."""

from __future__ import annotations

import logging
import subprocess
from datetime import datetime
from pathlib import Path

from bot.edges.github import GitHubEdge
from bot.errors import InputError
from bot.models.github import FileBlob, PullRef
from bot.review.candidates import CandidateError, applied
from bot.tune.result import TuneResult, render_tune, title

log = logging.getLogger(__name__)
AUTHOR = ("opgate", "opgate@users.noreply.github.com")


def _git(tree: Path, *args: str) -> bytes:
    proc = subprocess.run(["git", "-C", str(tree), *args], capture_output=True, check=False)
    if proc.returncode != 0:
        raise CandidateError(f"git {args[0]}: {proc.stderr.decode(errors='replace').strip()[-200:]}")
    return proc.stdout


def candidate_files(repo: Path, base_sha: str, patch: str, kernel: str) -> list[FileBlob]:
    """The files the patch changes, as they are after applying it to base (validated and applied again here:
    text only, nothing runs); a deleted file has no content."""
    files: list[FileBlob] = []
    with applied(repo, base_sha, patch, kernel) as cand:
        listing = _git(cand.tree, "diff", "--name-status", "--no-renames", "-z", base_sha, cand.sha).split(b"\0")
        pairs = [p for p in listing if p]
        for status, raw in zip(pairs[::2], pairs[1::2], strict=False):
            path = raw.decode()
            if status == b"D":
                files.append(FileBlob(path=path, content=None))
                continue
            mode = _git(cand.tree, "ls-tree", cand.sha, "--", path).split(b" ", 1)[0].decode()
            files.append(
                FileBlob(
                    path=path,
                    content=_git(cand.tree, "show", f"{cand.sha}:{path}"),
                    mode="100755" if mode == "100755" else "100644",
                )
            )
    return files


def propose(edge: GitHubEdge, repo: Path, result: TuneResult) -> PullRef:
    """Push the winner as a branch on top of the base commit and open (or update) its pull request."""
    p = result.proposal
    if p is None:
        raise InputError(f"tuning run {result.run_id} has nothing to propose: {result.not_proposed}")
    try:
        files = candidate_files(repo, result.base_sha, p.patch, result.kernel)
    except CandidateError as exc:
        raise InputError(f"the proposed patch does not apply to {result.base_sha[:10]}: {exc}") from exc
    message = f"{title(result)}\n\nopgate tune run {result.run_id}: {result.stop.kind}; see the pull request."
    sha = edge.push_branch(
        p.branch, result.base_sha, files, message, author=AUTHOR, date=datetime.fromisoformat(result.created_at)
    )
    log.info("pushed %s at %s (%d file(s))", p.branch, sha[:10], len(files))
    return edge.open_pull(p.branch, edge.default_branch(), title(result), render_tune(result, pr_body=True))
