"""A scratch repository shaped like FlashMLA: a kernel folder whose .cu sits in instantiations/ and includes
../kernel.cuh, headers from csrc/ and from a header-only dependency that is a real git submodule (a local
repository made here), FlashMLA's own nvcc flags, no reference and no case (tests/fixtures/flashmla_shape)."""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

from tests.conftest import KernelRepo, git, repo_config_toml

FIXTURE = Path(__file__).parent / "fixtures" / "flashmla_shape"
KERNEL = "csrc/sm90/decode/dense"
SUBMODULE = "csrc/minicute"


def _init(path: Path) -> None:
    git(path, "init", "-q", "-b", "main")
    git(path, "config", "user.email", "test@opgate.local")
    git(path, "config", "user.name", "opgate tests")


def make_dependency(path: Path) -> Path:
    """The header-only dependency (minicute) as its own repository with one commit."""
    shutil.copytree(FIXTURE / "dep", path)
    _init(path)
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "minicute v1")
    return path


def make_flashmla_repo(root: Path) -> tuple[KernelRepo, Path]:
    """(the repository, its dependency's repository): the kernel and csrc/ committed with minicute as a submodule."""
    dep = make_dependency(root / "minicute")
    path = root / "repo"
    shutil.copytree(FIXTURE / "repo", path)
    _init(path)
    config = repo_config_toml().replace('manifests = ["kernels/*/kernel.toml"]', 'manifests = ["csrc/**/kernel.toml"]')
    assert 'manifests = ["csrc/' in config
    (path / "opgate.toml").write_text(config)
    # a local repository as the submodule's URL (git refuses file:// submodules unless told otherwise)
    git(path, "-c", "protocol.file.allow=always", "submodule", "add", "-q", str(dep), SUBMODULE)
    repo = KernelRepo(path=path, base="")
    repo.base = repo.commit("a FlashMLA-shaped kernel with a submodule")
    return repo, dep


def bump_dependency(repo: KernelRepo, dep: Path, old: str, new: str) -> str:
    """A new commit of the dependency (`old` -> `new` in its header), pulled into the submodule and committed."""
    header = dep / "include" / "minicute" / "numeric.hpp"
    text = header.read_text()
    assert old in text
    header.write_text(text.replace(old, new, 1))
    git(dep, "commit", "-q", "-am", "minicute v2")
    sub = repo.path / SUBMODULE
    git(sub, "-c", "protocol.file.allow=always", "pull", "-q", "origin", "main")
    return repo.commit("bump minicute")


# FlashMLA's own nvcc flags, as its setup.py passes them
FLASHMLA_NVCC = [
    "-O3", "-std=c++20", "-DNDEBUG", "-D_USE_MATH_DEFINES", "-Wno-deprecated-declarations",
    "-U__CUDA_NO_HALF_OPERATORS__", "-U__CUDA_NO_HALF_CONVERSIONS__", "-U__CUDA_NO_HALF2_OPERATORS__",
    "-U__CUDA_NO_BFLOAT16_CONVERSIONS__", "--expt-relaxed-constexpr", "--expt-extended-lambda", "--use_fast_math",
    "--ptxas-options=-v,--register-usage-level=10,--warn-on-spills,--warn-on-local-memory-usage,"
    "--warn-on-double-precision-use",
    "-lineinfo", "--source-in-ptx", "-DFLASH_MLA_DISABLE_FP16",
    "-gencode", "arch=compute_100f,code=sm_100f", "-gencode", "arch=compute_90a,code=sm_90a", "--threads", "32",
]  # fmt: skip


def write_manifest(folder: Path, manifest: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "kernel.toml").write_text(textwrap.dedent(manifest))
    return folder / "kernel.toml"
