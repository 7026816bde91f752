"""One module per `opgate` subcommand: each exposes `register(commands)` and `run(args, settings)`."""

from __future__ import annotations

import argparse


class Formatter(argparse.RawDescriptionHelpFormatter):
    """Descriptions and epilogs keep their line breaks (the exit-code table)."""


class Commands:
    """The subcommands of one parser, built with argparse's public API only.

    Every subcommand gets the global flags as a parent (`opgate -q review` = `opgate review -q`), the exit codes
    in its epilog, and `--create-ledger` only when it writes the ledger. `parsers` names each one, nested ones
    as "history record", for the help and the docs check."""

    def __init__(
        self,
        parser: argparse.ArgumentParser,
        *,
        dest: str,
        metavar: str,
        flags: argparse.ArgumentParser,
        ledger_flag: argparse.ArgumentParser,
        epilog: str,
        prefix: str = "",
        parsers: dict[str, argparse.ArgumentParser] | None = None,
    ) -> None:
        self._sub = parser.add_subparsers(dest=dest, required=True, metavar=metavar)
        self._flags, self._ledger_flag, self._epilog, self._prefix = flags, ledger_flag, epilog, prefix
        self.parsers: dict[str, argparse.ArgumentParser] = {} if parsers is None else parsers

    def add(
        self, name: str, *, help: str, description: str, epilog: str = "", writes_ledger: bool = False
    ) -> argparse.ArgumentParser:
        parents = [self._flags, self._ledger_flag] if writes_ledger else [self._flags]
        p = self._sub.add_parser(
            name,
            help=help,
            description=description,
            epilog=f"{epilog}\n\n{self._epilog}" if epilog else self._epilog,
            formatter_class=Formatter,
            parents=parents,
        )
        self.parsers[self._prefix + name] = p
        return p

    def nested(self, parser: argparse.ArgumentParser, name: str, *, dest: str, metavar: str) -> Commands:
        """The actions of the subcommand `name` (`parser`), e.g. `history record`."""
        return Commands(
            parser,
            dest=dest,
            metavar=metavar,
            flags=self._flags,
            ledger_flag=self._ledger_flag,
            epilog=self._epilog,
            prefix=f"{self._prefix}{name} ",
            parsers=self.parsers,
        )
