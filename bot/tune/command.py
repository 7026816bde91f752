"""`/tune KERNEL`: parse the command on a comment's first line and decide, from pure inputs, whether to start a run."""

from __future__ import annotations

import re
import shlex

from pydantic import BaseModel, ConfigDict, Field

from bot.models.github import Role
from bot.verdict.slash import WRITE_ROLES, SlashDecision, command_word, first_line, role_refusal

COMMAND = "/tune"
USAGE = "`/tune KERNEL [--strategy agent|exhaustive|both] [--rounds N] [--tokens T]`, alone on the first line"
TUNE_ROLES = WRITE_ROLES
STRATEGIES = ("agent", "exhaustive", "both")
MAX_ROUNDS = 50
KERNEL_NAME = re.compile(r"^[a-z0-9_]+$")


class TuneCommand(BaseModel):
    """What the first line asked for; `error` is set when it started with /tune but could not be read."""

    model_config = ConfigDict(frozen=True)

    line: str
    kernel: str | None = None
    strategy: str = "agent"
    rounds: int = 6
    tokens: int | None = None
    error: str | None = None


class TuneDecision(SlashDecision):
    """Grant or refuse one /tune."""

    inputs: dict[str, str] = Field(default_factory=dict)  # tune.yml's workflow_dispatch inputs, when granted


def _number(flag: str, value: str, low: int, high: int) -> int:
    if not value.isdigit() or not low <= int(value) <= high:
        raise ValueError(f"{flag} needs a whole number from {low} to {high:,}, not {value!r}")
    return int(value)


def parse_command(body: str) -> TuneCommand | None:
    """The /tune command on the first line of `body`, or None when the comment is not one
    (`/tunex`, a quoted `> /tune` and `/tune` on a later line are not commands)."""
    if command_word(body) != COMMAND:
        return None
    first = first_line(body)
    try:
        args = shlex.split(first)[1:]
    except ValueError as exc:
        return TuneCommand(line=first, error=f"cannot read the command ({exc}); use {USAGE}")
    found: dict[str, object] = {}
    kernel: str | None = None
    i = 0
    try:
        while i < len(args):
            arg = args[i]
            if arg.startswith("--"):
                name, eq, value = arg.partition("=")
                if name not in ("--strategy", "--rounds", "--tokens"):
                    raise ValueError(f"unknown option {name}")
                if not eq:
                    i += 1
                    if i >= len(args):
                        raise ValueError(f"{name} needs a value")
                    value = args[i]
                if name in found:
                    raise ValueError(f"{name} given twice")
                if name == "--strategy" and value not in STRATEGIES:
                    raise ValueError(f"--strategy is one of {', '.join(STRATEGIES)}, not {value!r}")
                found[name] = (
                    value
                    if name == "--strategy"
                    else _number(name, value, 1, MAX_ROUNDS if name == "--rounds" else 10_000_000)
                )
            elif arg.startswith("-"):
                raise ValueError(f"unknown option {arg}")
            elif kernel is None:
                kernel = arg
            else:
                raise ValueError(f"more than one kernel ({kernel}, {arg})")
            i += 1
    except ValueError as exc:
        return TuneCommand(line=first, error=f"{exc}; use {USAGE}")
    if kernel is None:
        return TuneCommand(line=first, error=f"which kernel? use {USAGE}")
    return TuneCommand(
        line=first,
        kernel=kernel,
        strategy=str(found.get("--strategy", "agent")),
        rounds=int(str(found.get("--rounds", 6))),
        tokens=int(str(found["--tokens"])) if "--tokens" in found else None,
    )


def decide(command: TuneCommand, *, login: str, role: Role, kernels: list[str], number: int) -> TuneDecision:
    """Grant when the command reads, the commenter may write to the repository (its base role) and the kernel
    exists."""
    shown = role.shown

    def refuse(reason: str) -> TuneDecision:
        return TuneDecision(granted=False, reason=reason, login=login, role=role.name)

    if command.error is not None:
        return refuse(command.error)
    if (why := role_refusal(COMMAND, login, role, TUNE_ROLES)) is not None:
        return refuse(why)
    kernel = command.kernel or ""
    if not KERNEL_NAME.fullmatch(kernel) or kernel not in kernels:
        names = ", ".join(f"`{k}`" for k in kernels) or "none"
        return refuse(f"no kernel `{kernel}` on the default branch (have: {names})")
    inputs = {"kernel": kernel, "strategy": command.strategy, "rounds": str(command.rounds), "issue": str(number)}
    if command.tokens is not None:
        inputs["tokens"] = str(command.tokens)
    budget = f"{command.tokens:,} tokens" if command.tokens is not None else "the domain's default token budget"
    return TuneDecision(
        granted=True,
        reason=f"tuning `{kernel}` ({command.strategy}, up to {command.rounds} rounds, {budget}) "
        f"for @{login} ({shown})",
        login=login,
        role=role.name,
        inputs=inputs,
    )
