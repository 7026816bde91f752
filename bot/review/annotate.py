"""The review's annotations: head's sources read from the review's own checkout for the locators of
bot/present/annotations.py, the lint of the changed files the command passes in (`opgate lint`'s, from
bot/commands/review.py: the core never imports a side feature), and annotations.json beside report.json (a part's
annotations travel to the publish job as data, like its report)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

from pydantic import TypeAdapter, ValidationError

from bot.config.manifest import ROOT, Kernel, repo_file
from bot.errors import OpgateError
from bot.models.diff import FileChange
from bot.models.github import Annotation
from bot.models.report import KernelReport, Report
from bot.present.annotations import SOURCE_SUFFIXES, EntryPlace, KernelSources, LintPlace, Sources, for_review
from bot.review.checkout import Checkout
from bot.text.redact import redact

log = logging.getLogger(__name__)

ANNOTATIONS_FILE = "annotations.json"
MAX_FILES = 400  # a kernel's C/C++/CUDA files read for the locators, at most
MAX_FILE_BYTES = 1024 * 1024
MAX_ANNOTATIONS_BYTES = 4 * 1024 * 1024  # a part's annotations.json, at most (it comes from a job that ran PR code)
_LIST = TypeAdapter(list[Annotation])
ChangedLint = Callable[[Path, list[FileChange]], list[LintPlace]]  # head's tree, the diff -> findings with a line


def _wanted(kernel: KernelReport) -> bool:
    """Whether a kernel has something a locator places: resources, a case that failed, or a finding with a line."""
    return kernel.changed and (
        any(c.head for c in kernel.resource_checks())
        or any(c.verdict in ("fail", "error") for c in kernel.cases)
        or any(f.file and f.line for f in kernel.findings)
    )


def _kernel_sources(tree: Path, folder: str, kernel: Kernel) -> tuple[KernelSources, dict[str, str]]:
    builds = {
        device: EntryPlace(entry=spec.entry, sources=[repo_file(folder, s) for s in spec.sources])
        for device, spec in kernel.manifest.build.items()
    }
    if folder == ROOT:  # a kernel at the repository root: the files its builds name, not the whole repository
        candidates = [tree / p for b in builds.values() for p in b.sources]
    else:
        candidates = sorted(p for p in (tree / folder).rglob("*") if p.suffix in SOURCE_SUFFIXES)
    candidates.append(tree / repo_file(folder, kernel.manifest.config))  # the tunables' lines (static findings)
    texts: dict[str, str] = {}
    for path in candidates[:MAX_FILES]:
        try:
            if path.is_file() and not path.is_symlink() and path.stat().st_size <= MAX_FILE_BYTES:
                texts[path.relative_to(tree).as_posix()] = path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
    return KernelSources(files=sorted(texts), builds=builds), texts


def gather(
    report: Report, changes: list[FileChange], head: Checkout, lint: ChangedLint | None = None
) -> list[Annotation]:
    """The annotations of a finished review, from what the review read: its diff (`changes`) and its checkout of head
    (`head`, the kernels its manifests define), for the kernels that have something to place, and `lint`'s findings
    in the changed files. No git call, no second checkout. Never fails the review: an error logs and gives none."""
    try:
        kernels: dict[str, KernelSources] = {}
        texts: dict[str, str] = {}
        tree = head.tree
        places = lint(tree, changes) if lint is not None else []
        for name in (k.name for k in report.kernels if _wanted(k)):
            if name in head.folders and (kernel := head.kernels.get(name)) is not None:
                kernels[name], read = _kernel_sources(tree, head.folders[name], kernel)
                texts.update(read)
        for place in places:
            if place.path not in texts and (tree / place.path).is_file():
                texts[place.path] = (tree / place.path).read_text(encoding="utf-8", errors="replace")
        return for_review(report, changes, Sources(texts=texts, kernels=kernels), places)
    except OpgateError as exc:
        log.warning("no annotations: %s", exc)
        return []


def write(out: Path, items: list[Annotation]) -> Path:
    path = out / ANNOTATIONS_FILE
    path.write_text(redact(_LIST.dump_json(items, indent=2).decode()) + "\n")
    return path


def read(folder: Path) -> list[Annotation]:
    """A part's annotations (none when it has no annotations.json); the job that wrote them ran PR code, so a file
    that is too large or not the model is left out with a warning, never a failure of the merge."""
    path = folder / ANNOTATIONS_FILE
    try:
        if not path.is_file():
            return []
        if path.stat().st_size > MAX_ANNOTATIONS_BYTES:
            raise ValueError(f"over {MAX_ANNOTATIONS_BYTES // 2**20} MiB")
        return _LIST.validate_json(path.read_bytes())
    except (OSError, ValueError, ValidationError) as exc:
        log.warning("%s: its annotations are left out (%s)", path, type(exc).__name__)
        return []


__all__ = ["ANNOTATIONS_FILE", "ChangedLint", "gather", "read", "write"]
