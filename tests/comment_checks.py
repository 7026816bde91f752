"""The structure every review comment must have, checked on GitHub's rendering (cmark-gfm) of it.

Used by tests/test_comment.py on the reports of tests/comment_reports.py, and by every end-to-end test that
reads a `comment.md` (tests/conftest.py `Run.comment`), so each comment the suite produces is checked.
"""

from __future__ import annotations

import re
from html import unescape

from bot.models.report import Report
from bot.present import digest
from bot.present.digest import NOT_RUN_STATUSES
from bot.present.render import COMMENT_LIMIT, REVIEW_MARKER, evidence
from tests.hostile import html, table_breaks


def text_of(fragment: str) -> str:
    """What a reader sees of an HTML fragment: tags dropped, entities decoded, spaces collapsed."""
    return " ".join(unescape(re.sub(r"<[^>]+>", " ", fragment)).split())


def rows(rendered: str) -> list[list[str]]:
    """Every body row of every table: the text of each cell."""
    return [
        [text_of(cell) for cell in re.findall(r"<td[^>]*>(.*?)</td>", row, re.DOTALL)]
        for row in re.findall(r"<tr>(.*?)</tr>", rendered, re.DOTALL)
        if "<td" in row
    ]


def sections(markdown: str) -> dict[str, str]:
    """The headline (before the first kernel heading) and each `### … \\`kernel\\`` section, by kernel name."""
    parts = re.split(r"^### .*?`([^`]+)` — .*$", markdown, flags=re.MULTILINE)
    out = {"": parts[0]}
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        out[name] = body
    return out


def structure_problems(markdown: str, report: Report | None = None) -> list[str]:
    """What breaks the comment's structure: not headline first, a dash-only or empty table cell row, a reason
    shown twice or not at all, over GitHub's length limit. [] when the comment is well-formed."""
    found = []
    if not markdown.startswith(REVIEW_MARKER + "\n## "):
        found.append(f"the comment does not start with its verdict heading: {markdown[:80]!r}")
    rendered = html(markdown)
    first = re.search(r"<(h[1-6]|p|ul|ol|table|blockquote|details|pre)[ >]", rendered)
    if first is None or first.group(1) != "h2":
        found.append("the first block is not the verdict heading")
    not_run = {c.name for k in (report.kernels if report else []) for c in k.cases if c.status in NOT_RUN_STATUSES}
    for cells in rows(rendered):  # the values between a row's name and its verdict: mostly not "—"
        values = cells[1:-1] if len(cells) > 2 else cells[1:]
        if not all(cells) or sum(c == "—" for c in values) * 2 > len(values):
            found.append(f"a table row of empty or dash cells: {cells}")
        if cells[0].split(" · ")[0] in not_run:
            found.append(f"a table row for a case that did not run: {cells}")
    found += table_breaks(markdown)
    if len(markdown) >= COMMENT_LIMIT:
        found.append(f"{len(markdown)} characters: over GitHub's {COMMENT_LIMIT}")
    if report is not None:
        parts = sections(markdown)
        single = digest.digest(report).single
        for k in report.kernels:
            for line in digest.kernel_lines(k):
                seen = parts[""].count(evidence(line, single)) + parts.get(k.name, "").count(evidence(line, True))
                if seen != 1 and not markdown.endswith("`report.json` has everything]\n"):
                    found.append(f"shown {seen} times: {digest.line_text(line)}")
    return found
