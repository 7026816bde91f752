"""`opgate review`: build, run and gate the kernels a change touches."""

from __future__ import annotations

import argparse
from pathlib import Path

from bot.errors import InputError
from bot.events import load_pull_request_event
from bot.ledger import open_ledger
from bot.review import Reviewer, ReviewRequest
from bot.settings import Settings


def register(sub: argparse._SubParsersAction) -> None:
    r = sub.add_parser(
        "review",
        help="build, run and gate the kernels a change touches",
        description="Review base...head: static checks, agent, build, run, gate, report.",
    )
    r.add_argument("--base", help="base revision (default: the event's base SHA)")
    r.add_argument("--head", help="head revision (default: the event's head SHA)")
    r.add_argument("--repo", type=Path, default=Path("."), help="git repository (default: .)")
    r.add_argument("--out", type=Path, default=Path("reports/latest"), help="report folder (default: reports/latest)")
    r.add_argument("--offline", action="store_true", help="do not ask the agent, even if a key is set")
    r.add_argument("--event", type=Path, help="a pull_request event file ($GITHUB_EVENT_PATH)")
    r.add_argument("--kernel", dest="only_kernel", help="review only this kernel")


def run(args: argparse.Namespace, settings: Settings) -> int:
    base, head, pr = args.base, args.head, None
    if args.event is not None:
        event = load_pull_request_event(args.event)
        base, head, pr = base or event.base_sha, head or event.head_sha, event.number
    if not base or not head:
        raise InputError("review needs --base and --head (or --event with a pull_request event)")
    request = ReviewRequest(
        repo=args.repo, base=base, head=head, out=args.out, offline=args.offline, pr=pr, only_kernel=args.only_kernel
    )
    ledger = open_ledger(settings.database_url)
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
