"""The slash-command table: for each command on a comment, how it is read, who may give it, and its reply.

A command is one module in bot/commands/ that defines its `SLASH` entry (the parse and the reply pure, from
bot/verdict/ or the feature's folder; its GitHub calls through bot/edges/) and registers its `opgate` command in
bot/cli.py; `TABLE` below lists the entries, and the workflows run `opgate <answered_by> --event … --post`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bot.models.github import Role
from bot.verdict import slash


@dataclass(frozen=True)
class SlashCommand:
    name: str  # "/accept": the first word of the comment's first line
    answered_by: str  # the opgate command that answers it ("accept" → `opgate accept --event FILE --post`)
    parse: Callable[[str], Any]  # a comment's body → the command read from its first line, or None: not this one
    roles: tuple[str, ...]  # the base roles that may give it (a custom role counts as the one it builds on)
    reply: Callable[[Any, str], str]  # (the decision, the command's line) → the comment opgate posts

    def refusal(self, login: str, role: Role) -> str | None:
        """The role rule: why `login` with `role` may not give this command, or None when it may."""
        return slash.role_refusal(self.name, login, role, self.roles)


def table() -> dict[str, SlashCommand]:
    """Every slash command opgate answers, by name (imported here, not at the top: the command modules import
    this one for `SlashCommand`)."""
    from bot.commands import accept, ok_to_test, tune

    return {c.name: c for c in (accept.SLASH, tune.SLASH, ok_to_test.SLASH)}


def command_of(body: str) -> SlashCommand | None:
    """The command a comment gives (its first line's first word), or None."""
    return table().get(slash.command_word(body))
