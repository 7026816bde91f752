"""`opgate dashboard`: build the static history site (one folder, no network) from the ledger."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from pathlib import Path

from bot.commands import Commands
from bot.config.settings import Settings
from bot.ledger import open_ledger
from bot.mainline.dashboard import site
from bot.mainline.dashboard.figures import TUNING_TABLES, SiteData
from bot.mainline.store import History
from bot.models.output import DashboardOutput


def register(commands: Commands) -> None:
    p = commands.add(
        "dashboard",
        help="build the static history site from the ledger",
        description="Write a self-contained site (HTML with inline SVG charts: no script, no CDN, works offline) "
        "from the ledger: main's p50 per kernel and case over commits with CI bands, each pull request's base and "
        "head, verdicts and overrides; registers, shared memory and occupancy; token spend per domain per week "
        "against the budget with anomalies; tuning runs when the ledger has them.",
    )
    p.add_argument("--out", type=Path, required=True, help="the site's folder (created; its pages are rewritten)")


def collect(ledger_url: str, settings: Settings, now: datetime) -> tuple[SiteData, str]:
    """Read everything the site shows from the ledger, once; returns the data and where it came from."""
    with open_ledger(ledger_url, create=settings.create_ledger) as ledger:
        store = History(ledger)
        tuning = next((t for t in TUNING_TABLES if store.has_table(t)), None)
        data = SiteData(
            generated_at=now,
            commits=store.commits(),
            figures=store.figures(),
            resources=store.resources(),
            reviews=store.pull_request_reviews(),
            acceptances=store.acceptances(),
            usage=ledger.usage(),
            budgets=settings.budget_weekly.model_dump(),
            labels=settings.labels(),
            checks=store.latest_checks(),
            limit_pct=settings.drift_limit_pct,
            tuning_table=tuning,
            tuning_rows=store.table_rows(tuning) if tuning else [],
        )
        return data, ledger.db.where


def run(args: argparse.Namespace, settings: Settings) -> int:
    data, where = collect(settings.database_url, settings, datetime.now(UTC))
    sizes = site.write(data, args.out, where)
    total = sum(sizes.values())
    if args.json:
        print(DashboardOutput(index=str(args.out / "index.html"), pages=sorted(sizes), bytes=total).text())
    else:
        print(f"opgate: dashboard -> {args.out / 'index.html'} ({len(sizes)} pages, {total / 1024:.0f} KiB)")
    return 0
