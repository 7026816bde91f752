"""The `opgate` command line: parse arguments, load settings once, map errors to exit codes."""

from __future__ import annotations

import argparse
import logging
import sys

from bot import __version__
from bot.commands import accept, dashboard, history, ledger, lint, review, summary, tune
from bot.errors import OpgateError
from bot.redact import RedactingFilter
from bot.settings import Settings, load_settings

EXIT_PASS, EXIT_FAIL, EXIT_INPUT, EXIT_SERVICE = 0, 1, 2, 3

# Subcommands that need Settings; `lint` runs without them (it checks the configuration itself).
COMMANDS = {
    "review": review,
    "ledger": ledger,
    "accept": accept,
    "summary": summary,
    "history": history,
    "dashboard": dashboard,
    "tune": tune,
}


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="opgate", description="Gate changes to GPU kernels.")
    p.add_argument("--version", action="version", version=f"opgate {__version__}")
    p.add_argument("-q", "--quiet", action="store_true", help="only warnings and the final lines")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for module in (review, tune, lint, ledger, accept, summary, history, dashboard):
        module.register(sub)
    return p


def _setup_logging(quiet: bool, settings: Settings) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("opgate: %(message)s"))
    handler.addFilter(RedactingFilter(settings.secrets()))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.WARNING if quiet else logging.INFO)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "lint":
            return lint.run(args)
        settings = load_settings()
        _setup_logging(args.quiet, settings)
        return COMMANDS[args.command].run(args, settings)
    except OpgateError as exc:
        print(f"opgate: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("opgate: interrupted", file=sys.stderr)
        return 130
