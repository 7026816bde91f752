"""`opgate dashboard` as a person sees it: the site built by the CLI from a ledger, opened in headless Chromium."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from bot.ledger import open_ledger
from bot.mainline.drift import Reference, checks, drift
from bot.mainline.record import MainCommit, ResourceFigure
from bot.mainline.store import History
from bot.models.agent_report import AgentReport
from bot.models.ledger import AcceptanceRow, CaseFigure, UsageRow
from bot.models.report import CaseReport, KernelReport, Machine, Report
from bot.tune.model import RoundEvent, Trial
from bot.tune.space import config_key
from bot.tune.store import TuningStore
from tests import browser

NOW = datetime.now(UTC)
KERNEL = "deepgemm_tile"


def sha(i: int) -> str:
    return f"{i:040x}"


def fill(path: Path, *, tuning: bool = False) -> None:
    """Six main commits of +1% each (the 4th landed PR #14 with an override), a PR review on commit 6, resources,
    ten weeks of deepgemm spend with a spike this week, and one drift check."""
    with open_ledger(str(path)) as ledger:
        store = History(ledger)
        figs = []
        for i in range(1, 7):
            when = (NOW - timedelta(days=30 - i)).isoformat(timespec="seconds")
            c = MainCommit(
                sha=sha(i), base_sha=sha(i - 1), committed_at=when, subject=f"step {i} (#{10 + i})", pr=10 + i
            )
            fig = CaseFigure(
                sha=sha(i), base_sha=sha(i - 1), kernel=KERNEL, domain="deepgemm", case_name="square_512",
                device="cpu", device_name="cpu", p50_ms=1.01**i, base_p50_ms=1.01 ** (i - 1), regression_pct=1.0,
                ci_low_pct=0.6, ci_high_pct=1.4, verdict="fail" if i == 4 else "pass", committed_at=when,
            )  # fmt: skip
            res = ResourceFigure(sha=sha(i), kernel=KERNEL, function="gemm_kernel", registers=90 + 2 * i,
                                 smem_bytes=32768, threads=256, committed_at=when)  # fmt: skip
            store.record(c, [fig], [res])
            figs.append(fig)
        ledger.record_acceptance(
            AcceptanceRow(
                pr=14,
                head_sha="e" * 40,
                login="maint-alice",
                role="maintain",
                kernels=[KERNEL],
                override=True,
                reason="worth it",
                comment_id=1,
            )
        )
        ledger.record_review(
            Report(
                base_sha=sha(6), head_sha="a" * 40, pr=20, verdict="pass",
                kernels=[KernelReport(name=KERNEL, domain="deepgemm", changed=True, verdict="pass", cases=[
                    CaseReport(name="square_512", tolerance=0.01, p50_ms=1.05, base_p50_ms=1.06, regression_pct=-0.9,
                               ci95_pct=[-1.2, -0.6], verdict="pass")])],
                agent=AgentReport(status="offline"), environment=Machine(device="cpu", python="3.11"),
                created_at=NOW.isoformat(timespec="seconds"), opgate_version="0.1.0",
            )
        )  # fmt: skip
        for back in range(9, -1, -1):
            ledger.record_usage(
                UsageRow(
                    task_id="t", model_name="m", prompt_tokens=8000, completion_tokens=1000,
                    total_tokens=90_000 if back == 0 else 9_000, request_id=f"r{back}", domain="deepgemm",
                    key_fingerprint="sha256:x", pr=20, head_sha="a" * 40, status="ok",
                    created_at=(NOW - timedelta(weeks=back)).isoformat(timespec="seconds"),
                )
            )  # fmt: skip
        ref = Reference(label="v0.3", sha=sha(0))
        found = drift(ref, [sha(i) for i in range(1, 7)], figs, {c.sha: c for c in store.commits()})
        store.record_checks(checks(found, NOW.isoformat(timespec="seconds"), {KERNEL: "https://github.example/i/3"}))
        if tuning:
            store = TuningStore(ledger)
            run, _ = store.open_run(kernel=KERNEL, domain="deepgemm", base_sha=sha(6), device_name="cpu",
                                    strategy="agent", max_rounds=6, token_limit=20_000)  # fmt: skip
            config = {"tile_m": 128, "tile_n": 256, "tile_k": 64}
            trial = Trial(key=config_key(config), config=config, source="agent", status="judged", verdict="pass",
                          run_id=run.run_id)  # fmt: skip
            event = RoundEvent(seq=1, round=1, source="agent", outcome="judged", key=trial.key)
            store.record(run.run_id, event, trial, kernel=KERNEL, base_sha=sha(6), device_name="cpu")


@pytest.fixture
def chromium():
    reason = browser.missing_reason()
    if reason:
        pytest.skip(reason)
    with browser.Browser() as b:
        yield b


POINTS = "Array.from(document.querySelectorAll('svg.chart')).map(s => s.querySelectorAll('.pt').length)"


def count(chromium, page, selector: str) -> int:
    return int(chromium.evaluate(page, f"document.querySelectorAll({selector!r}).length"))


def test_every_page_loads_without_errors_and_every_chart_has_data_points(opgate, tmp_path, chromium):
    fill(tmp_path / "ledger.sqlite")
    run = opgate("dashboard", "--out", str(tmp_path / "site"))
    assert run.code == 0, run.stderr
    assert re.search(r"dashboard -> .*index\.html \(4 pages, \d+ KiB\)", run.stdout)
    pages = sorted(p.name for p in (tmp_path / "site").iterdir())
    assert pages == ["index.html", f"kernel-{KERNEL}.html", "tokens.html", "tuning.html"]
    seen = {}
    for name in pages:
        page = chromium.open((tmp_path / "site" / name).as_uri())
        assert page.errors == [], f"{name}: {page.errors}"
        seen[name] = (page, chromium.evaluate(page, POINTS))
        assert all(n > 0 for n in seen[name][1]), f"{name}: a chart without points: {seen[name][1]}"
    assert len(seen["index.html"][1]) == 2  # the kernel's cumulative change and the token overview
    kernel, per_chart = seen[f"kernel-{KERNEL}.html"]
    assert per_chart[:2] == [6, 7]  # cumulative: 6 commits; p50: 6 main points and PR #20's head
    assert count(chromium, kernel, "svg .pt.pr") == 1 and count(chromium, kernel, "svg polygon.band") == 1
    assert count(chromium, kernel, "svg .pt.override") == 1 and count(chromium, kernel, "svg .pt.fail") >= 1
    assert count(chromium, seen["tokens.html"][0], "svg .pt.anomaly") >= 1
    index = (tmp_path / "site" / "index.html").read_text()
    assert "+6.15%" in index and "https://github.example/i/3" in index and "override" in index


def test_the_site_is_one_folder_that_fetches_nothing(opgate, tmp_path):
    fill(tmp_path / "ledger.sqlite")
    assert opgate("dashboard", "--out", str(tmp_path / "site")).code == 0
    for page in (tmp_path / "site").glob("*.html"):
        html = page.read_text()
        assert "<script" not in html and "@import" not in html and "url(" not in html
        for target in re.findall(r'(?:src|href)="([^"]*)"', html):
            assert (
                target.startswith("data:")
                or (tmp_path / "site" / target).is_file()
                or target.startswith(
                    "https://github.example/"  # the drift issue's link is the only way out
                )
            ), f"{page.name} links to {target}"


def test_tuning_runs_show_when_the_ledger_has_a_tuning_table_and_are_absent_otherwise(opgate, tmp_path):
    fill(tmp_path / "ledger.sqlite")
    assert opgate("dashboard", "--out", str(tmp_path / "a")).code == 0
    assert "The table is empty." in (tmp_path / "a" / "tuning.html").read_text()  # migration 5 made it
    fill(tmp_path / "t.sqlite", tuning=True)
    run = opgate("dashboard", "--out", str(tmp_path / "b"), env={"OPGATE_DATABASE_URL": str(tmp_path / "t.sqlite")})
    assert run.code == 0, run.stderr
    html = (tmp_path / "b" / "tuning.html").read_text()
    assert (
        "<code>tuning_trials</code>" in html
        and "<td>{&#34;tile_m&#34;: 128, &#34;tile_n&#34;: 256, &#34;tile_k&#34;: 64}</td>" in html
    )


def test_an_empty_ledger_builds_a_site_that_says_what_is_missing(opgate, tmp_path, chromium):
    run = opgate("dashboard", "--out", str(tmp_path / "site"))
    assert run.code == 0, run.stderr
    page = chromium.open((tmp_path / "site" / "index.html").as_uri())
    assert page.errors == []
    text = chromium.evaluate(page, "document.body.innerText")
    assert "No main commit recorded yet" in text and "Drift has not been checked yet" in text


def test_ledger_text_is_escaped_in_the_pages(opgate, tmp_path):
    fill(tmp_path / "ledger.sqlite")
    with open_ledger(str(tmp_path / "ledger.sqlite")) as ledger:
        c = MainCommit(
            sha=sha(9), base_sha=sha(6), committed_at=NOW.isoformat(), subject="<img src=x onerror=alert(1)>"
        )
        History(ledger).record(c, [], [])
    assert opgate("dashboard", "--out", str(tmp_path / "site")).code == 0
    html = (tmp_path / "site" / "index.html").read_text()
    assert "<img src=x" not in html and "&lt;img src=x onerror=alert(1)&gt;" in html
