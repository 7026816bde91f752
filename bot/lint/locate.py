"""Locating keys: the line of every key of a JSON or TOML text, and every string of a parsed document."""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterator, Mapping, Sequence
from json.decoder import scanstring as _scanstring  # type: ignore[attr-defined]
from typing import Any

KeyPath = tuple[str | int, ...]


def _line_at(text: str, index: int) -> int:
    return text.count("\n", 0, index) + 1


def json_key_lines(text: str) -> dict[KeyPath, int]:
    """The line of every key (and array element) of a valid JSON text, by its path."""
    lines: dict[KeyPath, int] = {}
    decoder = json.JSONDecoder()
    n = len(text)

    def skip(i: int) -> int:
        while i < n and text[i] in " \t\r\n":
            i += 1
        return i

    def value(i: int, where: KeyPath) -> int:
        i = skip(i)
        if text[i] == "{":
            i = skip(i + 1)
            if text[i] == "}":
                return i + 1
            while True:
                i = skip(i)
                key, end = _scanstring(text, i + 1)
                lines[(*where, key)] = _line_at(text, i)
                i = skip(end)
                i = skip(value(i + 1, (*where, key)))  # past ':'
                if text[i] == ",":
                    i += 1
                    continue
                return i + 1
        if text[i] == "[":
            i = skip(i + 1)
            if text[i] == "]":
                return i + 1
            index = 0
            while True:
                i = skip(i)
                lines[(*where, index)] = _line_at(text, i)
                i = skip(value(i, (*where, index)))
                index += 1
                if text[i] == ",":
                    i += 1
                    continue
                return i + 1
        _, end = decoder.raw_decode(text, i)
        return end

    with contextlib.suppress(ValueError, IndexError):
        value(0, ())
    return lines


_TOML_KEY = r"""(?:[A-Za-z0-9_-]+|"[^"]*"|'[^']*')"""
_TOML_DOTTED = rf"{_TOML_KEY}(?:\s*\.\s*{_TOML_KEY})*"
_TOML_HEADER = re.compile(rf"^\[\[?\s*({_TOML_DOTTED})\s*\]\]?\s*(?:#.*)?$")
_TOML_ASSIGN = re.compile(rf"^({_TOML_DOTTED})\s*=\s*(.*)$")
_TOML_INLINE_KEY = re.compile(rf"[{{,]\s*({_TOML_KEY})\s*=")


def _toml_parts(dotted: str) -> tuple[str, ...]:
    return tuple(p.strip().strip("\"'") for p in re.findall(_TOML_KEY, dotted))


def _in_arrays(parts: tuple[str, ...], arrays: dict[tuple[str, ...], int]) -> KeyPath:
    """A header's path with the index of the current element of every array of tables it passes through
    (`[cases.limits]` after the second `[[cases]]` is ("cases", 1, "limits"))."""
    path: list[str | int] = []
    for i, part in enumerate(parts):
        path.append(part)
        if (count := arrays.get(parts[: i + 1])) is not None:
            path.append(count - 1)
    return tuple(path)


def toml_key_lines(text: str) -> dict[KeyPath, int]:
    """The line of every table and key of a TOML text (inline-table keys share their line); the elements of an
    array of tables (`[[cases]]`) by index, each at its own header's line."""
    lines: dict[KeyPath, int] = {}
    table: KeyPath = ()
    arrays: dict[tuple[str, ...], int] = {}  # array-of-tables path -> elements so far
    in_string: str | None = None
    for number, raw in enumerate(text.splitlines(), 1):
        stripped = raw.strip()
        if in_string:
            if stripped.count(in_string) % 2 == 1:
                in_string = None
            continue
        if not stripped or stripped.startswith("#"):
            continue
        if header := _TOML_HEADER.match(stripped):
            parts = _toml_parts(header.group(1))
            if stripped.startswith("[["):
                arrays[parts] = arrays.get(parts, 0) + 1
            table = _in_arrays(parts, arrays)
            for i in range(1, len(table) + 1):
                lines.setdefault(table[:i], number)
            continue
        if assign := _TOML_ASSIGN.match(stripped):
            key = table + _toml_parts(assign.group(1))
            for i in range(len(table) + 1, len(key) + 1):
                lines.setdefault(key[:i], number)
            rest = assign.group(2)
            for quote in ('"""', "'''"):
                if rest.startswith(quote) and rest.count(quote) == 1:
                    in_string = quote
            if rest.startswith("{"):
                for inner in _TOML_INLINE_KEY.finditer(rest):
                    lines.setdefault((*key, inner.group(1).strip("\"'")), number)
    return lines


def line_of(lines: Mapping[KeyPath, int], where: Sequence[str | int]) -> int:
    """The line of the key at `where`, else of its nearest located parent, else 1."""
    where = tuple(where)
    while where:
        if where in lines:
            return lines[where]
        where = where[:-1]
    return 1


def label_of(where: Sequence[str | int]) -> str:
    """A key path as written in messages: `provider.base_url`, `deny[0]`."""
    return "".join(f"[{p}]" if isinstance(p, int) else (f".{p}" if i else p) for i, p in enumerate(where))


def strings(data: Any, where: KeyPath = ()) -> Iterator[tuple[KeyPath, str]]:
    """Every string value of a parsed JSON/TOML document, by path."""
    if isinstance(data, str):
        yield where, data
    elif isinstance(data, dict):
        for k, v in data.items():
            yield from strings(v, (*where, str(k)))
    elif isinstance(data, list):
        for i, v in enumerate(data):
            yield from strings(v, (*where, i))
