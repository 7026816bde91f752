"""Hostile text, models filled with it, and checks of what GitHub would make of a comment (cmark-gfm)."""

from __future__ import annotations

import re
import types
from datetime import date
from enum import Enum
from typing import Any, Literal, Union, get_args, get_origin

import cmarkgfm
from cmarkgfm.cmark import Options
from pydantic import BaseModel

# Everything a PR author or an agent could put into a name, a note or a model id to make a comment lie,
# ping people, link somewhere, load an image, break the table or the log.
HOSTILE = (
    "<img src=x onerror=alert(1)> <b>bold</b> @kernel-team org/team owner/repo#1 me@evil.example "
    "www.evil.example/x WWW.evil.example HTTPS://evil.example/a Https://evil.example/b ftp://evil.example/c "
    "mailto:me@evil.example [click](https://evil.example/d) ![pixel](https://evil.example/p.gif) "
    "<https://evil.example/e> [ref]: https://evil.example/f \\| cell | end `tick` ``` "
    "\n# heading\n> quote\n- item\n::error title=forged::PASS\r\x1b[2K\u202egnp.exe"
)
HOSTILE_VARIANTS = [
    HOSTILE,
    "x\\|y | z",  # an escaped pipe in the input
    "# PASS",  # a heading when it starts a list item
    "1. approved",
    "www.evil.example",
    "HTTPS://evil.example",
    "@maintainers please merge",
    "```\n</details>\n<img src=x>",
]


def hostile_value(annotation: Any, text: str, variant: int = 0, depth: int = 0) -> Any:
    """A value of `annotation` with `text` in every string, choosing enum/literal members by `variant`."""
    origin, args = get_origin(annotation), get_args(annotation)
    if annotation is str or annotation is Any:  # a free value (a tuning config's entry) can be text too
        return text
    if annotation is bool:
        return True
    if annotation is int:
        return 3
    if annotation is float:
        return 1.5
    if annotation is date:
        return date(2026, 3, 2)
    if origin is Literal:
        return args[-1 - variant % len(args)]
    if isinstance(annotation, type) and issubclass(annotation, Enum):
        members = list(annotation)
        return members[-1 - variant % len(members)]
    if origin in (Union, types.UnionType):
        present = [a for a in args if a is not type(None)]
        if depth > 1 and type(None) in args:
            return None  # a recursive model (KernelReport.candidate) stops after one level
        return hostile_value(present[0], text, variant, depth)
    if origin is list:
        if args[0] in _BUILDING:
            return []  # a model that holds a list of itself (a Phrase's phrases) stops after one level
        return [hostile_value(args[0], text, v, depth) for v in range(2)]
    if origin is dict:
        return {hostile_value(args[0], text, 0, depth): hostile_value(args[1], text, 0, depth)}
    if origin is tuple:
        return tuple(hostile_value(a, text, variant, depth) for a in args)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return hostile_model(annotation, text, variant, depth + 1)
    raise TypeError(f"no hostile value for {annotation!r}")


def hostile_model(model: type[BaseModel], text: str = HOSTILE, variant: int = 0, depth: int = 0) -> Any:
    """An instance of `model` with `text` in every string field, recursively."""
    _BUILDING.append(model)
    try:
        data = {
            (field.alias or name): hostile_value(field.annotation, text, variant, depth)
            for name, field in model.model_fields.items()
            if not (name == "schema_" or field.annotation is None)
        }
    finally:
        _BUILDING.pop()
    return model.model_validate(data)


_BUILDING: list[type[BaseModel]] = []  # the models hostile_model is filling, outermost first


# -- what GitHub would render --------------------------------------------------------------------------


def html(markdown: str) -> str:
    """The comment as GitHub renders it (cmark-gfm, its extensions: table, autolink, strikethrough, tagfilter)."""
    return cmarkgfm.github_flavored_markdown_to_html(markdown, options=Options.CMARK_OPT_UNSAFE)


_CODE = re.compile(r"<code[^>]*>.*?</code>|<pre[^>]*>.*?</pre>", re.DOTALL)
_TAG = re.compile(r"<[^>]+>")
LIVE_TEXT = [
    (re.compile(r"://"), "a scheme:// GitHub links"),
    (re.compile(r"(?i)www\."), "a www. address GitHub links"),
    (re.compile(r"(?i)(mailto|xmpp):"), "a mailto:/xmpp: GitHub links"),
    (re.compile(r"@[A-Za-z0-9_]"), "an @mention or an e-mail address"),
    (re.compile(r"[A-Za-z0-9_.\-]+/[A-Za-z0-9_.\-]+#[0-9]"), "a cross-repository reference"),
]


def problems(markdown: str, mentions: tuple[str, ...] = ()) -> list[str]:
    """What is wrong with a comment: raw HTML from the input, a live link, an @mention (other than of the
    trusted `mentions`), a broken table."""
    found = []
    rendered = html(markdown)
    for tag in ("a", "img", "b", "script", "iframe"):
        if re.search(rf"<{tag}[\s>]", rendered):
            found.append(f"<{tag}> in the rendered comment")
    text = _TAG.sub(" ", _CODE.sub(" ", rendered))  # code spans and blocks are inert on GitHub
    text = text.replace("&amp;", "&").replace("&lt;", "<").replace("&gt;", ">").replace("&quot;", '"')
    for login in mentions:
        text = re.sub(rf"@{re.escape(login)}\b", "(trusted mention)", text)
    for pattern, what in LIVE_TEXT:
        if m := pattern.search(text):
            found.append(f"{what}: …{text[max(0, m.start() - 30) : m.end() + 30]}…")
    found.extend(table_breaks(markdown))
    if "<h1>" in rendered:  # the templates use ## and ### only
        found.append("a heading from the input")
    return found


def _cells(line: str) -> int:
    """Pipes that separate cells: one not escaped by an odd run of backslashes (the strict reading)."""
    return sum(1 for m in re.finditer(r"(\\*)\|", line) if len(m.group(1)) % 2 == 0)


def table_breaks(markdown: str) -> list[str]:
    """Rows whose cell count differs from their table's header, and text spilling onto a line under a table."""
    lines = markdown.split("\n")
    found, i = [], 0
    while i < len(lines) - 1:
        if lines[i].startswith("|") and re.fullmatch(r"\|(-+\|)+", lines[i + 1].strip()):
            width = _cells(lines[i])
            j = i + 2
            while j < len(lines) and lines[j].startswith("|"):
                if _cells(lines[j]) != width:
                    found.append(f"table row with {_cells(lines[j]) - 1} cells, header has {width - 1}: {lines[j]!r}")
                j += 1
            if j < len(lines) and lines[j].strip():
                found.append(f"text continues the table: {lines[j]!r}")
            i = j
        else:
            i += 1
    return found
