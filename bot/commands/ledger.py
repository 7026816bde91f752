"""`opgate ledger`: read the token ledger (export as CSV, this week's budget per domain)."""

from __future__ import annotations

import argparse
import csv
from datetime import UTC, datetime
from pathlib import Path

from bot import budget, tokens
from bot.ledger import Ledger, UsageRow, open_ledger
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
    actions.add_parser(
        "budget",
        help="this week's token budget per domain",
        description="Per domain, this ISO week: tokens used, reserved and left, and the spend-anomaly line.",
    )


def run(args: argparse.Namespace, settings: Settings) -> int:
    ledger = open_ledger(settings.database_url)
    try:
        if args.ledger_command == "budget":
            print(budget_text(ledger, settings, datetime.now(UTC)))
            return 0
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


def budget_text(ledger: Ledger, settings: Settings, now: datetime) -> str:
    """The `ledger budget` table: one line per domain, then its anomaly line."""
    week = budget.iso_week(now)
    rows = ledger.usage()
    lines = [
        f"opgate token budget, week {week} (ledger {ledger.db.where})",
        f"{'domain':<15} {'used':>10} {'reserved':>10} {'left':>10} {'budget':>10} {'used %':>7}",
    ]
    notes = []
    for domain in tokens.DOMAINS:
        state = budget.state(ledger, domain=domain, limit=settings.budget_weekly.get(domain), now=now)
        lines.append(
            f"{domain:<15} {state.used:>10,} {state.reserved:>10,} {state.left:>10,} {state.limit:>10,} "
            f"{state.pct_used:>6.1f}%"
        )
        weekly, daily = tokens.domain_scores(rows, domain, week, now)
        notes.append(f"  {domain}: anomaly: {tokens.anomaly_text(weekly, daily)}")
    return "\n".join([*lines, "", "spend anomalies (modified z-score of weekly and daily totals):", *notes])
