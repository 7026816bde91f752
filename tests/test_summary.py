"""`opgate summary` and `opgate ledger budget` as a user runs them: the CLI in a child process, a real
ledger, and the issue filed on the local GitHub server (created once, then edited, never duplicated)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from bot.ledger import Ledger
from bot.models.ledger import UsageRow
from bot.spend.budget import iso_week
from tests.github_server import FakeGitHub

REPO = "octo-org/kernels"
TOKEN = "ghs_summaryTestToken0123456789abcdef"
NOW = datetime.now(UTC)
WEEK = iso_week(NOW)


def seed(path, *, spike: bool = False) -> None:
    """Nine steady weeks of deepgemm spend (and a flashmla spike in the current week, when asked)."""
    with Ledger(path) as ledger:
        n = 0
        for back in range(9, -1, -1):
            for domain, tokens in (("deepgemm", 9_000), ("flashmla", 9_000 if not (spike and back == 0) else 90_000)):
                n += 1
                ledger.record_usage(
                    UsageRow(
                        task_id="t",
                        model_name="deepseek-v4",
                        prompt_tokens=tokens - 1000,
                        completion_tokens=1000,
                        total_tokens=tokens,
                        request_id=f"r{n}",
                        domain=domain,
                        key_fingerprint="sha256:x",
                        pr=3,
                        head_sha="h" * 40,
                        status="ok",
                        created_at=(NOW - timedelta(weeks=back)).isoformat(timespec="seconds"),
                    )
                )


@pytest.fixture
def github():
    with FakeGitHub(TOKEN) as gh:
        gh.add_repo(REPO)
        yield gh


def test_the_summary_is_written_with_the_users_table_and_an_8_week_chart(opgate, tmp_path):
    seed(tmp_path / "ledger.sqlite")
    run = opgate("summary", "--out-dir", str(tmp_path / "reports"))
    assert run.code == 0, run.stderr
    text = (tmp_path / "reports" / f"summary-{WEEK}.md").read_text()
    assert f"## opgate token summary — {WEEK}" in text
    assert "| task | requests | avg input | avg output | total | budget | % used | anomaly | local action |" in text
    assert "| DeepGEMM | 1 | 8,000 | 1,000 | 9,000 | 500,000 | 1.8% |" in text
    assert "```mermaid\nxychart-beta" in text and text.count("    line [") == 4
    assert "line [9000, 9000, 9000, 9000, 9000, 9000, 9000, 9000]" in text
    assert "No spend anomaly" in text


def test_a_spike_is_reported_in_the_summary_and_on_stdout(opgate, tmp_path):
    seed(tmp_path / "ledger.sqlite", spike=True)
    run = opgate("summary", "--out-dir", str(tmp_path / "reports"))
    assert run.code == 0 and "spend anomaly in flashmla" in run.stdout
    text = (tmp_path / "reports" / f"summary-{WEEK}.md").read_text()
    assert "### ⚠️ Spend anomalies" in text and "**FlashMLA**" in text


def test_post_creates_the_issue_once_and_edits_it_afterwards(opgate, tmp_path, github):
    seed(tmp_path / "ledger.sqlite")
    env = {"GITHUB_TOKEN": TOKEN, "GITHUB_REPOSITORY": REPO, "GITHUB_API_URL": github.base_url}
    env["OPGATE_GITHUB_LOGIN"] = github.bot_login  # who the fake's installation token posts as
    first = opgate("summary", "--post", "--out-dir", str(tmp_path / "reports"), env=env)
    assert first.code == 0, first.stderr
    assert "opened" in first.stdout
    Ledger(tmp_path / "ledger.sqlite").record_usage(
        UsageRow(
            task_id="t",
            model_name="m",
            prompt_tokens=1,
            completion_tokens=1,
            total_tokens=2,
            request_id="late",
            domain="ci_summary",
            key_fingerprint="sha256:x",
            pr=None,
            head_sha="h",
            status="ok",
        )
    )
    second = opgate("summary", "--post", "--out-dir", str(tmp_path / "reports"), env=env)
    assert second.code == 0 and "edited" in second.stdout
    issues = [i for i in github.issues(REPO) if i["title"] == f"opgate token summary — {WEEK}"]
    assert len(issues) == 1
    assert "| CI summary | 1 |" in issues[0]["body"] and "<!-- opgate:token-summary -->" in issues[0]["body"]
    assert TOKEN not in first.stdout + first.stderr + second.stdout + second.stderr


@pytest.mark.parametrize(
    ("args", "env", "words"),
    [
        (["--week", "2026-10"], {}, "expected an ISO week"),
        (["--post"], {}, "--post needs GITHUB_TOKEN and GITHUB_REPOSITORY"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(opgate, args, env, words):
    run = opgate("summary", *args, env=env)
    assert run.code == 2 and words in run.stderr and "Traceback" not in run.stderr


def test_ledger_budget_shows_used_reserved_left_and_the_anomaly_line(opgate, tmp_path):
    seed(tmp_path / "ledger.sqlite", spike=True)
    run = opgate("ledger", "budget", env={"OPGATE_BUDGET_WEEKLY_FLASHMLA": "100000"})
    assert run.code == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[0].startswith(f"opgate token budget, week {WEEK}")
    flash = next(line for line in lines if line.startswith("flashmla "))
    assert flash.split() == ["flashmla", "90,000", "0", "10,000", "100,000", "90.0%"]
    assert any(line.strip().startswith("flashmla: anomaly:") and "ANOMALY" in line for line in lines)
    assert any(line.strip() == "v41_attention: anomaly: not enough history (0 of 7 weeks)" for line in lines)
