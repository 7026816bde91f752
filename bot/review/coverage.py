"""What no gate read in a change: binary files, files over a size limit, files in no kernel, a kernel's changed
sources that no build which ran here compiles (pure)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from bot.config.manifest import in_folder
from bot.config.repo import KERNEL_SOURCES
from bot.models.diff import FileChange
from bot.models.finding import Finding, Gate, Outcome
from bot.models.report import Coverage, Listed
from bot.review.changes import matches

LARGE_FILE_BYTES = 1024 * 1024  # a changed file larger than this in head is listed for a person to look at
COMPILED_SUFFIXES = (".c", ".cc", ".cpp", ".cxx", ".cu", ".cuh", ".h", ".hh", ".hpp", ".inl")
LISTED_NAMES = 50  # names kept per group in report.json (the comment shows fewer, and counts the rest)


def listed(names: Iterable[str]) -> Listed:
    every = list(dict.fromkeys(names))
    return Listed(total=len(every), names=every[:LISTED_NAMES])


def coverage(
    changes: list[FileChange],
    globs: list[str],
    sizes: Mapping[str, int],
    limit: int = LARGE_FILE_BYTES,
    ignore: list[str] | None = None,
) -> Coverage:
    """Group the changed files no gate reads: binary (no line was diffed), larger than `limit` bytes in head
    (`sizes`: path -> bytes; a deleted file has none), and matched by none of the kernels' `globs` — among
    those, the ones that look like kernel sources (*.cu, *.cuh) and no `ignore` glob excuses."""
    unmatched = [c for c in changes if not any(matches(p, globs) for p in c.paths)]
    return Coverage(
        files=len(changes),
        size_limit_bytes=limit,
        binary=listed(c.path for c in changes if c.binary),
        large=listed(c.path for c in changes if sizes.get(c.path, 0) > limit),
        unmatched=listed(c.path for c in unmatched),
        kernel_sources=listed(unclaimed_sources(unmatched, ignore or [])),
    )


def unclaimed_sources(unmatched: list[FileChange], ignore: list[str]) -> list[str]:
    """Changed files in no kernel's globs that look like kernel sources, unless the configuration ignores them."""
    return [
        c.path
        for c in unmatched
        if any(matches(p, [f"**/{s}"]) for p in c.paths for s in KERNEL_SOURCES)
        and not any(matches(p, ignore) for p in c.paths)
    ]


def unclaimed_reason(cov: Coverage) -> str:
    """One line: which kernel sources no manifest claims, and the fix."""
    names = ", ".join(cov.kernel_sources.names[:5]) + (" …" if cov.kernel_sources.total > 5 else "")
    return (
        f"{cov.kernel_sources.total} changed kernel source file(s) no kernel.toml claims ({names}): add a manifest "
        "(opgate init) or widen a kernel's globs, or list them under ignore in the opgate configuration"
    )


def _unread(key: str, path: str, **params: str) -> Finding:
    return Finding(gate=Gate.coverage, outcome=Outcome.undecided, key=key, params={"path": path, **params}, file=path)


def not_judged_findings(
    paths: Iterable[str], folder: str, compiled: Mapping[str, set[str]], ran: Iterable[str]
) -> list[Finding]:
    """One finding per changed C/C++/CUDA file of a kernel (`paths`, from the repository root) that no build which
    ran here compiles, at that file: `compiled` is device -> the files each build section compiles (relative to the
    kernel's `folder`), `ran` the devices built on this machine. Such a change is never a pass."""
    lines, ran = [], set(ran)
    for path in dict.fromkeys(paths):
        if not path.endswith(COMPILED_SUFFIXES):
            continue
        rel = in_folder(folder, path)
        devices = [d for d, files in compiled.items() if rel is not None and rel in files]
        if any(d in ran for d in devices):
            continue
        if not devices:
            lines.append(_unread("coverage.not_compiled", path))
        else:
            builds = ", ".join(f"[build.{d}]" for d in devices)
            lines.append(_unread("coverage.not_compiled_here", path, builds=builds))
    return lines


def not_read_findings(paths: Iterable[str], read: set[str]) -> list[Finding]:
    """One finding per changed file of a resource-only kernel (`paths`, from the repository root) that its resource
    check does not read (`read`: `resource_reads`): its binding .cpp, a Python wrapper, a host-side header. Such a
    change is never a pass, and never "unchanged from base"."""
    folders = {f"{'/'.join(r.split('/')[:i])}/" for r in read for i in range(1, r.count("/") + 1)}
    return [
        _unread("coverage.not_read", path)
        for path in dict.fromkeys(paths)
        if path not in read and f"{path}/" not in folders  # a submodule's gitlink: read where its files are
    ]
