"""`opgate accept`: answer an `/accept` comment — 👀, then 👍 and a ledger record, or 👎 and a reply saying why."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path
from typing import Any

from bot.commands import Commands
from bot.commands.intake import intake
from bot.config.settings import Settings
from bot.edges import publish
from bot.edges.github import GitHubEdge
from bot.ledger import open_ledger
from bot.models.github import PullInfo
from bot.models.output import SlashOutput
from bot.present.render import render_accept_reply
from bot.present.status import acceptance_status
from bot.text.safe import one_line
from bot.verdict import accept
from bot.verdict.slash import SlashCommand

log = logging.getLogger(__name__)

SLASH = SlashCommand(
    name=accept.COMMAND,
    answered_by="accept",
    parse=accept.parse_command,
    roles=accept.ACCEPT_ROLES,
    reply=render_accept_reply,
)


def register(commands: Commands) -> None:
    p = commands.add(
        "accept",
        writes_ledger=True,
        help="answer an /accept comment on a pull request",
        description="Read an issue_comment event; grant /accept (bound to the PR's head SHA and its stored "
        "report) or refuse it with the reason. Without --post nothing is written (a dry run, which still reads "
        "the pull request from GitHub: GITHUB_TOKEN).",
    )
    p.add_argument("--event", type=Path, required=True, help="an issue_comment event file ($GITHUB_EVENT_PATH)")
    p.add_argument(
        "--post",
        action="store_true",
        help="react, reply, record in the ledger and set the opgate/accepted status",
    )


def run(args: argparse.Namespace, settings: Settings) -> int:
    got = intake(args.event, SLASH)
    event, author, ignored = got.event, got.event.comment.user, got.ignored
    command: accept.AcceptCommand | None = got.command
    if ignored is not None or command is None:
        log.info("ignored: %s", ignored)
        _say(args, f"opgate: ignored, {one_line(ignored)}", {"ignored": ignored, "granted": None, "posted": False})
        return 0
    with publish.open_edge(settings) as edge:
        if args.post:
            edge.react(event.comment.id, "eyes")
        pull: PullInfo | None = edge.pull_request(event.number) if event.is_pull_request else None
        asked = pull is not None and command.error is None
        role = edge.role(author.login) if asked else accept.UNKNOWN_ROLE
        pushers = accept.pushers_of(pull, edge.pull_commits(pull.number)) if asked and pull is not None else None
        allow_self_accept = settings.repo_config.allow_self_accept
        ledger = open_ledger(settings.database_url, create=settings.create_ledger)
        try:
            report = ledger.latest_review(pull.head_sha) if pull is not None else None
            decision = accept.decide(
                command,
                login=author.login,
                role=role,
                is_pull_request=event.is_pull_request,
                pull=pull,
                report=report,
                pushers=pushers,
                allow_self_accept=allow_self_accept,
            )
            verdict = f"opgate: /accept {'granted' if decision.granted else 'refused'}: {one_line(decision.reason)}"
            result = {"ignored": None, "granted": decision.granted, "reason": decision.reason, "posted": args.post}
            if not args.post:
                _say(args, f"{verdict}\nopgate: dry run (no --post): nothing recorded or posted", result)
                return 0
            _say(args, verdict, result)
            if not decision.granted:
                _refuse(edge, event.number, event.comment.id, decision, command.line)
                return 0
            assert report is not None and pull is not None
            ledger.record_acceptance(accept.acceptance_row(decision, pull.number, event.comment.id))
            rows = [r for r in ledger.acceptances(pull.number) if r.head_sha == pull.head_sha]
        finally:
            ledger.close()
        edge.react(event.comment.id, "+1")
        state, description = accept.accepted_status(report, rows)
        edge.set_status(pull.head_sha, publish.ACCEPTED_CONTEXT, state, description)
        if decision.override or set(decision.kernels) & set(accept.needs_accept(report)):
            gate_state, gate_description = acceptance_status(report, rows)
            edge.set_status(pull.head_sha, publish.ACCEPTANCE_CONTEXT, gate_state, gate_description)
        if decision.override or decision.self_accept:  # what a person should see on the pull request itself
            edge.reply(pull.number, SLASH.reply(decision, command.line))
        log.info("%s=%s on %s", publish.ACCEPTED_CONTEXT, state, pull.head_sha[:12])
    return 0


def _say(args: argparse.Namespace, text: str, data: dict[str, Any]) -> None:
    print(SlashOutput(**data).model_dump_json(exclude_unset=True) if args.json else text)


def _refuse(edge: GitHubEdge, number: int, comment_id: int, decision: accept.Decision, line: str) -> None:
    edge.reply(number, SLASH.reply(decision, line))
    edge.react(comment_id, "-1")
