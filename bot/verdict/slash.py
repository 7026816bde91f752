"""Slash commands on a comment: which command its first line is, who may give it, and `/ok-to-test`'s decisions
(trusting a head, and whether the review it dispatched may run that head)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict

from bot.models.github import PullInfo, Role

WRITE_ROLES = ("write", "maintain", "admin")  # base roles; a custom role counts as the one it builds on
REVIEW_ACTION = "created"  # an edited comment never counts (it could rewrite an old comment into a command)
UNKNOWN_ROLE = Role(level="none", name="unknown")  # not read: the command was refused before it mattered
OK_TO_TEST = "/ok-to-test"
WORKFLOW_FILE = re.compile(r"^[A-Za-z0-9_.-]+\.ya?ml$")
COMMIT_SHA = re.compile(r"^[0-9a-f]{40}$")


@dataclass(frozen=True)
class SlashCommand:
    """One row of the slash-command table (bot/commands/slash.py)."""

    name: str  # "/accept": the first word of the comment's first line
    answered_by: str  # the opgate command that answers it ("accept" → `opgate accept --event FILE --post`)
    parse: Callable[[str], Any]  # a comment's body → the command read from its first line, or None: not this one
    roles: tuple[str, ...]  # the base roles that may give it (a custom role counts as the one it builds on)
    reply: Callable[[Any, str], str]  # (the decision, the command's line) → the comment opgate posts

    def refusal(self, login: str, role: Role) -> str | None:
        """The role rule: why `login` with `role` may not give this command, or None when it may."""
        return role_refusal(self.name, login, role, self.roles)


class SlashDecision(BaseModel):
    """Grant or refuse one slash command: what /accept's and /tune's decisions share (each adds its own fields)."""

    model_config = ConfigDict(frozen=True)

    granted: bool
    reason: str  # a refusal's reason is what the reply says
    login: str
    role: str  # the role's name as GitHub gives it (a custom role's own name)


def first_line(body: str) -> str:
    """The comment's first line, without surrounding whitespace: the only line a command may stand on."""
    return body.replace("\r\n", "\n").split("\n", 1)[0].strip()


def command_word(body: str) -> str:
    """The first word of the first line (`/tune` of `/tune x`); "" for an empty comment."""
    first = first_line(body)
    return first.split(maxsplit=1)[0] if first else ""


def ignore_reason(action: str, login: str, is_bot: bool) -> str | None:
    """Why an issue_comment event is not ours to answer at all (no reaction, no reply); None to go on."""
    if action != REVIEW_ACTION:
        return f"comment {action}, not created: only new comments are commands"
    if is_bot or login.lower().endswith("[bot]"):
        return f"comment by the bot account {login}"
    return None


def role_refusal(command: str, login: str, role: Role, roles: tuple[str, ...] = WRITE_ROLES) -> str | None:
    """The role rule every command shares: the base role decides, the role's own name is what the reply shows."""
    if role.level in roles:
        return None
    return f"@{login} has the role `{role.shown}` here; `{command}` needs {role_names(roles)}"


def role_names(roles: tuple[str, ...]) -> str:
    return roles[0] if len(roles) == 1 else f"{', '.join(roles[:-1])} or {roles[-1]}"


class OkToTestDecision(BaseModel):
    """Trust (or not) a pull request's current head for one review on the GPU runners; `reply` is the comment."""

    model_config = ConfigDict(frozen=True)

    granted: bool
    reply: str
    inputs: dict[str, str] = {}  # the review workflow's workflow_dispatch inputs, when granted


def parse_ok_to_test(body: str) -> bool:
    """Whether the first line is `/ok-to-test` alone (`/ok-to-testing`, `> /ok-to-test`, a later line: no)."""
    return first_line(body) == OK_TO_TEST


def check_workflow(name: str) -> str | None:
    """Why `name` cannot be the review workflow /ok-to-test dispatches (a file name in .github/workflows)."""
    return None if WORKFLOW_FILE.fullmatch(name) else f"not a workflow file: {name!r}"


def decide_ok_to_test(*, login: str, role: Role, number: int, head_sha: str) -> OkToTestDecision:
    """A write+ collaborator trusts the head as it is now; a later push needs a new /ok-to-test."""
    if role.level not in WRITE_ROLES:
        return OkToTestDecision(
            granted=False,
            reply=f"👎 `{OK_TO_TEST}` refused: it needs {role_names(WRITE_ROLES)}; @{login} has `{role.shown}`.",
        )
    return OkToTestDecision(
        granted=True,
        reply=f"🚀 @{login} trusted head `{head_sha[:10]}` for one review on the GPU runners. "
        f"A new push needs a new `{OK_TO_TEST}`.",
        inputs={"pr": str(number), "head_sha": head_sha},
    )


class DispatchDecision(BaseModel):
    """Whether the review `/ok-to-test` dispatched runs the head it was trusted for (`opgate trust`): `run` and the
    trust job's outputs; `moved_on` when the pull request's head is no longer that SHA (the run refuses)."""

    model_config = ConfigDict(frozen=True)

    run: bool
    moved_on: bool = False
    reason: str  # one line for the run's log: why it runs, is skipped, or refuses
    outputs: dict[str, str]  # the trust job's outputs (run, and for a run pr, head_sha, base_sha)


def decide_dispatched(pull: PullInfo, trusted_head: str) -> DispatchDecision:
    """The dispatched review runs only the head a writer trusted, on an open pull request that is not a draft."""
    skip = {"run": "false"}
    if pull.state != "open":
        return DispatchDecision(run=False, reason=f"#{pull.number} is {pull.state}: nothing to review", outputs=skip)
    if pull.head_sha != trusted_head:
        return DispatchDecision(
            run=False,
            moved_on=True,
            reason=f"#{pull.number} moved on to {pull.head_sha} after {trusted_head} was trusted: "
            f"comment {OK_TO_TEST} again",
            outputs=skip,
        )
    if pull.draft:
        return DispatchDecision(
            run=False, reason=f"#{pull.number} is a draft: reviewed once it is ready for review", outputs=skip
        )
    return DispatchDecision(
        run=True,
        reason=f"#{pull.number}: head {pull.head_sha[:10]} is the one trusted by {OK_TO_TEST}",
        outputs={"run": "true", "pr": str(pull.number), "head_sha": pull.head_sha, "base_sha": pull.base_sha},
    )
