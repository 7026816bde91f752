"""A scratch repository of kernels that real repositories' compiles trip on (tests/fixtures/compile_repo): a .cu that
includes <cusparse.h>, a CPU body that includes a header of a submodule never checked out, and a header-only kernel
whose instantiation .cu uses sm_90a's wgmma."""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.conftest import ROOT, SUMMARY_TASK, KernelRepo, git, repo_config_toml

FIXTURE = Path(__file__).parent / "fixtures" / "compile_repo"
BASE_SPILL = Path(__file__).parent / "fixtures" / "base_spill_repo"  # ops/conv1d: base's backward unit spills


def make_compile_repo(path: Path, fixture: Path = FIXTURE) -> KernelRepo:
    """The fixture committed as the base of a scratch repository (its kernels in ops/)."""
    shutil.copytree(fixture, path)
    return ops_repo(path, {}, "kernels that real repositories' compiles trip on")


def ops_repo(path: Path, files: dict[str, str], message: str) -> KernelRepo:
    """A scratch repository at `path` (made if missing) whose opgate.toml finds its kernels in ops/, with `files`
    (repository path -> text) written beside what `path` already holds, all committed as its base."""
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q", "-b", "main")
    git(path, "config", "user.email", "test@opgate.local")
    git(path, "config", "user.name", "opgate tests")
    config = repo_config_toml().replace('manifests = ["kernels/*/kernel.toml"]', 'manifests = ["ops/*/kernel.toml"]')
    assert 'manifests = ["ops/' in config
    (path / "opgate.toml").write_text(config)
    shutil.copy(ROOT / SUMMARY_TASK, path / SUMMARY_TASK)
    repo = KernelRepo(path=path, base="")
    for relpath, text in files.items():
        repo.write(relpath, text)
    repo.base = repo.commit(message)
    return repo


def prepend(repo: KernelRepo, relpath: str, text: str) -> None:
    """`text` put above the file's first line (a comment-only change moves every line below it)."""
    target = repo.path / relpath
    target.write_text(text + target.read_text())


def review(opgate, repo: KernelRepo, head: str):
    return opgate("review", "--repo", str(repo.path), "--base", repo.base, "--head", head, "--offline")
