"""A scratch repository of ops as repositories write them (tests/fixtures/ops_repo): an op whose bias is an optional
tensor (a case passes None), a CUDA-only op whose reference takes a case's `args` scalar, and a `.cu` that includes
torch's CUDA headers (<c10/cuda/CUDAStream.h>), which torch's CPU build on this machine cannot compile."""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.conftest import KernelRepo, git

FIXTURE = Path(__file__).parent / "fixtures" / "ops_repo"


def make_ops_repo(path: Path) -> KernelRepo:
    """The fixture committed as the base of a scratch repository at `path` (its own opgate.toml: kernels in ops/)."""
    shutil.copytree(FIXTURE, path, dirs_exist_ok=True)
    git(path, "init", "-q", "-b", "main")
    git(path, "config", "user.email", "test@opgate.local")
    git(path, "config", "user.name", "opgate tests")
    repo = KernelRepo(path=path, base="")
    repo.base = repo.commit("ops as repositories write them")
    return repo
