"""Render reports and prompts from the Jinja templates in templates/ (pure, StrictUndefined)."""

from __future__ import annotations

import re
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import jinja2

from bot.gate import match_base
from bot.report import CaseReport, Occupancy, Report, Resource
from bot.safe import Safe, code, comment_safe, fence, untrusted

# The top-level templates/ folder, shipped inside the package as bot.templates (pyproject.toml's package-dir).
TEMPLATES = Path(str(resources.files("bot.templates")))
REVIEW_MARKER = Safe("<!-- opgate:review -->")  # Safe: printed as is, the bot finds its comment by it
ACCEPT_MARKER = Safe("<!-- opgate:accept -->")


def num(x: float | None, digits: int = 3) -> str:
    return "—" if x is None else f"{x:.{digits}g}"


def ms(x: float | None) -> str:
    return "—" if x is None else f"{x:.4g} ms"


def pct(x: float | None) -> str:
    return "—" if x is None else f"{x:+.2f}%"


def tokens(x: int | None) -> str:
    """A token count with thousands separators; "—" for unknown (e.g. a budget not configured)."""
    return "—" if x is None else f"{x:,}"


def size(n: int) -> str:
    """Bytes as a person reads them: "1 MiB", "512 KiB", "900 B"."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n} B"


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


PROMPTS = "prompts/"  # templates of the agent's prompt: plain text for the model, not Markdown for a comment


_GITHUB_URL = re.compile(r"https://[A-Za-z0-9.-]+(?::[0-9]+)?/[A-Za-z0-9._~/#?=&%-]*")
_SHA = re.compile(r"[0-9a-f]{7,64}")


def pr_ref(number: Any) -> Safe:
    """A pull request number opgate read (an int): a live #N reference; anything else is shown inert."""
    return Safe(f"#{number}") if isinstance(number, int) and not isinstance(number, bool) else untrusted(number)


def github_url(url: Any) -> Safe:
    """A URL the GitHub API returned (an issue's html_url): a live link when it is a plain https URL."""
    return Safe(url) if isinstance(url, str) and _GITHUB_URL.fullmatch(url) else untrusted(url)


def sha(value: Any, length: int = 12) -> Safe:
    """A commit SHA (hex only), shortened; anything else is shown inert."""
    text = str(value)
    return Safe(text[:length]) if _SHA.fullmatch(text) else untrusted(text[:length])


@cache
def environment(comment: bool = True) -> jinja2.Environment:
    """The Jinja environment. For comments every `{{ … }}` passes through bot.safe.comment_safe: a value no
    filter made Safe (code, fence, untrusted) is rendered through `untrusted`, so no field can be forgotten."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        finalize=comment_safe if comment else None,
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
        size=size,
        base_for=base_for,
        smem=smem,
        blocks=blocks,
        occupancy=occupancy,
        limited=limited,
        pr_ref=pr_ref,
        github_url=github_url,
        sha=sha,
    )
    return env


def render(template: str, **context: Any) -> str:
    return environment(not template.startswith(PROMPTS)).get_template(template).render(**context)


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
