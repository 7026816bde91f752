"""The text of opgate's pull-request review: the agent's risk notes on the lines they name (pure)."""

from __future__ import annotations

from bot.models.github import ReviewNote
from bot.models.report import Report
from bot.text.i18n import gettext as _
from bot.text.safe import Safe, code, untrusted


def notes_marker(head_sha: str) -> str:
    """The hidden marker opgate finds its own review of this head by (with its own login)."""
    return f"<!-- opgate:notes {code(head_sha)} -->"


def replaced_marker(head_sha: str) -> str:
    return f"<!-- opgate:notes-replaced {code(head_sha)} -->"


def review_notes(report: Report) -> list[ReviewNote]:
    """Every agent's risk notes that name a line inside the diff, as inline comments (one per path and line: notes
    on the same line are joined)."""
    by_place: dict[tuple[str, int], list[str]] = {}
    for a in report.agents:
        for n in a.inline_notes:
            by_place.setdefault((n.path, n.line), []).append(
                f"**{untrusted(a.domain or 'agent')}**: {untrusted(n.note)}"
            )
    return [
        ReviewNote(
            path=path,
            line=line,
            body=Safe(_("risk note from the agent (not checked by opgate):") + "\n\n" + "\n\n".join(texts)),
        )
        for (path, line), texts in by_place.items()
    ]


def review_body(head_sha: str, count: int) -> str:
    head = f"`{code(head_sha[:12])}`"
    text = _(
        "opgate: %(count)s risk note(s) of the agent on the lines they name, for head %(head)s. The review comment"
        " holds the rest; the gates decide, these notes do not.",
        count=count, head=head,
    )  # fmt: skip
    return f"{notes_marker(head_sha)}\n{text}"


def replaced_body(head_sha: str) -> str:
    note = _("opgate: replaced by a later run on the same head (its notes are in the newer review).")
    return f"{replaced_marker(head_sha)}\n{note}"
