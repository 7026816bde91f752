"""The slash-command table: for each command on a comment, how it is read, who may give it, and its reply.

A command is one module in bot/commands/ that defines its `SLASH` entry (a `bot.verdict.slash.SlashCommand`: the
parse and the reply pure, from bot/verdict/ or the feature's folder; its GitHub calls through bot/edges/), registers
its `opgate` command in bot/cli.py, and is listed in `TABLE`; the workflows run `opgate <answered_by> --event …
--post`."""

from __future__ import annotations

from bot.commands import accept, ok_to_test, tune
from bot.verdict.slash import SlashCommand

TABLE: dict[str, SlashCommand] = {c.name: c for c in (accept.SLASH, tune.SLASH, ok_to_test.SLASH)}


def table() -> dict[str, SlashCommand]:
    """Every slash command opgate answers, by name."""
    return dict(TABLE)
