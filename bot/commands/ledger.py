"""`opgate ledger`: read the token ledger (export as CSV)."""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

from bot.ledger import UsageRow, open_ledger
from bot.settings import Settings


def register(sub: argparse._SubParsersAction) -> None:
    led = sub.add_parser("ledger", help="the token ledger", description="Read the ledger.")
    actions = led.add_subparsers(dest="ledger_command", required=True, metavar="ACTION")
    exp = actions.add_parser(
        "export",
        help="export agent usage rows as CSV",
        description="Write operator_agent_usage to a CSV file (rewritten whole).",
    )
    exp.add_argument("--csv", type=Path, required=True, help="output file, e.g. reports/token_usage.csv")


def run(args: argparse.Namespace, settings: Settings) -> int:
    ledger = open_ledger(settings.database_url)
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
    return 0
