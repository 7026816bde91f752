"""Main's line in git: a commit's facts, the drift reference, the first-parent chain, the kernels each touched."""

from __future__ import annotations

import itertools
import logging
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bot.config.manifest import find_manifests, load_kernel
from bot.config.repo import RepoConfig
from bot.edges.gitio import git, resolve
from bot.errors import GitError, InputError
from bot.mainline.drift import Reference
from bot.review.changes import matches

log = logging.getLogger(__name__)

RELEASE_GLOB = "v*"
DAYS = re.compile(r"^(\d{1,4})d$")
FALLBACK_DAYS = 30


def commit_facts(repo: Path, sha: str) -> tuple[str, str, list[str]]:
    """(committer date ISO 8601 in UTC, subject, parent SHAs) of one commit."""
    out = git(repo, "log", "-1", "--format=%ct%x00%s%x00%P", sha).rstrip("\n")
    stamp, subject, parents = out.split("\x00")
    when = datetime.fromtimestamp(int(stamp), UTC).isoformat(timespec="seconds")
    return when, subject, parents.split()


def reference(repo: Path, spec: str, head: str, now: datetime) -> Reference:
    """The commit main is compared with: `release` (the newest v* tag reachable from head), `Nd` (the last
    first-parent commit at least N days old, else the oldest) or any revision."""
    spec = spec.strip()
    if spec == "release":
        try:
            tag = git(repo, "describe", "--tags", "--abbrev=0", "--match", RELEASE_GLOB, head).strip()
        except GitError:
            log.info(
                "no release tag (%s) reachable from %s: comparing with main %sd ago",
                RELEASE_GLOB,
                head[:12],
                FALLBACK_DAYS,
            )
            return reference(repo, f"{FALLBACK_DAYS}d", head, now)
        sha = resolve(repo, tag)
        return Reference(label=tag, sha=sha, committed_at=commit_facts(repo, sha)[0])
    if m := DAYS.match(spec):
        days = int(m.group(1))
        before = (now - timedelta(days=days)).isoformat(timespec="seconds")
        found = git(repo, "rev-list", "-1", "--first-parent", f"--before={before}", head).strip()
        label = f"main {days} days ago"
        if not found:
            found = git(repo, "rev-list", "--first-parent", "--reverse", head).split()[0]
            label = f"main's first commit (younger than {days} days)"
        return Reference(label=label, sha=found, committed_at=commit_facts(repo, found)[0])
    try:
        sha = resolve(repo, spec)
    except GitError as exc:
        raise InputError(f"drift reference {spec!r}: {exc} (use release, Nd such as 30d, or a revision)") from exc
    return Reference(label=spec, sha=sha, committed_at=commit_facts(repo, sha)[0])


def chain(repo: Path, ref: str, head: str) -> list[str]:
    """Main's first-parent commits after `ref` up to `head`, oldest first."""
    return git(repo, "rev-list", "--first-parent", "--reverse", f"{ref}..{head}").split()


def kernel_globs(repo: Path, config: RepoConfig | None = None) -> dict[str, list[str]]:
    """Kernel name -> its change globs, from the manifests in the working tree (broken ones left out, logged)."""
    config = config or RepoConfig()
    found = {}
    for name, folder in find_manifests(repo, config.manifests).items():
        try:
            kernel = load_kernel(repo / folder, config=config, path=folder)
        except InputError as exc:
            log.warning("kernel %s not loaded for drift gaps: %s", name, exc)
            continue
        found[kernel.name] = list(kernel.manifest.globs)
    return found


def touched(repo: Path, line: list[str], globs: dict[str, list[str]]) -> dict[str, set[str]]:
    """Commit -> the kernels its change against the previous commit of `line` touched (line[0]: the reference)."""
    out: dict[str, set[str]] = {}
    for before, sha in itertools.pairwise(line):
        paths = git(repo, "diff", "--name-only", "--no-renames", before, sha).split("\n")
        out[sha] = {name for name, g in globs.items() if any(p and matches(p, g) for p in paths)}
    return out
