"""Git as opgate reads it (bot/edges/gitio.py): rename and copy detection on a real scratch repository."""

from __future__ import annotations

import shutil

from bot.edges import gitio
from bot.review.lineage import Origin, origins
from tests.conftest import git, make_repo


def test_gits_rename_and_copy_detection_finds_a_moved_and_a_copied_kernel(tmp_path):
    repo = make_repo(tmp_path / "repo", ["deepgemm_tile"])
    git(repo.path, "mv", "kernels/deepgemm_tile", "kernels/moved")
    head = repo.commit("moved")
    pairs = gitio.copies(repo.path, repo.base, head, ["kernels"])
    assert ("kernels/deepgemm_tile/gemm_cpu.cpp", "kernels/moved/gemm_cpu.cpp") in pairs
    assert all(target.startswith("kernels/moved/") for _, target in pairs)
    sizes = gitio.sizes(repo.path, head)
    assert origins(pairs, sizes, {"moved": "kernels/moved"}, {"deepgemm_tile": "kernels/deepgemm_tile"}) == {
        "moved": Origin(base="deepgemm_tile", how="renamed", share=1.0)
    }
    git(repo.path, "mv", "kernels/moved", "kernels/deepgemm_tile")
    shutil.copytree(repo.path / "kernels/deepgemm_tile", repo.path / "kernels/twin")  # an unchanged source
    twin = repo.commit("a copy")
    pairs = gitio.copies(repo.path, repo.base, twin, ["kernels/twin", "kernels/deepgemm_tile"])
    assert ("kernels/deepgemm_tile/reference.py", "kernels/twin/reference.py") in pairs
