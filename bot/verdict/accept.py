"""`/accept`: parse the command on a comment's first line and decide, from pure inputs, whether to grant it."""

from __future__ import annotations

import shlex

from pydantic import BaseModel, ConfigDict

from bot.models.github import PullInfo, Role, StatusState
from bot.models.ledger import AcceptanceRow
from bot.models.report import Report
from bot.verdict.slash import (
    REVIEW_ACTION,
    UNKNOWN_ROLE,
    WRITE_ROLES,
    command_word,
    first_line,
    ignore_reason,
    role_refusal,
)

COMMAND = "/accept"
USAGE = '`/accept`, `/accept KERNEL` or `/accept [KERNEL] --override "REASON"`, alone on the first line'
ACCEPT_ROLES = WRITE_ROLES
OVERRIDE_ROLES = ("maintain", "admin")


__all__ = ["REVIEW_ACTION", "UNKNOWN_ROLE", "ignore_reason"]  # the slash commands' shared rules, as /accept's own names


class AcceptCommand(BaseModel):
    """What the first line asked for; `error` is set when it started with /accept but could not be read."""

    model_config = ConfigDict(frozen=True)

    line: str
    kernel: str | None = None
    override: bool = False
    reason: str = ""
    error: str | None = None


class Decision(BaseModel):
    """Grant or refuse one /accept; a refusal's `reason` is what the reply says."""

    model_config = ConfigDict(frozen=True)

    granted: bool
    reason: str
    login: str
    role: str  # the role's name as GitHub gives it (a custom role's own name); recorded in the ledger
    head_sha: str | None = None
    kernels: list[str] = []
    override: bool = False
    override_reason: str = ""
    overridden: list[str] = []  # kernels whose failed gates this acceptance overrides


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
) -> Decision:
    """Grant or refuse, in the order a person would check: the command, the PR, the role, the evidence.

    The base role decides (`role.level`); the role's own name is what the reply and the ledger show."""
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
    return Decision(
        granted=True,
        reason=f"{what}: {', '.join(kernels)} at `{short}` by @{login} ({shown})",
        login=login,
        role=role.name,
        head_sha=pull.head_sha,
        kernels=kernels,
        override=bool(failed),
        override_reason=command.reason if failed else "",
        overridden=failed,
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
