"""What a kernel's build reads beyond its own folder: `include_dirs` resolved inside the repository, the files its
sources `#include` (resolved as the compiler resolves them), and the paths whose change touches the kernel."""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

from bot.config.manifest import MANIFEST_NAME, ROOT, Kernel, in_folder
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


_INCLUDE = re.compile(rb'^[ \t]*#[ \t]*include[ \t]*([<"])([^">\n]+)[">]', re.M)


@lru_cache(maxsize=8192)
def _includes(path: Path, stamp: tuple[int, int]) -> tuple[tuple[str, bool], ...]:
    """The `#include` lines of one file as (name, quoted); `stamp` (mtime, size) keys the cache."""
    return tuple((m[2].decode(errors="replace"), m[1] == b'"') for m in _INCLUDE.finditer(path.read_bytes()))


def resolve_include(name: str, quoted: bool, including: Path, search: Sequence[Path]) -> Path | None:
    """The file a compiler opens for `#include "name"` (the including file's folder first, then each -I folder of
    `search` in order) or `#include <name>` (the -I folders only); None when none holds it (a system header)."""
    folders = [including.parent, *search] if quoted else list(search)
    return next((d / name for d in folders if (d / name).is_file()), None)


def build_reads(kernel: Kernel) -> set[str]:
    """The repository files (from its root) the kernel's builds read: their sources, the launch headers the fold
    includes, and every repository file those `#include`, transitively (`include_closure`)."""
    reads: set[str] = set()
    for device, spec in kernel.manifest.build.items():
        headers = kernel.manifest.launch.headers if device == "cuda" else []
        reads |= include_closure(kernel, device, [kernel.folder / s for s in (*spec.sources, *headers)])
    return reads


def include_closure(kernel: Kernel, device: str, starts: Sequence[Path]) -> set[str]:
    """`starts` and every repository file they `#include`, transitively, as paths from the repository root. Each
    include is resolved as the `device` build's compiler resolves it (`resolve_include`: the kernel folder, then the
    include directories, are its -I folders) — never as "any file of that name", so two folders that each hold a
    `splitkv_mla.cuh` stay apart. Unusable include directories are left out (the review fails on them:
    `include_findings`)."""
    root = repo_root(kernel).resolve()
    try:
        search = [kernel.folder.resolve(), *include_paths(kernel, device)]
    except InputError:
        search = [kernel.folder.resolve()]
    seen: set[Path] = set()
    todo = [p.resolve() for p in starts]
    while todo:
        path = todo.pop()
        if path in seen or not path.is_relative_to(root) or not path.is_file():
            continue
        seen.add(path)
        stat = path.stat()
        for name, quoted in _includes(path, (stat.st_mtime_ns, stat.st_size)):
            found = resolve_include(name, quoted, path, search)
            if found is not None:
                todo.append(found.resolve())
    return {p.relative_to(root).as_posix() for p in seen}


def watched_globs(kernel: Kernel) -> list[str]:
    """The paths whose change touches the kernel: its own globs, every file its builds read outside its folder
    (`build_reads`), and the folders above those files and above each include directory (a submodule is one path
    in a diff: `Subproject commit …`). A file that merely lies under an include directory does not touch it."""
    globs = list(kernel.manifest.globs)
    own = f"{kernel.path}/**" in globs or (kernel.path == ROOT and "**" in globs)
    reads = sorted(p for p in build_reads(kernel) if not (own and in_folder(kernel.path, p) is not None))
    for path in reads:
        globs += [path, *_above(path.rpartition("/")[0])] if "/" in path else [path]
    for rel in include_dirs(kernel):
        globs += _above(rel)
    return list(dict.fromkeys(globs))


def claimed_globs(kernel: Kernel) -> list[str]:
    """The paths the kernel claims for coverage (a changed kernel source under none of any kernel's claims fails
    the review): its globs and every include directory's files, with the folders above an include directory."""
    globs = list(kernel.manifest.globs)
    for rel in include_dirs(kernel):
        globs.append(f"{rel}/**")
        globs += _above(rel)
    return list(dict.fromkeys(globs))


def _above(rel: str) -> list[str]:
    parts = rel.split("/")
    return ["/".join(parts[: i + 1]) for i in range(len(parts))]


def _where(kernel: Kernel, device: str) -> str:
    return f"{kernel.path}/{MANIFEST_NAME} [build.{device}] include_dirs"
