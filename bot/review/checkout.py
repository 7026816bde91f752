"""Base and head checked out in temporary worktrees, each with the kernels its own manifests define."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from bot.config.includes import claimed_globs, include_dirs, watched_globs
from bot.config.manifest import ROOT, Kernel, find_manifests, folder_glob, load_kernel
from bot.config.repo import RepoConfig
from bot.edges import gitio
from bot.errors import InputError


@dataclass
class Checkout:
    """One revision checked out: its kernels, or the error that stopped a kernel loading."""

    sha: str
    tree: Path
    kernels: dict[str, Kernel] = field(default_factory=dict)
    broken: dict[str, str] = field(default_factory=dict)
    folders: dict[str, str] = field(default_factory=dict)  # kernel -> its folder from the repository root
    missing: dict[str, str] = field(default_factory=dict)  # submodule path -> why it is not in the worktree


def load_checkout(sha: str, tree: Path, config: RepoConfig) -> Checkout:
    """The kernels the configuration's manifest globs find in one checkout (its own manifests, base's config)."""
    side = Checkout(sha=sha, tree=tree)
    for name, folder in find_manifests(tree, config.manifests).items():
        side.folders[name] = folder
        try:
            side.kernels[name] = load_kernel(tree / folder, config=config, path=folder)
        except InputError as exc:
            side.broken[name] = str(exc).replace(str(tree) + "/", "")
    return side


@contextlib.contextmanager
def checkouts(repo: Path, base: str, head: str, config: RepoConfig) -> Iterator[tuple[Checkout, Checkout]]:
    """Base and head in worktrees, each with the submodules it pins (from the objects the checkout holds)."""
    with gitio.worktree(repo, base) as base_tree, gitio.worktree(repo, head) as head_tree:
        sides = []
        for sha, tree in ((base, base_tree), (head, head_tree)):
            missing = gitio.populate_submodules(repo, sha, tree)
            side = load_checkout(sha, tree, config)
            side.missing = missing
            sides.append(side)
        yield sides[0], sides[1]


def missing_submodule(kernel: Kernel, side: Checkout, label: str) -> str | None:
    """Why `kernel` cannot be compiled from this side: a submodule its folder or include_dirs lie in (or that lies
    in them) is not in the checkout; None when every one it reads is there."""
    reads = [kernel.path, *include_dirs(kernel)]
    for path, why in sorted(side.missing.items()):
        if any(r in (path, ROOT) or r.startswith(f"{path}/") or path.startswith(f"{r}/") for r in reads):
            return (
                f"{kernel.path}: submodule {path} of {label} ({side.sha[:12]}) is {why}: check the repository out "
                "with its submodules and their history (git submodule update --init --recursive; actions/checkout: "
                "submodules: recursive, fetch-depth: 0)"
            )
    return None


def folder_of(name: str, base: Checkout, head: Checkout) -> str:
    return head.folders.get(name) or base.folders[name]


def kernel_globs(name: str, base: Checkout, head: Checkout) -> list[str]:
    """The paths whose change touches a kernel, on both sides (`watched_globs`; one without a loadable manifest: its
    folder)."""
    known = [watched_globs(k) for k in (head.kernels.get(name), base.kernels.get(name)) if k is not None]
    return [g for gs in known for g in gs] or [folder_glob(folder_of(name, base, head))]


def kernel_claims(name: str, base: Checkout, head: Checkout) -> list[str]:
    """The paths a kernel claims for coverage, on both sides (`claimed_globs`; one without a manifest: its folder)."""
    known = [claimed_globs(k) for k in (head.kernels.get(name), base.kernels.get(name)) if k is not None]
    return [g for gs in known for g in gs] or [folder_glob(folder_of(name, base, head))]


def no_manifest(config: RepoConfig) -> InputError:
    globs = ", ".join(config.manifests)
    return InputError(
        f"no kernel manifest found: {globs} match no kernel.toml in base or head; set manifests in "
        f"{config.where()} to where your kernels are (opgate init writes one)"
    )
