"""The `opgate` command line: parse arguments, load settings once, map errors to exit codes."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from bot import __version__
from bot.commands import (
    Commands,
    Formatter,
    accept,
    check,
    dashboard,
    history,
    init,
    ledger,
    lint,
    ok_to_test,
    review,
    summary,
    trust,
    tune,
)
from bot.config.repo import load_config
from bot.config.secrets import credential_values
from bot.config.settings import Settings, load_settings
from bot.errors import OpgateError
from bot.text.i18n import speaking
from bot.text.redact import RedactingFilter, keep_out, redact
from bot.text.safe import LogSafeFormatter, one_line


@dataclass(frozen=True)
class Command:
    """A subcommand's module (`register(commands)`, `run(args[, settings])`); `settings`: whether it runs with
    Settings (`lint` and `init` run without: they check the configuration itself)."""

    module: ModuleType
    settings: bool = True


# Every subcommand, registered once, in the order `opgate --help` lists them.
COMMANDS = {
    "init": Command(init, settings=False),
    "check": Command(check),
    "review": Command(review),
    "tune": Command(tune),
    "lint": Command(lint, settings=False),
    "ledger": Command(ledger),
    "accept": Command(accept),
    "ok-to-test": Command(ok_to_test),
    "trust": Command(trust),
    "summary": Command(summary),
    "history": Command(history),
    "dashboard": Command(dashboard),
}

EXIT_CODES = """exit codes:
  0  done (review: every gate passed, or nothing failed and what is undecided does not block)
  1  review: a gate failed, a kernel could not be judged or needs a person's /accept;
     lint: an error finding (--strict: a warning); history bisect: undecided, or it could not run
  2  bad input or configuration: one line on stderr names it and how to fix it
  3  an outside service (the gateway, GitHub, PostgreSQL) failed after retries; local results are written"""


def common_flags(suppress: bool) -> argparse.ArgumentParser:
    """The flags every command takes, before or after its name (`opgate -q review` = `opgate review -q`).

    After the name their default is SUPPRESS, so a flag given before the name is not reset by the subcommand."""
    default = argparse.SUPPRESS if suppress else False
    p = argparse.ArgumentParser(add_help=False)
    g = p.add_argument_group("global options")
    g.add_argument("-q", "--quiet", action="store_true", default=default, help="only warnings and results")
    g.add_argument("-v", "--verbose", action="store_true", default=default, help="debug logging on stderr")
    g.add_argument("--json", action="store_true", default=default, help="print the result as one JSON object")
    return p


def ledger_flag() -> argparse.ArgumentParser:
    """`--create-ledger`, on the commands that write the ledger only."""
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument_group("global options").add_argument(
        "--create-ledger",
        action="store_true",
        help="create a SQLite ledger's missing folder (otherwise a path whose folder does not exist is an error)",
    )
    return p


def _build() -> tuple[argparse.ArgumentParser, dict[str, argparse.ArgumentParser]]:
    p = argparse.ArgumentParser(
        prog="opgate",
        description="Gate changes to GPU kernels: the agent proposes, the local runner decides.",
        epilog=EXIT_CODES,
        formatter_class=Formatter,
        parents=[common_flags(suppress=False)],
    )
    p.add_argument("--version", action="version", version=f"opgate {__version__}")
    commands = Commands(
        p, dest="command", metavar="COMMAND", flags=common_flags(suppress=True), ledger_flag=ledger_flag(),
        epilog=EXIT_CODES,
    )  # fmt: skip
    for command in COMMANDS.values():
        command.module.register(commands)
    return p, commands.parsers


def parser() -> argparse.ArgumentParser:
    return _build()[0]


def subcommands() -> dict[str, argparse.ArgumentParser]:
    """Every subcommand's parser by its name, nested ones as "history record" (for the docs check)."""
    return _build()[1]


class _Stderr(logging.StreamHandler):  # type: ignore[type-arg]
    """Writes each record to sys.stderr as it is then: a live progress display (present/progress.py `Steps`) puts
    its proxy there, which prints the line above the spinner instead of through it."""

    @property  # type: ignore[override]
    def stream(self) -> object:
        return sys.stderr

    @stream.setter
    def stream(self, _: object) -> None:
        pass


def _setup_logging(quiet: bool, verbose: bool, secrets: list[str]) -> None:
    handler = _Stderr()
    handler.setFormatter(LogSafeFormatter("opgate: %(message)s"))
    handler.addFilter(RedactingFilter(secrets))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.DEBUG if verbose else logging.WARNING if quiet else logging.INFO)


def _environment_secrets() -> list[str]:
    """The secret values set in the environment, for the commands that run without Settings."""
    return list(credential_values(os.environ))


def main(argv: list[str] | None = None) -> int:
    cli = parser()
    args = cli.parse_args(argv)
    if args.quiet and args.verbose:  # checked here: before and after the command's name alike
        cli.error("-q/--quiet and -v/--verbose exclude each other")
    command = COMMANDS[args.command]
    try:
        if not command.settings:
            keep_out(_environment_secrets())
            if args.verbose:  # otherwise as before: Python's last-resort handler shows warnings
                _setup_logging(False, True, _environment_secrets())
            return int(command.module.run(args))
        config = load_config(getattr(args, "repo", None) or Path.cwd())
        settings: Settings = load_settings(config=config)
        if getattr(args, "create_ledger", False):
            settings = settings.model_copy(update={"create_ledger": True})
        keep_out(settings.secrets())  # masked in every output the command writes (bot/text/redact.py)
        _setup_logging(args.quiet or args.json, args.verbose, settings.secrets())
        with speaking(settings.locale):  # what every comment, reply and issue this command writes is written in
            return int(command.module.run(args, settings))
    except OpgateError as exc:
        print(f"opgate: error: {redact(one_line(exc, limit=2000))}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("opgate: interrupted", file=sys.stderr)
        return 130
