"""`opgate summary`: the weekly token summary, written to reports/ and optionally filed as an issue."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bot.commands import Commands
from bot.config.settings import Settings
from bot.edges import publish
from bot.errors import InputError
from bot.ledger import open_ledger
from bot.mainline.drift import DriftCheck
from bot.mainline.store import History
from bot.models.output import Issue, PayoffLine, SummaryOutput
from bot.present.render import render
from bot.spend import budget, payoff, tokens
from bot.text.redact import redact
from bot.text.safe import Safe, one_line

TOKEN_SUMMARY_MARKER = Safe("<!-- opgate:token-summary -->")  # printed as is in the comment-safe template
LABEL = "opgate-tokens"
# Rows read: the chart's weeks and the anomaly history, with a week to spare.
HISTORY = timedelta(weeks=max(tokens.HISTORY_WEEKS, tokens.CHART_WEEKS) + 1)


def register(commands: Commands) -> None:
    p = commands.add(
        "summary",
        help="the weekly token summary (and its issue)",
        description="Per domain for one ISO week: requests, average input and output, total, budget, % used, "
        "spend anomaly and local action, with the last 8 weeks as a chart.",
    )
    p.add_argument("--week", help="ISO week YYYY-Www (default: the current week)")
    p.add_argument("--out-dir", type=Path, default=Path("reports"), help="where summary-YYYY-Www.md goes")
    p.add_argument("--post", action="store_true", help="create or edit the issue 'opgate token summary — WEEK'")


def title(week: str) -> str:
    return f"opgate token summary — {week}"


def render_token_summary(
    summary: tokens.WeeklySummary,
    drift: list[DriftCheck] | None = None,
    payoffs: list[payoff.DomainPayoff] | None = None,
) -> str:
    """The summary issue; `drift` is the latest `opgate history drift` run (its flagged cases are listed), `payoffs`
    what the agent's spend bought per domain (expectations held, proposals passed, the stop rule)."""
    checks = drift or []
    return render(
        "summary.md.j2",
        marker=TOKEN_SUMMARY_MARKER,
        s=summary,
        payoffs=payoffs or [],
        drift=[c for c in checks if c.flagged],
        drift_run=checks[0] if checks else None,
    )


def run(args: argparse.Namespace, settings: Settings) -> int:
    now = datetime.now(UTC)
    week = args.week or budget.iso_week(now)
    try:
        budget.week_start(week)
    except ValueError as exc:
        raise InputError(f"--week {week!r}: expected an ISO week such as {budget.iso_week(now)}") from exc
    if args.post and not (settings.github_token and settings.github_repository):
        raise InputError("--post needs GITHUB_TOKEN and GITHUB_REPOSITORY")
    ledger = open_ledger(settings.database_url, create=settings.create_ledger)
    try:
        since = (budget.week_start(week) - HISTORY).isoformat(timespec="seconds")
        summary = tokens.weekly_summary(
            ledger.usage(since=since),
            settings.budget_weekly.model_dump(),
            week,
            verdicts=ledger.verdicts(since=since),
            now=now,
            labels=settings.labels(),
        )
        payoffs = payoff.payoff(
            ledger.expectations(since=since),
            ledger.proposals(since=since),
            {d.domain: d.total for d in summary.domains},
            settings.budget_weekly.model_dump(),
            week,
            tokens.weeks_before(week, 1)[0],
            labels=settings.labels(),
        )
        drift = History(ledger).latest_checks()
    finally:
        ledger.close()
    body = render_token_summary(summary, drift, payoffs)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    path = args.out_dir / f"summary-{week}.md"
    path.write_text(redact(body))
    flagged = [c for c in drift if c.flagged]
    lines = [f"opgate: token summary {week} -> {path}"]
    lines += [f"opgate: spend anomaly in {one_line(d.domain)}: {one_line(d.anomaly_text)}" for d in summary.anomalies]
    lines += [
        f"opgate: {one_line(p.domain)}: over budget, pass rate not improving: {payoff.STOP_TEXT}"
        for p in payoffs
        if p.stop
    ]
    lines += [
        f"opgate: drift: {one_line(c.kernel)} {c.drift_pct:+.1f}% on {one_line(c.case_name)} since "
        f"{one_line(c.reference_label)}"
        for c in flagged
    ]
    issue = None
    if args.post:
        assert settings.github_token is not None and settings.github_repository is not None
        with publish.open_edge(settings) as gh:  # its own login, pacing and rate-limit rules
            issue = gh.upsert_issue(title(week), body, [LABEL])
        verb = "opened" if issue.created else ("edited" if issue.updated else "unchanged")
        lines.append(f"opgate: issue #{issue.number} {verb}: {issue.url}")
    if args.json:
        out = SummaryOutput(
            week=week,
            path=str(path),
            domains=[d.model_dump(mode="json", exclude={"weekly", "daily"}) for d in summary.domains],
            anomalies=[d.domain for d in summary.anomalies],
            payoff=[
                PayoffLine(
                    domain=p.domain,
                    expectations_inside=p.expectations.rate,
                    pass_rate=p.passes.rate,
                    pass_rate_before=p.passes_before.rate,
                    stop=p.stop,
                )
                for p in payoffs
            ],
            drift=[c.model_dump(mode="json") for c in flagged],
            issue=None if issue is None else Issue(number=issue.number, url=issue.url),
        )
        print(out.text())
    else:
        print("\n".join(lines))
    return 0
