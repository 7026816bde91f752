"""Main's line in git (bot/mainline/commits.py) on a scratch repository with dated commits: the drift reference
(`release`, `Nd`, a revision, and what each falls back to), the first-parent chain, and the kernels each commit
touched."""

from __future__ import annotations

import os
import subprocess
from datetime import UTC, datetime, timedelta

import pytest

from bot.errors import InputError
from bot.mainline.commits import chain, commit_facts, kernel_globs, reference, touched
from tests.conftest import REPO_CONFIG, KernelRepo, git

NOW = datetime.now(UTC).replace(microsecond=0)  # the base commit is made at the real time too


def dated(repo: KernelRepo, days_ago: int, subject: str) -> str:
    when = (NOW - timedelta(days=days_ago)).isoformat()
    env = {**os.environ, "GIT_COMMITTER_DATE": when, "GIT_AUTHOR_DATE": when}
    git(repo.path, "add", "-A")
    subprocess.run(["git", "-C", str(repo.path), "commit", "-q", "-m", subject], check=True, env=env)
    return git(repo.path, "rev-parse", "HEAD")


@pytest.fixture
def line(kernel_repo: KernelRepo) -> tuple[KernelRepo, list[str]]:
    """The scratch repository's base, then commits 40, 10 and 1 day(s) before NOW (README, the tile config, notes)."""
    kernel_repo.write("README.md", "forty days ago\n")
    old = dated(kernel_repo, 40, "docs: README")
    kernel_repo.edit("kernels/deepgemm_tile/tile_config.json", '"tile_m": 128', '"tile_m": 256')
    mid = dated(kernel_repo, 10, "tile_m 256")
    kernel_repo.write("notes.txt", "yesterday\n")
    new = dated(kernel_repo, 1, "notes")
    return kernel_repo, [kernel_repo.base, old, mid, new]


def test_a_commits_facts_are_its_utc_date_subject_and_parents(line: tuple[KernelRepo, list[str]]) -> None:
    repo, (_, old, mid, _) = line
    assert commit_facts(repo.path, mid) == (
        (NOW - timedelta(days=10)).isoformat(timespec="seconds"),
        "tile_m 256",
        [old],
    )


def test_nd_is_the_last_commit_at_least_n_days_old(line: tuple[KernelRepo, list[str]]) -> None:
    repo, (_, old, mid, new) = line
    ref = reference(repo.path, "30d", new, NOW)
    assert (ref.label, ref.sha) == ("main 30 days ago", old)
    assert reference(repo.path, "5d", new, NOW).sha == mid
    young = reference(repo.path, "400d", new, NOW)  # nothing that old: the first commit, said so
    assert young.label == "main's first commit (younger than 400 days)" and young.sha == repo.base


def test_release_is_the_newest_tag_reachable_else_thirty_days(line: tuple[KernelRepo, list[str]]) -> None:
    repo, (_, old, mid, new) = line
    assert reference(repo.path, "release", new, NOW).label == "main 30 days ago"  # no v* tag yet
    git(repo.path, "tag", "v1.0", old)
    git(repo.path, "tag", "v1.1", mid)
    git(repo.path, "tag", "nightly", new)  # not a release
    ref = reference(repo.path, "release", new, NOW)
    assert (ref.label, ref.sha) == ("v1.1", mid)
    assert reference(repo.path, "v1.0", new, NOW).sha == old  # any revision
    with pytest.raises(InputError, match=r"drift reference 'v9': .* \(use release, Nd such as 30d, or a revision\)"):
        reference(repo.path, "v9", new, NOW)


def test_the_chain_and_the_kernels_each_commit_touched(line: tuple[KernelRepo, list[str]]) -> None:
    repo, (base, old, mid, new) = line
    assert chain(repo.path, base, new) == [old, mid, new]
    globs = kernel_globs(repo.path, REPO_CONFIG)
    assert globs == {"deepgemm_tile": ["kernels/deepgemm_tile/**"]}
    assert touched(repo.path, [base, old, mid, new], globs) == {old: set(), mid: {"deepgemm_tile"}, new: set()}
