"""A slash command's intake: the issue_comment event read, then the command its comment gives, or why opgate does
not answer the comment at all (an edited comment, the bot's own, a first line that is not this command)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bot.edges.events import IssueCommentEvent, load_issue_comment_event
from bot.verdict.slash import SlashCommand, ignore_reason


@dataclass(frozen=True)
class Intake:
    event: IssueCommentEvent
    command: Any  # what the slash command's parse read from the first line; None when `ignored`
    ignored: str | None  # why the comment is not answered (no reaction, no reply); None to answer it


def intake(path: Path, slash: SlashCommand) -> Intake:
    """The event at `path` (an InputError when it is not an issue_comment event) and what its comment asks of
    `slash`: a comment is read only when it is newly created and not a bot's, and only its first line."""
    event = load_issue_comment_event(path)
    author = event.comment.user
    ignored = ignore_reason(event.action, author.login, author.is_bot or event.sender.is_bot)
    command = slash.parse(event.body) if ignored is None else None
    if ignored is None and command is None:
        ignored = f"no {slash.name} command on the comment's first line"
    return Intake(event=event, command=command, ignored=ignored)
