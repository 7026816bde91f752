"""Where a kernel new by name comes from: git's rename and copy detection, folded to kernels (pure).

A head kernel whose name base does not know is a rename or copy of a base kernel when most of its folder's
bytes come, by git's rename/copy detection, from that kernel's folder; it is then held to that kernel's
manifest, reference and build under the old name. Otherwise it is new: judged by a manifest and a
reference the change itself wrote, so only a person can accept it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

MOST = 0.5  # the share of a folder's bytes that must come from one base kernel


@dataclass(frozen=True)
class Origin:
    """The base kernel a head kernel comes from, and how: renamed (gone from head) or copied (still there)."""

    base: str
    how: Literal["renamed", "copied"]
    share: float


def _under(path: str, folder: str) -> bool:
    return path.startswith(folder.rstrip("/") + "/")


def origins(
    copies: list[tuple[str, str]],
    sizes: dict[str, int],
    head_folders: dict[str, str],
    base_folders: dict[str, str],
) -> dict[str, Origin]:
    """Head kernel name -> its Origin, for every head kernel new by name that comes mostly from one base kernel.

    `copies` are git's (source, target) pairs, `sizes` the head tree's file sizes, the folders kernel -> folder."""
    found: dict[str, Origin] = {}
    for name, folder in head_folders.items():
        if name in base_folders:
            continue
        total = sum(size for path, size in sizes.items() if _under(path, folder))
        by_kernel: dict[str, int] = {}
        for source, target in copies:
            if not _under(target, folder):
                continue
            kernel = next((k for k, f in base_folders.items() if _under(source, f)), None)
            if kernel is not None:
                by_kernel[kernel] = by_kernel.get(kernel, 0) + sizes.get(target, 0)
        if not by_kernel or total <= 0:
            continue
        kernel, share = max(by_kernel.items(), key=lambda kv: (kv[1], kv[0]))
        if share / total >= MOST:
            how: Literal["renamed", "copied"] = "copied" if kernel in head_folders else "renamed"
            found[name] = Origin(base=kernel, how=how, share=round(share / total, 3))
    return found


def renamed_to(found: dict[str, Origin]) -> dict[str, str]:
    """Base kernel -> the head kernel it was renamed to."""
    return {o.base: name for name, o in sorted(found.items()) if o.how == "renamed"}
