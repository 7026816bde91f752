"""`opgate ledger`: read the token ledger (export as CSV, this week's budget per domain)."""

from __future__ import annotations

import argparse
import csv
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bot.commands import Commands
from bot.config.settings import Settings
from bot.ledger import Ledger, open_ledger
from bot.models.ledger import UsageRow
from bot.models.output import BudgetOutput, ExportOutput
from bot.spend import budget, tokens


def register(commands: Commands) -> None:
    led = commands.add("ledger", help="the token ledger", description="Read the ledger.")
    actions = commands.nested(led, "ledger", dest="ledger_command", metavar="ACTION")
    exp = actions.add(
        "export",
        help="export agent usage rows as CSV",
        description="Write operator_agent_usage to a CSV file (rewritten whole).",
    )
    exp.add_argument("--csv", type=Path, required=True, help="output file, e.g. reports/token_usage.csv")
    actions.add(
        "budget",
        help="this week's token budget per domain",
        description="Per domain, this ISO week: tokens used, reserved and left, and the spend-anomaly line.",
    )


def run(args: argparse.Namespace, settings: Settings) -> int:
    ledger = open_ledger(settings.database_url, create=settings.create_ledger)
    try:
        if args.ledger_command == "budget":
            now = datetime.now(UTC)
            if args.json:
                print(BudgetOutput.model_validate(budget_data(ledger, settings, now)).text())
            else:
                print(budget_text(ledger, settings, now))
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
    if args.json:
        print(ExportOutput(rows=len(rows), csv=str(args.csv)).text())
    else:
        print(f"opgate: {len(rows)} usage rows -> {args.csv}")
    return 0


def budget_data(ledger: Ledger, settings: Settings, now: datetime) -> dict[str, object]:
    """This week's budget state and anomaly line of every configured domain."""
    week = budget.iso_week(now)
    rows = ledger.usage()
    domains = []
    for domain in settings.domains:
        state = budget.state(ledger, domain=domain, limit=settings.budget_weekly.get(domain), now=now)
        weekly, daily = tokens.domain_scores(rows, domain, week, now)
        domains.append(
            {
                "domain": domain,
                "used": state.used,
                "reserved": state.reserved,
                "left": state.left,
                "budget": state.limit,
                "pct_used": round(state.pct_used, 1),
                "anomaly": tokens.anomaly_text(weekly, daily),
                "flagged": any(s.status == "flagged" for s in [weekly, *daily]),
            }
        )
    return {"week": week, "ledger": ledger.db.where, "domains": domains}


def budget_text(ledger: Ledger, settings: Settings, now: datetime) -> str:
    """The `ledger budget` table: one line per domain, then its anomaly line."""
    data = budget_data(ledger, settings, now)
    lines = [
        f"opgate token budget, week {data['week']} (ledger {data['ledger']})",
        f"{'domain':<15} {'used':>10} {'reserved':>10} {'left':>10} {'budget':>10} {'used %':>7}",
    ]
    notes = []
    domains: list[dict[str, Any]] = data["domains"]  # type: ignore[assignment]
    for d in domains:
        lines.append(
            f"{d['domain']:<15} {d['used']:>10,} {d['reserved']:>10,} {d['left']:>10,} {d['budget']:>10,} "
            f"{d['pct_used']:>6.1f}%"
        )
        notes.append(f"  {d['domain']}: anomaly: {d['anomaly']}")
    if not domains:
        lines.append("(no domain configured: add [tool.opgate.domains.NAME] to pyproject.toml or opgate.toml)")
    return "\n".join([*lines, "", "spend anomalies (modified z-score of weekly and daily totals):", *notes])
