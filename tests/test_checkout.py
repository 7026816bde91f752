"""Base and head checked out (bot/review/checkout.py): the kernels each side's manifests define, a broken manifest
kept with its reason, a kernel that reads a missing submodule named, and the globs a kernel watches."""

from __future__ import annotations

import shutil
from pathlib import Path

from bot.review.checkout import Checkout, kernel_globs, load_checkout, missing_submodule, no_manifest
from tests.conftest import REPO_CONFIG, ROOT


def tree(tmp_path: Path) -> Path:
    root = tmp_path / "tree"
    shutil.copytree(ROOT / "kernels" / "deepgemm_tile", root / "kernels" / "deepgemm_tile")
    (root / "kernels" / "broken").mkdir(parents=True)
    (root / "kernels" / "broken" / "kernel.toml").write_text("[kernel\nname = ")
    return root


def test_a_side_holds_the_kernels_that_load_and_the_reason_of_one_that_does_not(tmp_path: Path):
    root = tree(tmp_path)
    side = load_checkout("a" * 40, root, REPO_CONFIG)
    assert list(side.kernels) == ["deepgemm_tile"] and side.folders["deepgemm_tile"] == "kernels/deepgemm_tile"
    assert side.kernels["deepgemm_tile"].path == "kernels/deepgemm_tile"
    assert list(side.broken) == ["broken"] and str(root) not in side.broken["broken"]
    assert "kernels/broken/kernel.toml" in side.broken["broken"]


def test_a_kernel_inside_a_missing_submodule_cannot_be_compiled_and_says_how_to_check_it_out(tmp_path: Path):
    side = load_checkout("a" * 40, tree(tmp_path), REPO_CONFIG)
    kernel = side.kernels["deepgemm_tile"]
    assert missing_submodule(kernel, side, "head") is None
    side.missing = {"kernels/other": "not checked out"}
    assert missing_submodule(kernel, side, "head") is None  # a submodule it does not read
    side.missing = {"kernels": "not checked out"}
    why = missing_submodule(kernel, side, "head")
    assert why is not None and why.startswith(
        f"kernels/deepgemm_tile: submodule kernels of head ({'a' * 12}) is not checked out"
    )
    assert "git submodule update --init --recursive" in why


def test_a_kernel_without_a_loadable_manifest_watches_its_whole_folder(tmp_path: Path):
    side = load_checkout("a" * 40, tree(tmp_path), REPO_CONFIG)
    empty = Checkout(sha="b" * 40, tree=tmp_path)
    assert kernel_globs("broken", empty, side) == ["kernels/broken/**"]
    globs = kernel_globs("deepgemm_tile", empty, side)
    assert globs and all(g.startswith("kernels/deepgemm_tile/") for g in globs)
    assert kernel_globs("deepgemm_tile", side, side) == globs + globs  # head's globs, then base's
    assert "no kernel manifest found" in str(no_manifest(REPO_CONFIG))
