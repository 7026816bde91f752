"""The CI summary's prompt size: tokens (cl100k_base, opgate's offline estimate) for real and example reports.

For each report that needs a summary: the prompt with every fact, the prompt as sent (shortened to the ci_summary
domain's per-request budget), the level it was shortened to, and the users' average CI-summary input (6,000).

    .venv/bin/python benchmarks/ci_summary_prompt.py [--report reports/latest/report.json ...]

Without --report it prints the example reports of tests/comment_reports.py (the biggest realistic one included).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bot.agent import ci_summary as agent_summary  # noqa: E402
from bot.agent import estimate  # noqa: E402
from bot.config.repo import CI_SUMMARY_DOMAIN, load_config  # noqa: E402
from bot.config.task import load_task  # noqa: E402
from bot.models.report import Report  # noqa: E402
from bot.review import ci_summary as summary  # noqa: E402

USERS_AVERAGE = 6_000  # the users' token table: CI summary, average input per request


def sizes(report: Report, budget: int) -> tuple[int, int, str] | None:
    """Whole prompt, prompt as sent and what was shortened; None when the review needs no summary."""
    if not summary.needs_ci_summary(report):
        return None
    config = load_config(ROOT)
    path = config.task_path(CI_SUMMARY_DOMAIN)
    assert path is not None, "pyproject.toml names the ci_summary task file"
    task = load_task(path)
    facts = summary.facts(report)
    whole = estimate.count_messages(agent_summary.messages(task, facts, []))
    sent = agent_summary.trim(task, facts, budget, [])
    return whole, sent.tokens, "; ".join(sent.facts.left_out) or "nothing"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--report", type=Path, action="append", default=[], help="a report.json (repeatable)")
    args = parser.parse_args()
    budget = load_config(ROOT).domains[CI_SUMMARY_DOMAIN].request_budget
    reports: dict[str, Callable[[], Report]] = {}
    for path in args.report:
        reports[str(path)] = lambda path=path: Report.model_validate_json(path.read_text())
    if not args.report:
        sys.path.insert(0, str(ROOT / "tests"))
        from tests.comment_reports import REPORTS

        reports = {f"example {name}": make for name, make in REPORTS.items()}
    print(f"per-request budget {budget:,} tokens; the users' average CI-summary input {USERS_AVERAGE:,}")
    print(f"{'report':<40} {'kernels':>7} {'whole':>8} {'sent':>8} {'of 6,000':>9}  shortened")
    for name, make in reports.items():
        report = make()
        got = sizes(report, budget)
        changed = sum(1 for k in report.kernels if k.changed)
        if got is None:
            dash = "—"
            print(
                f"{name:<40} {changed:>7} {dash:>8} {dash:>8} {dash:>9}  none: no kernel failed or changed a resource"
            )
            continue
        whole, sent, cut = got
        print(f"{name:<40} {changed:>7} {whole:>8,} {sent:>8,} {sent / USERS_AVERAGE:>9.0%}  {cut}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
