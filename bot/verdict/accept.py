"""`/accept`: parse the command on a comment's first line and decide, from pure inputs, whether to grant it."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from bot.models.github import CommitPeople, PullInfo, Role, StatusState
from bot.models.ledger import AcceptanceRow
from bot.models.report import Report
from bot.verdict.slash import (
    REVIEW_ACTION,
    UNKNOWN_ROLE,
    WRITE_ROLES,
    SlashDecision,
    command_word,
    first_line,
    ignore_reason,
    role_names,
    role_refusal,
)

COMMAND = "/accept"
USAGE = '`/accept`, `/accept KERNEL` or `/accept [KERNEL] --override "REASON"`, alone on the first line'
ACCEPT_ROLES = WRITE_ROLES
OVERRIDE_ROLES = ("maintain", "admin")
LISTED_COMMITS = 250  # GitHub's list of a pull request's commits stops here ("Lists a maximum of 250 commits")
WEB_FLOW = "web-flow"  # GitHub's own committer of commits made on github.com (an edit, "Update branch"): nobody
SELF_ACCEPT_KEY = "allow_self_accept"  # the configuration key that lets authors and pushers accept (a weakening)
WHO_MAY_ACCEPT = (
    f"`/accept` needs a collaborator with {role_names(ACCEPT_ROLES)}, and `--override` one with "
    f"{role_names(OVERRIDE_ROLES)}, who neither opened this pull request nor pushed a commit to it"
)


__all__ = ["REVIEW_ACTION", "UNKNOWN_ROLE", "ignore_reason"]  # the slash commands' shared rules, as /accept's own names


class AcceptCommand(BaseModel):
    """What the first line asked for; `error` is set when it started with /accept but could not be read."""

    model_config = ConfigDict(frozen=True)

    line: str
    kernel: str | None = None
    override: bool = False
    reason: str = ""
    error: str | None = None


class Decision(SlashDecision):
    """Grant or refuse one /accept (its role is recorded in the ledger)."""

    head_sha: str | None = None
    kernels: list[str] = Field(default_factory=list)
    override: bool = False
    override_reason: str = ""
    overridden: list[str] = Field(default_factory=list)  # kernels whose failed gates this acceptance overrides
    self_accept: Literal["", "author", "pusher"] = ""  # granted to its own author or a pusher: allow_self_accept
    self_commit: str = ""  # the pusher's first commit of the pull request (self_accept "pusher")


class Pushers(BaseModel):
    """Who pushed commits to a pull request, as far as GitHub's commit list tells: the logins of its commits'
    authors and committers (first seen first). `unknown` says why the list cannot be trusted to be complete."""

    model_config = ConfigDict(frozen=True)

    logins: list[str] = []
    commits: dict[str, str] = {}  # lower login -> the first commit (SHA) it wrote or committed
    unknown: str = ""


def pushers_of(pull: PullInfo, commits: Sequence[CommitPeople]) -> Pushers:
    """The pushers of `pull` from its listed commits (pure). The list is unknown, not short, when GitHub listed
    fewer commits than the pull request has (it lists at most 250) or the head is not among them (a push landed
    while it was read): then nobody can be told apart from a pusher."""
    logins: list[str] = []
    first: dict[str, str] = {}
    for c in commits:
        for login in (c.author, c.committer):
            if login and login.lower() != WEB_FLOW and login.lower() not in first:
                first[login.lower()] = c.sha
                logins.append(login)
    unknown = ""
    if len(commits) < pull.commits:
        unknown = (
            f"GitHub lists {len(commits)} of this pull request's {pull.commits} commits (at most {LISTED_COMMITS}), "
            "so opgate cannot tell who pushed to it (squash or split the change)"
        )
    elif pull.head_sha not in {c.sha for c in commits}:
        unknown = (
            f"the pull request moved while opgate read it (its head `{pull.head_sha[:10]}` is not among the commits "
            "GitHub listed; `/accept` again)"
        )
    return Pushers(logins=logins, commits=first, unknown=unknown)


def self_refusal(login: str, pull: PullInfo, pushers: Pushers) -> str | None:
    """The rule that acceptance stays with other people: why `login` may not accept `pull`, or None.

    The author of the pull request and anyone GitHub names as the author or committer of one of its commits may
    not `/accept` it, nor `--override` its gates; a commit list that is not known whole refuses everyone."""
    if pushers.unknown:
        return f"{pushers.unknown}; {WHO_MAY_ACCEPT}"
    why = self_accept_reason(login, pull, pushers)
    if why is None:
        return None
    return f"{why}, and nobody accepts their own change: {WHO_MAY_ACCEPT}"


def own_change(login: str, pull: PullInfo, pushers: Pushers) -> tuple[Literal["author", "pusher"], str] | None:
    """How `login` is the change's own: ("author", "") when they opened it, ("pusher", SHA) for the first commit
    GitHub names them the author or committer of; None when neither (logins compare as GitHub's do, any case)."""
    if login.lower() == pull.author.lower():
        return "author", ""
    sha = pushers.commits.get(login.lower())
    return ("pusher", sha) if sha is not None else None


def self_accept_reason(login: str, pull: PullInfo, pushers: Pushers) -> str | None:
    """The same in words ("@alice opened pull request #42"), or None."""
    own = own_change(login, pull, pushers)
    if own is None:
        return None
    if own[0] == "author":
        return f"@{login} opened pull request #{pull.number}"
    return f"@{login} wrote or committed commit `{own[1][:10]}` of pull request #{pull.number}"


def parse_command(body: str) -> AcceptCommand | None:
    """The /accept command on the first line of `body`, or None when the comment is not one.

    `/acceptx`, a quoted `> /accept` and `/accept` on any later line are not commands.
    """
    if command_word(body) != COMMAND:
        return None
    first = first_line(body)
    try:
        args = shlex.split(first)[1:]
    except ValueError as exc:
        return AcceptCommand(line=first, error=f"cannot read the command ({exc}); use {USAGE}")
    kernel: str | None = None
    override, reason = False, ""
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--override" or arg.startswith("--override="):
            if override:
                return AcceptCommand(line=first, error=f"--override given twice; use {USAGE}")
            override = True
            if arg.startswith("--override="):
                reason = arg.partition("=")[2]
            elif i + 1 < len(args):
                i += 1
                reason = args[i]
            if not reason.strip():
                return AcceptCommand(line=first, error=f"--override needs a reason in quotes; use {USAGE}")
        elif arg.startswith("-"):
            return AcceptCommand(line=first, error=f"unknown option {arg}; use {USAGE}")
        elif kernel is None:
            kernel = arg
        else:
            return AcceptCommand(line=first, error=f"more than one kernel ({kernel}, {arg}); use {USAGE}")
        i += 1
    return AcceptCommand(line=first, kernel=kernel, override=override, reason=reason.strip())


def decide(
    command: AcceptCommand,
    *,
    login: str,
    role: Role,
    is_pull_request: bool,
    pull: PullInfo | None,
    report: Report | None,
    pushers: Pushers | None,
    allow_self_accept: bool = False,
) -> Decision:
    """Grant or refuse, in the order a person would check: the command, the PR, the role, whose change it is,
    the evidence.

    The base role decides (`role.level`); the role's own name is what the reply and the ledger show. The pull
    request's author (`pull.author`) and its `pushers` may not accept it unless `allow_self_accept` (the
    repository's configuration) says so; `pushers` None (not read) refuses like a commit list not known whole."""
    shown = role.shown

    def refuse(reason: str) -> Decision:
        return Decision(
            granted=False, reason=reason, login=login, role=role.name, head_sha=pull.head_sha if pull else None
        )

    if command.error is not None:
        return refuse(command.error)
    if not is_pull_request or pull is None:
        return refuse("this is an issue, not a pull request: there is nothing to accept")
    if pull.merged or pull.state != "open":
        return refuse(f"pull request #{pull.number} is {'merged' if pull.merged else pull.state}")
    if (why := role_refusal(COMMAND, login, role, ACCEPT_ROLES)) is not None:
        return refuse(why)
    pushers = pushers if pushers is not None else Pushers(unknown="opgate did not read who pushed to it")
    own = own_change(login, pull, pushers)
    if not allow_self_accept and (why := self_refusal(login, pull, pushers)) is not None:
        return refuse(why)
    short = pull.head_sha[:10]
    if report is None:
        return refuse(
            f"no opgate report for the head `{short}` yet: the review of this commit has not finished (or failed "
            "before writing one). Wait for the `opgate/acceptance` status, then `/accept` again"
        )
    changed = [k for k in report.kernels if k.changed]
    if command.kernel is not None:
        known = {k.name: k for k in report.kernels}
        if command.kernel not in known:
            names = ", ".join(f"`{k.name}`" for k in changed) or "none"
            return refuse(f"no kernel `{command.kernel}` in the report for `{short}` (changed: {names})")
        if not known[command.kernel].changed:
            return refuse(f"`{command.kernel}` is not changed by this pull request at `{short}`")
        selected = [known[command.kernel]]
    else:  # the whole pull request: every changed kernel, and any kernel the review could not pass
        selected = [k for k in report.kernels if k.changed or k.verdict in ("fail", "error")]
    if not selected:
        return refuse(f"this pull request changes no kernel at `{short}`: there is nothing to accept")
    failed = [k.name for k in selected if k.verdict in ("fail", "error")]
    if failed and not command.override:
        names = ", ".join(f"`{n}`" for n in failed)
        return refuse(
            f"gates did not pass for {names} at `{short}`; fix the change, or a maintainer can "
            '`/accept --override "REASON"`'
        )
    if failed and role.level not in OVERRIDE_ROLES:
        return refuse(f"`--override` of failed gates needs maintain or admin; @{login} has `{shown}`")
    kernels = [k.name for k in selected]
    what = "override" if failed else "accept"
    if not failed and (open_ := [k.name for k in selected if k.verdict in ("needs_accept", "undecided")]):
        what = f"accept ({', '.join(open_)}: nothing failed, a person's call)"
    told = ""
    if own is not None:
        told = f"; self-acceptance ({self_accept_reason(login, pull, pushers)}), allowed by {SELF_ACCEPT_KEY}"
    return Decision(
        granted=True,
        reason=f"{what}: {', '.join(kernels)} at `{short}` by @{login} ({shown}){told}",
        login=login,
        role=role.name,
        head_sha=pull.head_sha,
        kernels=kernels,
        override=bool(failed),
        override_reason=command.reason if failed else "",
        overridden=failed,
        self_accept=own[0] if own else "",
        self_commit=own[1] if own else "",
    )


def acceptance_row(decision: Decision, pr: int, comment_id: int) -> AcceptanceRow:
    """The ledger row of a granted decision (who, role, SHA, kernels, reason)."""
    assert decision.granted and decision.head_sha is not None
    return AcceptanceRow(
        pr=pr,
        head_sha=decision.head_sha,
        login=decision.login,
        role=decision.role,
        kernels=decision.kernels,
        override=decision.override,
        reason=decision.override_reason,
        comment_id=comment_id,
    )


def accepted_status(report: Report, rows: list[AcceptanceRow]) -> tuple[StatusState, str]:
    """`opgate/accepted` for the report's head from the acceptances recorded for that head."""
    rows = [r for r in rows if r.head_sha == report.head_sha]
    changed = [k.name for k in report.kernels if k.changed or k.verdict in ("fail", "error")]
    done = {k for r in rows for k in r.kernels}
    who = ", ".join(dict.fromkeys(f"@{r.login}" for r in rows)) or "nobody"
    waiting = [k for k in changed if k not in done]
    if not waiting:
        return "success", f"accepted by {who} for {report.head_sha[:10]}"
    return "pending", f"accepted by {who}: {', '.join(sorted(done))}; waiting for {', '.join(waiting)}"


def gates_overridden(report: Report, rows: list[AcceptanceRow]) -> AcceptanceRow | None:
    """The latest override that, with earlier ones for this head, covers every failed kernel; else None."""
    rows = [r for r in rows if r.head_sha == report.head_sha]
    failed = {k.name for k in report.kernels if k.verdict in ("fail", "error")}
    overrides = [r for r in rows if r.override]
    if not failed or not overrides:
        return None
    covered = {k for r in overrides for k in r.kernels}
    return overrides[-1] if failed <= covered else None


def needs_accept(report: Report) -> list[str]:
    """The kernels only a person's /accept can pass (new with their own reference, an implausible speedup)."""
    return [k.name for k in report.kernels if k.verdict == "needs_accept"]


def accept_waiting(report: Report, rows: list[AcceptanceRow]) -> list[str]:
    """The kernels that need /accept and have no acceptance for the report's head yet."""
    done = {k for r in rows if r.head_sha == report.head_sha for k in r.kernels}
    return [name for name in needs_accept(report) if name not in done]
