"""What no gate read in a change: binary files, files over a size limit, files in no kernel (pure)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from bot.changes import FileChange, matches
from bot.report import Coverage, Listed

LARGE_FILE_BYTES = 1024 * 1024  # a changed file larger than this in head is listed for a person to look at
LISTED_NAMES = 50  # names kept per group in report.json (the comment shows fewer, and counts the rest)


def listed(names: Iterable[str]) -> Listed:
    every = list(dict.fromkeys(names))
    return Listed(total=len(every), names=every[:LISTED_NAMES])


def coverage(
    changes: list[FileChange], globs: list[str], sizes: Mapping[str, int], limit: int = LARGE_FILE_BYTES
) -> Coverage:
    """Group the changed files no gate reads: binary (no line was diffed), larger than `limit` bytes in head
    (`sizes`: path -> bytes; a deleted file has none), and matched by none of the kernels' `globs`."""
    return Coverage(
        files=len(changes),
        size_limit_bytes=limit,
        binary=listed(c.path for c in changes if c.binary),
        large=listed(c.path for c in changes if sizes.get(c.path, 0) > limit),
        unmatched=listed(c.path for c in changes if not any(matches(p, globs) for p in c.paths)),
    )
