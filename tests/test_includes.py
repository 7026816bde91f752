"""What a kernel's build reads beyond its folder (bot/config/includes.py): include_dirs as folders of the checkout,
a missing one or a symlink out of the repository named with its manifest and build, the files a build reads (its
`#include`s resolved as the compiler does), and the paths whose change touches the kernel (its globs, the files its
build reads, the folders above an include directory, where a submodule would be)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bot.config.includes import (
    build_reads,
    claimed_globs,
    include_dirs,
    include_findings,
    include_paths,
    repo_root,
    resolve_include,
    watched_globs,
)
from bot.config.manifest import load_kernel
from bot.config.repo import load_config
from bot.edges import gitio
from bot.errors import InputError
from bot.review.changes import matches, parse_diff, touching
from bot.review.checkout import checkouts, kernel_globs
from tests.conftest import KernelRepo, git, repo_config_toml

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
    assert watched_globs(kernel) == [  # its sources include nothing outside its folder
        "kernels/deepgemm_tile/**",
        "common",
        "third_party",  # a submodule at third_party/ or third_party/cutlass/ is one path in a diff
        "third_party/cutlass",
        "third_party/cutlass/include",
    ]
    assert claimed_globs(kernel) == [
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


TWO_KERNELS = "csrc/sm90/decode"
SPARSE_MANIFEST = """\
name = "{name}"
domain = "flashmla"
globs = ["csrc/sm90/decode/{name}/**"]

[build.cuda]
sources = ["instantiations/bf16.cu"]
include_dirs = ["csrc"]
cuda_cflags = ["-O3", "-std=c++20"]
"""


def two_kernels_one_header_name(root: Path) -> KernelRepo:
    """FlashMLA's layout: dense/ and sparse_fp8/ each hold a splitkv_mla.cuh (one `#include "splitkv_mla.cuh"` from
    its own instantiation, one `#include <…>` of its own folder's header through the csrc include directory), both
    include csrc/params.h, and csrc/ is both kernels' include directory."""
    repo = KernelRepo(path=root, base="")
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    git(root, "config", "user.email", "test@opgate.local")
    git(root, "config", "user.name", "opgate tests")
    repo.write("opgate.toml", repo_config_toml().replace("kernels/*/kernel.toml", "csrc/**/kernel.toml"))
    repo.write("csrc/params.h", "struct Params { int n; };\n")
    repo.write("csrc/unrelated.h", "// read by no kernel\n")
    for name in ("dense", "sparse_fp8"):
        folder = f"{TWO_KERNELS}/{name}"
        repo.write(f"{folder}/kernel.toml", SPARSE_MANIFEST.format(name=name))
        repo.write(f"{folder}/splitkv_mla.cuh", f'// {name} decode\n#include "params.h"\n#include "traits.h"\n')
        repo.write(f"{folder}/traits.h", f"// {name} traits\n")
        repo.write(
            f"{folder}/instantiations/bf16.cu",
            f'#include "../splitkv_mla.cuh"\n#include <sm90/decode/{name}/traits.h>\n#include <cuda_runtime.h>\n',
        )
    repo.base = repo.commit("two kernels, each with its own splitkv_mla.cuh")
    return repo


def test_a_header_resolves_beside_its_includer_then_the_include_dirs_never_by_its_name(tmp_path: Path) -> None:
    repo = two_kernels_one_header_name(tmp_path / "repo")
    dense = load_kernel(repo.path / TWO_KERNELS / "dense", path=f"{TWO_KERNELS}/dense")
    sparse = load_kernel(repo.path / TWO_KERNELS / "sparse_fp8", path=f"{TWO_KERNELS}/sparse_fp8")
    folder = f"{TWO_KERNELS}/sparse_fp8"
    assert build_reads(sparse) == {
        f"{folder}/instantiations/bf16.cu",
        f"{folder}/splitkv_mla.cuh",  # "../splitkv_mla.cuh" beside the .cu: its own, not dense's
        f"{folder}/traits.h",  # <sm90/decode/sparse_fp8/traits.h> through -I csrc; "traits.h" beside the .cuh
        "csrc/params.h",  # "params.h": not beside the .cuh, so the first -I folder that holds it
    }
    watched = watched_globs(sparse)
    assert matches(f"{folder}/traits.h", watched) and matches("csrc/params.h", watched)
    assert not matches(f"{TWO_KERNELS}/dense/splitkv_mla.cuh", watched)
    assert not matches("csrc/unrelated.h", watched)  # under the include directory, read by no one
    assert matches("csrc", watched)  # the include directory as one path in a diff: a submodule there
    assert matches("csrc/unrelated.h", claimed_globs(sparse))  # still claimed: never an unclaimed source
    quoted = repo.path / folder / "splitkv_mla.cuh"
    search = [dense.folder, repo.path / "csrc"]
    assert resolve_include("traits.h", True, quoted, search) == repo.path / folder / "traits.h"
    assert resolve_include("traits.h", False, quoted, search) == dense.folder / "traits.h"  # <…>: -I folders only


def test_a_comment_in_one_kernels_splitkv_mla_cuh_plans_only_that_kernel(opgate, tmp_path: Path) -> None:
    repo = two_kernels_one_header_name(tmp_path / "repo")
    repo.edit(f"{TWO_KERNELS}/dense/splitkv_mla.cuh", "// dense decode", "// dense decode (reworded)")
    head = repo.commit("a comment in dense/splitkv_mla.cuh")
    plan = opgate("review", "--plan", "--repo", str(repo.path), "--base", repo.base, "--head", head)
    assert plan.code == 0, plan.stdout + plan.stderr
    assert [k["kernel"] for k in json.loads(plan.stdout)["include"]] == ["dense"]
    changes = parse_diff(gitio.diff(repo.path, repo.base, head))
    with checkouts(repo.path, repo.base, head, load_config(repo.path)) as (base, head_side):
        touched = {n: bool(touching(changes, kernel_globs(n, base, head_side))) for n in ("dense", "sparse_fp8")}
    assert touched == {"dense": True, "sparse_fp8": False}
    repo.edit("csrc/params.h", "int n;", "int n;  // both read it")
    both = opgate("review", "--plan", "--repo", str(repo.path), "--base", head, "--head", repo.commit("params"))
    assert [k["kernel"] for k in json.loads(both.stdout)["include"]] == ["dense", "sparse_fp8"]
