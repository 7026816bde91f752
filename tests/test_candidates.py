"""An agent's candidate patch (bot/review/candidates.py): applied and committed in a scratch worktree."""

from __future__ import annotations

import pytest

from tests.pg import pg_cluster, pg_url  # noqa: F401  (fixtures)


def test_a_valid_candidate_is_applied_and_committed_in_a_scratch_worktree(kernel_repo):
    from bot.review.candidates import CandidateError, applied
    from tests.conftest import git

    config = kernel_repo.path / "kernels/deepgemm_tile/tile_config.json"
    before = config.read_text()
    config.write_text(before.replace('"tile_k": 64', '"tile_k": 32'))
    patch = git(kernel_repo.path, "diff") + "\n"
    git(kernel_repo.path, "checkout", "--", ".")
    with applied(kernel_repo.path, kernel_repo.base, patch, "deepgemm_tile") as candidate:
        assert '"tile_k": 32' in (candidate.tree / "kernels/deepgemm_tile/tile_config.json").read_text()
        assert candidate.sha != kernel_repo.base and len(candidate.sha) == 40
        tree = candidate.tree
    assert not tree.exists() and config.read_text() == before  # the user's tree is never touched
    outside = patch.replace("kernels/deepgemm_tile/", "bot/")
    with (
        pytest.raises(CandidateError, match="outside"),
        applied(kernel_repo.path, kernel_repo.base, outside, "deepgemm_tile"),
    ):
        pass
    stale = patch.replace('"tile_k": 64', '"tile_k": 128')
    with (
        pytest.raises(CandidateError, match="git apply"),
        applied(kernel_repo.path, kernel_repo.base, stale, "deepgemm_tile"),
    ):
        pass
