"""Untrusted text made safe for a log line: no workflow commands, no CR, no terminal escapes."""

from __future__ import annotations

import re
from typing import Any

# C0 controls except \t and \n, DEL, C1 controls (NEL \x85 among them), Unicode line/paragraph separators
# and the bidirectional overrides of "Trojan Source": each is shown as a visible escape instead.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
# GitHub Actions reads `::command::` (and the legacy `##[command]`) at the start of any log line,
# after leading whitespace; a zero-width space after the first character makes the line inert.
_WORKFLOW_COMMAND = re.compile(r"^(\s*)(:)(?=:)|^(\s*)(#)(?=#\[)", re.MULTILINE)


def _escape(match: re.Match[str]) -> str:
    char = match.group(0)
    return {"\r": "\\r", "\x1b": "\\e"}.get(char, f"\\u{ord(char):04x}" if ord(char) > 0xFF else f"\\x{ord(char):02x}")


def log_safe(text: Any) -> str:
    """`text` as it may appear in a CI log: control characters escaped, workflow commands neutralised.

    Newlines stay (a build log keeps its lines), but no line can start a GitHub Actions command.
    """
    s = _CONTROL.sub(_escape, str(text))
    return _WORKFLOW_COMMAND.sub(lambda m: (m.group(1) or m.group(3) or "") + (m.group(2) or m.group(4)) + "\u200b", s)


def one_line(text: Any, limit: int = 300) -> str:
    """Untrusted text as one log-safe line of at most `limit` characters (newlines become " | ")."""
    s = log_safe(text).replace("\n", " | ")
    return s if len(s) <= limit else s[: limit - 1] + "…"
