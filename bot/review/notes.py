"""Risk notes that name a file and a line of the diff, placed on that line of head's side (pure)."""

from __future__ import annotations

import re
from collections.abc import Iterable

from unidiff import PatchSet
from unidiff.errors import UnidiffParseError

from bot.models.agent_report import InlineNote
from bot.models.diff import FileChange

# "kernels/x/gemm.cu:142", "gemm.cu:142:", "gemm.cu line 142", "gemm.cu (line 142)", "gemm.cu, line 142", "L142"
# after the name: a file name with an extension, then the line.
_PLACE = re.compile(
    r"(?<![\w./-])(?P<path>[\w.+-]+(?:/[\w.+-]+)*\.[A-Za-z0-9]+)"
    r"(?::(?P<colon>\d+)\b|,?\s*\(?\s*(?:line|L)\s*(?P<word>\d+)\b)",
    re.IGNORECASE,
)


def head_lines(change: FileChange) -> set[int]:
    """The lines of head's file that the file's diff shows (added or context): where GitHub lets a review comment
    sit on the RIGHT side."""
    if change.binary or not change.diff:
        return set()
    try:
        patch = PatchSet(change.diff)
    except (UnidiffParseError, ValueError):
        return set()
    return {
        line.target_line_no
        for f in patch
        for hunk in f
        for line in hunk
        if line.target_line_no is not None and not line.is_removed
    }


def _file(named: str, changes: list[FileChange]) -> FileChange | None:
    """The changed file a note names: its repository path, or a path the diff's path ends with (one file only)."""
    exact = [c for c in changes if c.path == named]
    if exact:
        return exact[0]
    tail = [c for c in changes if c.path.endswith("/" + named.lstrip("./"))]
    return tail[0] if len(tail) == 1 else None


def place(note: str, changes: list[FileChange]) -> InlineNote | None:
    """The note on the first file and line it names that lie inside the diff; None when it names none."""
    for match in _PLACE.finditer(note):
        change = _file(match["path"], changes)
        if change is None:
            continue
        line = int(match["colon"] or match["word"])
        if line in head_lines(change):
            return InlineNote(path=change.path, line=line, note=note)
    return None


def place_notes(notes: Iterable[str], changes: list[FileChange]) -> list[InlineNote]:
    """The notes that name a line inside the diff, each on its line (the others stay in the comment)."""
    return [placed for note in notes if (placed := place(note, changes)) is not None]
