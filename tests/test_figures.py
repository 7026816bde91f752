"""The dashboard's figures from the ledger (bot/mainline/dashboard/figures.py): a kernel's page name, the weeks the
token charts cover, and each domain's tokens per week beside its budget; the pages in a browser are in
test_dashboard.py."""

from __future__ import annotations

from datetime import UTC, datetime

from bot.mainline.dashboard.figures import SiteData, page_name, token_table, token_weeks
from bot.models.ledger import UsageRow

NOW = datetime(2026, 3, 4, 12, tzinfo=UTC)  # a Wednesday of ISO week 2026-W10


def usage(domain: str, tokens: int, when: str) -> UsageRow:
    return UsageRow(task_id="review", model_name="m", prompt_tokens=tokens, completion_tokens=0, total_tokens=tokens,
                    request_id=f"{domain}-{when}-{tokens}", domain=domain, key_fingerprint="f" * 12, pr=7,
                    head_sha="a" * 40, status="ok", created_at=when)  # fmt: skip


def test_a_kernels_page_name_keeps_only_safe_characters():
    assert page_name("deepgemm_tile") == "kernel-deepgemm_tile.html"
    assert page_name("../flash mla/<x>") == "kernel-.._flash_mla__x_.html"


def test_the_token_weeks_are_the_last_eight_at_least_and_reach_back_to_the_first_spend():
    quiet = token_weeks(SiteData(generated_at=NOW))
    assert len(quiet) == 8 and quiet[-1] == "2026-W10" and quiet[0] == "2026-W03"
    spent = token_weeks(SiteData(generated_at=NOW, usage=[usage("deepgemm", 10, "2025-12-01T10:00:00+00:00")]))
    assert spent[0] == "2025-W49" and spent[-1] == "2026-W10" and len(spent) == 14


def test_each_domain_gets_its_tokens_per_week_and_its_weekly_budget():
    rows = [usage("deepgemm", 100, "2026-03-02T09:00:00"), usage("deepgemm", 50, "2026-03-03T09:00:00+00:00"),
            usage("flashmla", 7, "2026-02-24T09:00:00+00:00")]  # fmt: skip
    data = SiteData(generated_at=NOW, usage=rows, budgets={"deepgemm": 1000, "flashmla": 500})
    table = token_table(data)
    assert sorted(table) == ["deepgemm", "flashmla"]
    this_week = {d: cells[-1] for d, cells in table.items()}
    assert (this_week["deepgemm"].week, this_week["deepgemm"].tokens, this_week["deepgemm"].budget) == (
        "2026-W10",
        150,
        1000,
    )
    assert this_week["flashmla"].tokens == 0 and table["flashmla"][-2].tokens == 7
