"""Where each top-level key of a JSON object's text sits (json.loads gives no lines): a small pure reader."""

from __future__ import annotations

import json


def key_lines(text: str) -> dict[str, int]:
    """Top-level key -> the 1-based line its name starts on, for a JSON object's `text` (a tunable config); a key
    named twice keeps its last line (the value json.loads keeps). Text that is not a JSON object gives what was read
    before the reader lost its way (nothing for a non-object): a missing key simply has no line."""
    lines: dict[str, int] = {}
    depth, line, i, n = 0, 1, 0, len(text)
    expect_key = False
    while i < n:
        ch = text[i]
        if ch == "\n":
            line += 1
        elif ch in "{[":
            depth += 1
            expect_key = ch == "{" and depth == 1
        elif ch in "}]":
            depth -= 1
        elif ch == "," and depth == 1:
            expect_key = True
        elif ch == '"':
            start_line, j = line, i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            if j >= n:
                break  # an unterminated string: stop where the reader lost its way
            if expect_key and depth == 1:
                try:
                    lines[json.loads(text[i : j + 1])] = start_line
                except ValueError:
                    break
                expect_key = False
            i = j
        i += 1
    return lines
