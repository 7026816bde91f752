"""`opgate ok-to-test`: answer `/ok-to-test` — a write+ collaborator trusts a fork's current head for one GPU review."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from bot.commands import Commands
from bot.config.settings import Settings
from bot.edges import publish
from bot.edges.events import load_issue_comment_event
from bot.errors import InputError
from bot.models.output import SlashOutput
from bot.text.safe import one_line
from bot.verdict import slash
from bot.verdict.slash import SlashCommand

SLASH = SlashCommand(
    name=slash.OK_TO_TEST,
    answered_by="ok-to-test",
    parse=lambda body: slash.first_line(body) if slash.parse_ok_to_test(body) else None,
    roles=slash.WRITE_ROLES,
    reply=lambda decision, line: decision.reply,
)


def register(commands: Commands) -> None:
    p = commands.add(
        "ok-to-test",
        help="answer an /ok-to-test comment: dispatch the review workflow for the pull request's current head",
        description="Read an issue_comment event; when its first line is /ok-to-test and the commenter has write, "
        "maintain or admin, dispatch --workflow on the default branch for the pull request's current head SHA "
        "(a later push needs a new /ok-to-test), react 🚀 and reply; otherwise react 👎 and reply why. Without "
        "--post nothing is written (a dry run, which still reads the role and the pull request: GITHUB_TOKEN).",
    )
    p.add_argument("--event", type=Path, required=True, help="an issue_comment event file ($GITHUB_EVENT_PATH)")
    p.add_argument("--workflow", required=True, help="the review workflow's file in .github/workflows to dispatch")
    p.add_argument("--post", action="store_true", help="react, reply and dispatch the review workflow")


def run(args: argparse.Namespace, settings: Settings) -> int:
    if (why := slash.check_workflow(args.workflow)) is not None:
        raise InputError(f"--workflow: {why}")
    event = load_issue_comment_event(args.event)
    author = event.comment.user
    ignored = slash.ignore_reason(event.action, author.login, author.is_bot or event.sender.is_bot)
    if ignored is None and not event.is_pull_request:
        ignored = "a comment on an issue: /ok-to-test trusts a pull request"
    if ignored is None and SLASH.parse(event.body) is None:
        ignored = f"no {slash.OK_TO_TEST} command on the comment's first line"
    if ignored is not None:
        _say(args, f"opgate: ignored, {one_line(ignored)}", {"ignored": ignored, "granted": None, "posted": False})
        return 0
    with publish.open_edge(settings) as edge:
        if args.post:
            edge.react(event.comment.id, "eyes")
        role = edge.role(author.login)
        head = edge.pull_request(event.number).head_sha if role.level in SLASH.roles else ""
        decision = slash.decide_ok_to_test(login=author.login, role=role, number=event.number, head_sha=head)
        verdict = f"opgate: {slash.OK_TO_TEST} {'granted' if decision.granted else 'refused'}: {decision.reply}"
        result = {"ignored": None, "granted": decision.granted, "inputs": decision.inputs, "posted": args.post}
        if not args.post:
            _say(args, f"{one_line(verdict)}\nopgate: dry run (no --post): nothing dispatched or posted", result)
            return 0
        _say(args, one_line(verdict), result)
        if decision.granted:
            edge.dispatch_workflow(args.workflow, edge.default_branch(), decision.inputs)
        edge.react(event.comment.id, "rocket" if decision.granted else "-1")
        edge.reply(event.number, SLASH.reply(decision, slash.first_line(event.body)))
    return 0


def _say(args: argparse.Namespace, text: str, data: dict[str, Any]) -> None:
    print(SlashOutput(**data).model_dump_json(exclude_unset=True) if args.json else text)
