"""Render reports and prompts from the Jinja templates in templates/ (pure, StrictUndefined)."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path
from typing import Any

import jinja2

from bot.gate import match_base
from bot.report import CaseReport, Occupancy, Report, Resource

TEMPLATES = Path(__file__).resolve().parent.parent / "templates"
REVIEW_MARKER = "<!-- opgate:review -->"
ACCEPT_MARKER = "<!-- opgate:accept -->"

_IMAGE = re.compile(r"!\[([^\]]*)\]\(([^)]*)\)")
_LINK = re.compile(r"\[([^\]]*)\]\(([^)]*)\)")
_AUTOLINK = re.compile(r"<(https?://[^>\s]+)>")


def untrusted(text: Any) -> str:
    """Agent or PR text made inert for a comment: no HTML, no images, links shown as text."""
    s = str(text)
    s = _IMAGE.sub(lambda m: f"[image: {m.group(1)}] ({m.group(2)})", s)
    s = _LINK.sub(lambda m: f"{m.group(1)} ({m.group(2)})", s)
    s = _AUTOLINK.sub(lambda m: m.group(1), s)
    s = s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    # A URL must not render as a link (no tracking pixels, no clickable bait): break the scheme.
    s = re.sub(r"\b(https?)://", r"\1[:]//", s)
    s = re.sub(r"@(?=[A-Za-z0-9])", "@\u200b", s)  # no @mentions: PR text must not ping people
    return s.replace("|", "\\|").replace("\n", " ")


def fence(text: Any) -> str:
    """Untrusted text inside a code fence that it cannot close."""
    s = str(text).replace("```", "`\u200b``")
    return s


def num(x: float | None, digits: int = 3) -> str:
    return "—" if x is None else f"{x:.{digits}g}"


def ms(x: float | None) -> str:
    return "—" if x is None else f"{x:.4g} ms"


def pct(x: float | None) -> str:
    return "—" if x is None else f"{x:+.2f}%"


def tokens(x: int | None) -> str:
    """A token count with thousands separators; "—" for unknown (e.g. a budget not configured)."""
    return "—" if x is None else f"{x:,}"


def share(used: int, budget: int | None) -> str:
    """`used` as a percentage of `budget`; "—" without a budget."""
    return "—" if not budget else f"{100.0 * used / budget:.1f}%"


def base_for(head: list[Resource], base: list[Resource]) -> dict[str, Resource]:
    """Head function name -> its base counterpart (to put base beside head in the table)."""
    return match_base(head, base)


def smem(r: Resource) -> str:
    """Shared memory per block as `static + dynamic` bytes ("?" for dynamic memory nobody sized)."""
    if r.dynamic_smem_bytes is None:
        return f"{r.smem_bytes:,} + ?" if r.extern_smem else f"{r.smem_bytes:,}"
    return f"{r.smem_bytes:,} + {r.dynamic_smem_bytes:,}"


def blocks(o: Occupancy | None) -> str:
    return "—" if o is None else str(o.blocks_per_sm)


def occupancy(o: Occupancy | None) -> str:
    """Resident warps per SM in % of the 64 an SM holds."""
    return "—" if o is None else f"{o.occupancy_pct:g}%"


def limited(o: Occupancy | None) -> str:
    return "—" if o is None else ", ".join(o.limited_by)


def skipped_groups(cases: list[CaseReport]) -> list[tuple[str, list[str]]]:
    """Skipped cases grouped by their reason, in order: one line per reason in the comment."""
    groups: dict[str, list[str]] = {}
    for c in cases:
        if c.verdict == "skipped":
            groups.setdefault("; ".join(c.reasons), []).append(c.name)
    return list(groups.items())


def code(text: Any) -> str:
    """Untrusted text as an inline code span: shown literally (no HTML, no links), cannot break the table."""
    return str(text).replace("`", "'").replace("|", "\\|").replace("\n", " ")


@cache
def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(
        untrusted=untrusted,
        fence=fence,
        code=code,
        skipped_groups=skipped_groups,
        num=num,
        ms=ms,
        pct=pct,
        tokens=tokens,
        share=share,
        base_for=base_for,
        smem=smem,
        blocks=blocks,
        occupancy=occupancy,
        limited=limited,
    )
    return env


def render(template: str, **context: Any) -> str:
    return environment().get_template(template).render(**context)


ICONS = {"pass": "✅", "fail": "❌", "error": "⚠️", "skipped": "⏭️", "inconclusive": "❔"}


def render_comment(report: Report, *, unseen_files: list[str] | None = None, pr: Any = None) -> str:
    """The review comment (what `--post` would post, and `comment.md`).

    `pr` (a bot.publish.PrContext) adds what the pull request's history says: "updated for <head>",
    acceptances still valid or voided by a push, and the token spend of the whole pull request.
    """
    return render(
        "comment.md.j2",
        marker=REVIEW_MARKER,
        r=report,
        icons=ICONS,
        unseen_files=unseen_files or [],
        pr=pr,
    )


def render_accept_reply(decision: Any, command_line: str) -> str:
    """The reply to an `/accept` (a bot.accept.Decision): why it was refused, or what an override recorded."""
    return render("accept_reply.md.j2", marker=ACCEPT_MARKER, d=decision, command=command_line)
