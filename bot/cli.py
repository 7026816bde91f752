"""The `opgate` command line: a thin layer that parses arguments and maps errors to exit codes."""

from __future__ import annotations

import argparse
import csv
import logging
import sys
from pathlib import Path

from bot import __version__
from bot.errors import OpgateError
from bot.events import load_pull_request_event
from bot.ledger import Ledger, UsageRow, sqlite_path
from bot.redact import RedactingFilter
from bot.review import Reviewer, ReviewRequest
from bot.settings import Settings, load_settings

log = logging.getLogger("opgate")

EXIT_PASS, EXIT_FAIL, EXIT_INPUT, EXIT_SERVICE = 0, 1, 2, 3


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="opgate", description="Gate changes to GPU kernels.")
    p.add_argument("--version", action="version", version=f"opgate {__version__}")
    p.add_argument("-q", "--quiet", action="store_true", help="only warnings and the final lines")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    r = sub.add_parser(
        "review",
        help="build, run and gate the kernels a change touches",
        description="Review base..head: static checks, agent, build, run, gate, report.",
    )
    r.add_argument("--base", help="base revision (default: the event's base SHA)")
    r.add_argument("--head", help="head revision (default: the event's head SHA)")
    r.add_argument("--repo", type=Path, default=Path("."), help="git repository (default: .)")
    r.add_argument("--out", type=Path, default=Path("reports/latest"), help="report folder (default: reports/latest)")
    r.add_argument("--offline", action="store_true", help="do not ask the agent, even if a key is set")
    r.add_argument("--event", type=Path, help="a pull_request event file ($GITHUB_EVENT_PATH)")
    r.add_argument("--kernel", dest="only_kernel", help="review only this kernel")

    led = sub.add_parser("ledger", help="the token ledger", description="Read the ledger.")
    led_sub = led.add_subparsers(dest="ledger_command", required=True, metavar="ACTION")
    exp = led_sub.add_parser(
        "export",
        help="export agent usage rows as CSV",
        description="Write operator_agent_usage to a CSV file (rewritten whole).",
    )
    exp.add_argument("--csv", type=Path, required=True, help="output file, e.g. reports/token_usage.csv")
    return p


def _setup_logging(quiet: bool, settings: Settings) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("opgate: %(message)s"))
    handler.addFilter(RedactingFilter(settings.keys.values()))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.WARNING if quiet else logging.INFO)


def cmd_review(args: argparse.Namespace, settings: Settings) -> int:
    base, head, pr = args.base, args.head, None
    if args.event is not None:
        event = load_pull_request_event(args.event)
        base, head, pr = base or event.base_sha, head or event.head_sha, event.number
    if not base or not head:
        raise OpgateError("review needs --base and --head (or --event with a pull_request event)")
    request = ReviewRequest(
        repo=args.repo, base=base, head=head, out=args.out, offline=args.offline, pr=pr, only_kernel=args.only_kernel
    )
    ledger = Ledger(sqlite_path(settings.database_url))
    try:
        outcome = Reviewer(request, settings, ledger).run()
    finally:
        ledger.close()
    report = outcome.report
    changed = [k for k in report.kernels if k.changed]
    summary = ", ".join(f"{k.name} {k.verdict}" for k in changed) or "no kernel changed"
    print(f"opgate: verdict {report.verdict.upper()} ({summary})")
    for error in outcome.service_errors:
        print(f"opgate: outside service failed: {error}")
    print(f"  report:  {outcome.report_path}")
    print(f"  comment: {outcome.comment_path}")
    return outcome.exit_code


def cmd_ledger(args: argparse.Namespace, settings: Settings) -> int:
    ledger = Ledger(sqlite_path(settings.database_url))
    try:
        rows = ledger.usage()
    finally:
        ledger.close()
    args.csv.parent.mkdir(parents=True, exist_ok=True)
    tmp = args.csv.with_suffix(args.csv.suffix + ".tmp")
    with tmp.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(UsageRow.model_fields))
        writer.writeheader()
        for row in rows:
            writer.writerow(row.model_dump())
    tmp.replace(args.csv)
    print(f"opgate: {len(rows)} usage rows -> {args.csv}")
    return EXIT_PASS


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        settings = load_settings()
        _setup_logging(args.quiet, settings)
        if args.command == "review":
            return cmd_review(args, settings)
        return cmd_ledger(args, settings)
    except OpgateError as exc:
        print(f"opgate: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("opgate: interrupted", file=sys.stderr)
        return 130
