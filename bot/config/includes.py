"""What a kernel's build reads beyond its own folder: `include_dirs` resolved inside the repository, and the paths
whose change touches the kernel (its globs, its include directories, the submodules they lie in)."""

from __future__ import annotations

from pathlib import Path

from bot.config.manifest import MANIFEST_NAME, Kernel
from bot.errors import InputError


def repo_root(kernel: Kernel) -> Path:
    """The checkout the kernel was loaded from: its folder less `kernel.path`."""
    root = kernel.folder
    for _ in Path(kernel.path).parts:
        root = root.parent
    return root


def include_dirs(kernel: Kernel, device: str | None = None) -> list[str]:
    """The include directories of one build (all builds when `device` is None), as the manifest writes them."""
    specs = [kernel.manifest.build[device]] if device in kernel.manifest.build else []
    if device is None:
        specs = list(kernel.manifest.build.values())
    return list(dict.fromkeys(d for spec in specs for d in spec.include_dirs))


def include_paths(kernel: Kernel, device: str) -> list[Path]:
    """The include directories of the `device` build as folders of this checkout; InputError for one that is not a
    folder inside it (missing, a file, or a symlink that leads out of the repository)."""
    root = repo_root(kernel).resolve()
    out = []
    for rel in include_dirs(kernel, device):
        path = (root / rel).resolve()
        if not path.is_relative_to(root):
            raise InputError(f"{_where(kernel, device)}: {rel!r} leads out of the repository (a symlink?)")
        if not path.is_dir():
            raise InputError(f"{_where(kernel, device)}: {rel!r} is not a folder in the repository")
        out.append(path)
    return out


def include_findings(kernel: Kernel) -> list[str]:
    """One finding per build whose include directories cannot be used (what the review fails on)."""
    findings = []
    for device in kernel.manifest.build:
        try:
            include_paths(kernel, device)
        except InputError as exc:
            findings.append(str(exc))
    return findings


def watched_globs(kernel: Kernel) -> list[str]:
    """The globs whose change touches the kernel: its own, every include directory's files, and the paths above an
    include directory (a submodule the directory lies in is one path in a diff: `Subproject commit …`)."""
    globs = list(kernel.manifest.globs)
    for rel in include_dirs(kernel):
        globs.append(f"{rel}/**")
        parts = rel.split("/")
        globs += ["/".join(parts[: i + 1]) for i in range(len(parts))]
    return list(dict.fromkeys(globs))


def _where(kernel: Kernel, device: str) -> str:
    return f"{kernel.path}/{MANIFEST_NAME} [build.{device}] include_dirs"
