"""Diff analysis: which files changed, and which kernels they touch (pure)."""

from __future__ import annotations

import re
from functools import lru_cache

from unidiff import PatchSet
from unidiff.errors import UnidiffParseError

from bot.errors import InputError
from bot.models.diff import FileChange

_C_ESCAPES = {"a": 7, "b": 8, "t": 9, "n": 10, "v": 11, "f": 12, "r": 13, '"': 34, "\\": 92}
_C_QUOTED = re.compile(r"\\([0-7]{1,3}|.)", re.DOTALL)


def unquote(path: str) -> str:
    """A file name as git writes it in a diff header: one holding a quote, a backslash, a control character
    or a byte over 0x7f comes "C-quoted" with octal escapes. The name's bytes are decoded as UTF-8 with
    replacement (a name that is not UTF-8 still lands in its kernel's folder and is shown)."""
    if len(path) < 2 or path[0] != '"' or path[-1] != '"':
        return path
    out = bytearray()
    body, i = path[1:-1], 0
    while i < len(body):
        match = _C_QUOTED.match(body, i)
        if match is None:
            out += body[i].encode()
            i += 1
            continue
        code = match.group(1)
        if code[0] in "01234567":
            out.append(int(code, 8) & 0xFF)
        elif code in _C_ESCAPES:
            out.append(_C_ESCAPES[code])
        else:  # not an escape git writes: kept as it was
            out += ("\\" + code).encode()
        i = match.end()
    return out.decode("utf-8", "replace")


def _strip_prefix(path: str) -> str:
    path = unquote(path)
    return path[2:] if path.startswith(("a/", "b/")) else path


def parse_diff(text: str) -> list[FileChange]:
    """Parse a `git diff` into one FileChange per file, renames included."""
    try:
        patch = PatchSet(text)
    except UnidiffParseError as exc:
        raise InputError(f"cannot parse the diff: {exc}") from exc
    changes = []
    for pf in patch:
        source = None if pf.is_added_file else _strip_prefix(pf.source_file)
        target = _strip_prefix(pf.source_file if pf.is_removed_file else pf.target_file)
        changes.append(
            FileChange(
                path=target,
                old_path=source,
                added=pf.added,
                removed=pf.removed,
                binary=pf.is_binary_file,
                diff=str(pf),
            )
        )
    return changes


@lru_cache(maxsize=256)
def glob_regex(pattern: str) -> re.Pattern[str]:
    """Translate a repository glob: `**` spans folders, `*` and `?` stay inside one."""
    out, i = [], 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out) + r"\Z")


def matches(path: str, globs: list[str]) -> bool:
    """Whether the path matches one of the globs (one without `*` or `?` is the path itself)."""
    return any(path == g if "*" not in g and "?" not in g else glob_regex(g).match(path) for g in globs)


def touching(changes: list[FileChange], globs: list[str]) -> list[FileChange]:
    """The changes whose old or new path matches one of the globs."""
    return [c for c in changes if any(matches(p, globs) for p in c.paths)]
