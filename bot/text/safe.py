"""Untrusted text made safe: for a log line (no workflow commands, no CR, no terminal escapes) and for a comment."""

from __future__ import annotations

import logging
import re
from typing import Any

# C0 controls except \t and \n, DEL, C1 controls (NEL \x85 among them), Unicode line/paragraph separators
# the bidirectional overrides of "Trojan Source" and lone surrogates (text that cannot even be written out
# as UTF-8): each is shown as a visible escape instead.
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
# GitHub Actions reads `::command::` (and the legacy `##[command]`) at the start of any log line,
# after leading whitespace; a zero-width space after the first character makes the line inert.
_WORKFLOW_COMMAND = re.compile(r"^(\s*)(:)(?=:)|^(\s*)(#)(?=#\[)", re.MULTILINE)
ZWSP = "\u200b"


def _escape(match: re.Match[str]) -> str:
    char = match.group(0)
    return {"\r": "\\r", "\x1b": "\\e"}.get(char, f"\\u{ord(char):04x}" if ord(char) > 0xFF else f"\\x{ord(char):02x}")


def log_safe(text: Any) -> str:
    """`text` as it may appear in a CI log: control characters escaped, workflow commands neutralised.

    Newlines stay (a build log keeps its lines), but no line can start a GitHub Actions command.
    """
    s = _CONTROL.sub(_escape, str(text))
    return _WORKFLOW_COMMAND.sub(lambda m: (m.group(1) or m.group(3) or "") + (m.group(2) or m.group(4)) + ZWSP, s)


def one_line(text: Any, limit: int = 300) -> str:
    """Untrusted text as one log-safe line of at most `limit` characters (newlines become " | ")."""
    s = log_safe(text).replace("\r\n", "\n").replace("\n", " | ")
    return s if len(s) <= limit else s[: limit - 1] + "…"


class LogSafeFormatter(logging.Formatter):
    """Every log line through log_safe, whatever a caller passed as an argument (tracebacks included)."""

    def format(self, record: logging.LogRecord) -> str:
        return log_safe(super().format(record))


# -- comments (GitHub-flavoured Markdown) ------------------------------------------------------------


class Safe(str):
    """Text already made comment-safe by one of the functions below: the renderer passes it through as is."""


_IMAGE = re.compile(r"!\[([^\]]*)\]\(([^)]*)\)")
_LINK = re.compile(r"\[([^\]]*)\]\(([^)]*)\)")
# What GitHub turns into a link without any Markdown syntax: `scheme://` (https, HTTPS, ftp, any scheme,
# any case), the schemes that need no slashes (mailto:, xmpp:) and `www.` (any case). Each is broken
# wherever it is, whatever comes before it.
_SCHEME = re.compile(r"://")
_BARE_SCHEME = re.compile(r"(?i)(mailto|xmpp):")
_WWW = re.compile(r"(?i)(www)\.")
_MENTION = re.compile(r"@(?=[A-Za-z0-9_])")  # @user, @org/team and the domain of user@host (an email autolink)
# owner/repo#123 puts a "mentioned this" event into another repository's thread (#123 of this one is left live)
_REFERENCE = re.compile(r"(?<=[A-Za-z0-9_.\-]/)([A-Za-z0-9_.\-]+)#(?=[0-9])")
# Markdown that only means something at the start of a line; untrusted text often starts a list item.
_BLOCK_START = re.compile(r"^(\s*)(#|>|[-+*](?=\s|$)|~{3}|[-*_](?=\s*[-*_]\s*[-*_]))")
_ORDERED = re.compile(r"^(\s*\d{1,9})([.)])(?=\s|$)")
_PIPE = re.compile(r"(\\*)\|")
_BACKTICKS = re.compile(r"`{3,}")
_BACKTICK_RUN = re.compile(r"`+")


def _controls_visible(text: Any) -> str:
    s = str(text).replace("\r\n", "\n")
    return _CONTROL.sub(_escape, s)


def untrusted(text: Any) -> Safe:
    """Untrusted text as inline Markdown that renders as exactly that text: one line, no HTML, no image,
    no live link in any form, no @mention or #reference, no table cell it can end, no block it can start."""
    s = _controls_visible(text).replace("\n", " ").replace("\t", " ")
    # Markdown links and images become their text and target (the target is made inert below).
    s = _IMAGE.sub(lambda m: f"image {m.group(1)} ({m.group(2)})", s)
    s = _LINK.sub(lambda m: f"{m.group(1)} ({m.group(2)})", s)
    # An autolink <scheme:…> needs its angle brackets, which are escaped below: they stay visible, so a C++ name
    # like Traits<cutlass::bfloat16_t> reads as written (a scheme:// in it is broken below all the same).
    s = s.replace("\\", "\\\\")  # first: every backslash below is ours
    s = s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    s = s.replace("[", "\\[").replace("]", "\\]")  # no link, image, reference or footnote syntax is left
    runs = _BACKTICK_RUN.findall(s)
    if len(runs) % 2 or any(len(r) > 1 for r in runs):
        # An odd or a longer run can pair with a template's own backtick (or make GitHub skip a later pair):
        # then every backtick is shown as such. Single backticks in pairs stay inline code (inert).
        s = s.replace("`", "\\`")
    s = _SCHEME.sub(r"\\[:\\]//", s)
    s = _BARE_SCHEME.sub(r"\1\\[:\\]", s)
    s = _WWW.sub(r"\1\\[.\\]", s)
    s = _MENTION.sub("@" + ZWSP, s)
    s = _REFERENCE.sub(r"\1#" + ZWSP, s)
    s = _BLOCK_START.sub(r"\1\\\2", s, count=1)
    s = _ORDERED.sub(r"\1\\\2", s, count=1)
    return Safe(_PIPE.sub(lambda m: m.group(1) + "\\|", s))


def code(text: Any) -> Safe:
    """Untrusted text for the inside of an inline code span (`` `…` ``): shown literally, one line; it cannot
    close the span (no backtick) or end a table cell (every pipe escaped, also one after a backslash)."""
    s = _controls_visible(text).replace("\n", " ").replace("\t", " ").replace("`", "'")
    # GitHub splits table cells before it parses code spans: a pipe after an even run of backslashes ends
    # the cell, so the run is doubled and one more backslash escapes the pipe.
    return Safe(_PIPE.sub(lambda m: m.group(1) * 2 + "\\|", s))


def fence(text: Any) -> Safe:
    """Untrusted text (a build log, a patch) inside a ``` code fence: lines kept, control characters
    visible, and no run of backticks that could close the fence."""
    s = _controls_visible(text)
    return Safe(_BACKTICKS.sub(lambda m: ZWSP.join(m.group(0)), s))


def comment_safe(value: Any) -> str:
    """Every value a comment template prints: Safe text as is, numbers as numbers, the rest through untrusted."""
    if isinstance(value, Safe):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    return untrusted("" if value is None else value)
