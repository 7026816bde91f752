"""What a kernel's build reads beyond its folder (bot/config/includes.py): include_dirs as folders of the checkout,
a missing one or a symlink out of the repository named with its manifest and build, and the paths whose change
touches the kernel (its globs, every include directory, the folders above one, where a submodule would be)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.config.includes import include_dirs, include_findings, include_paths, repo_root, watched_globs
from bot.config.manifest import load_kernel
from bot.errors import InputError
from tests.conftest import KernelRepo

MANIFEST = "kernels/deepgemm_tile/kernel.toml"


def with_includes(repo: KernelRepo, cpu: list[str], cuda: list[str]):
    for device, dirs in (("cpu", cpu), ("cuda", cuda)):
        repo.edit(MANIFEST, f"[build.{device}]\n", f"[build.{device}]\ninclude_dirs = {dirs!r}\n".replace("'", '"'))
    return load_kernel(repo.path / "kernels" / "deepgemm_tile")


def test_include_dirs_are_folders_of_the_checkout_and_the_change_that_touches_them(kernel_repo: KernelRepo) -> None:
    (kernel_repo.path / "third_party" / "cutlass" / "include").mkdir(parents=True)
    (kernel_repo.path / "common").mkdir()
    kernel = with_includes(kernel_repo, ["common"], ["third_party/cutlass/include", "common"])
    assert repo_root(kernel) == kernel_repo.path
    assert include_dirs(kernel, "cpu") == ["common"]
    assert include_dirs(kernel) == ["common", "third_party/cutlass/include"]  # every build, each once
    root = kernel_repo.path.resolve()
    assert include_paths(kernel, "cuda") == [root / "third_party/cutlass/include", root / "common"]
    assert include_findings(kernel) == []
    assert watched_globs(kernel) == [
        "kernels/deepgemm_tile/**",
        "common/**",
        "common",
        "third_party/cutlass/include/**",
        "third_party",  # a submodule at third_party/ or third_party/cutlass/ is one path in a diff
        "third_party/cutlass",
        "third_party/cutlass/include",
    ]


def test_a_missing_include_dir_or_one_leading_out_is_named_with_its_build(
    kernel_repo: KernelRepo, tmp_path: Path
) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (kernel_repo.path / "escape").symlink_to(outside)
    kernel = with_includes(kernel_repo, ["nosuch"], ["escape"])
    with pytest.raises(InputError, match=r"kernels/deepgemm_tile/kernel.toml \[build.cpu\] include_dirs: 'nosuch' is"):
        include_paths(kernel, "cpu")
    where = "kernels/deepgemm_tile/kernel.toml [build.{}] include_dirs"
    assert include_findings(kernel) == [
        f"{where.format('cpu')}: 'nosuch' is not a folder in the repository",
        f"{where.format('cuda')}: 'escape' leads out of the repository (a symlink?)",
    ]
