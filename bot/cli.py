"""The `opgate` command line: parse arguments, load settings once, map errors to exit codes."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from bot import __version__
from bot.commands import accept, check, dashboard, history, init, ledger, lint, review, summary, tune
from bot.config.repo import load_config
from bot.config.settings import Settings, load_settings
from bot.errors import OpgateError
from bot.text.redact import RedactingFilter
from bot.text.safe import LogSafeFormatter, one_line

EXIT_PASS, EXIT_FAIL, EXIT_INPUT, EXIT_SERVICE = 0, 1, 2, 3

# Subcommands that need Settings; `lint` and `init` run without them (they check the configuration itself).
COMMANDS = {
    "check": check,
    "review": review,
    "ledger": ledger,
    "accept": accept,
    "summary": summary,
    "history": history,
    "dashboard": dashboard,
    "tune": tune,
}
MODULES = (init, check, review, tune, lint, ledger, accept, summary, history, dashboard)

EXIT_CODES = """exit codes:
  0  done (review: every gate passed, or nothing failed and what is undecided does not block)
  1  review: a gate failed, a kernel could not be judged or needs a person's /accept;
     lint: an error finding (--strict: a warning); history bisect: undecided, or it could not run
  2  bad input or configuration: one line on stderr names it and how to fix it
  3  an outside service (the gateway, GitHub, PostgreSQL) failed after retries; local results are written"""


def common_flags(suppress: bool) -> argparse.ArgumentParser:
    """The flags every command takes, before or after its name (`opgate -q review` = `opgate review -q`)."""
    default = argparse.SUPPRESS if suppress else None
    p = argparse.ArgumentParser(add_help=False)
    g = p.add_argument_group("global options")
    g.add_argument("-q", "--quiet", action="store_true", default=default or False, help="only warnings and results")
    g.add_argument("--json", action="store_true", default=default or False, help="print the result as one JSON object")
    g.add_argument(
        "--create-ledger",
        action="store_true",
        default=default or False,
        help="create a SQLite ledger's missing folder (otherwise a path whose folder does not exist is an error)",
    )
    return p


class _Formatter(argparse.RawDescriptionHelpFormatter):
    pass


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="opgate",
        description="Gate changes to GPU kernels: the agent proposes, the local runner decides.",
        epilog=EXIT_CODES,
        formatter_class=_Formatter,
        parents=[common_flags(suppress=False)],
    )
    p.add_argument("--version", action="version", version=f"opgate {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    shared = common_flags(suppress=True)
    for module in MODULES:
        module.register(sub)
    for parser in _all_parsers(p):
        if parser is not p:
            parser._add_container_actions(shared)
            parser.epilog = EXIT_CODES if not parser.epilog else f"{parser.epilog}\n\n{EXIT_CODES}"
            parser.formatter_class = _Formatter
    return p


def _all_parsers(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    found = [parser]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                found += _all_parsers(sub)
    return found


def _setup_logging(quiet: bool, settings: Settings) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(LogSafeFormatter("opgate: %(message)s"))
    handler.addFilter(RedactingFilter(settings.secrets()))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.WARNING if quiet else logging.INFO)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "lint":
            return lint.run(args)
        if args.command == "init":
            return init.run(args)
        config = load_config(getattr(args, "repo", None) or Path.cwd())
        settings = load_settings(config=config)
        if args.create_ledger:
            settings = settings.model_copy(update={"create_ledger": True})
        _setup_logging(args.quiet or args.json, settings)
        return COMMANDS[args.command].run(args, settings)
    except OpgateError as exc:
        print(f"opgate: error: {one_line(exc, limit=2000)}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("opgate: interrupted", file=sys.stderr)
        return 130
