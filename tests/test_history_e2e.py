"""Done when: real reviews and main commits in a scratch repository give the drift issue on the local GitHub server
and a dashboard whose pages load in headless Chromium.

Two kernel builds (base, and a head that runs the GEMM twice), shared through the session's build cache.
OPGATE_DASHBOARD_SCREENSHOT=PATH also saves the main page as PNG (scripts/dashboard_screenshot.sh).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from bot.ledger import open_ledger
from bot.models.ledger import AcceptanceRow
from tests import browser
from tests.conftest import git, make_repo
from tests.gateway import completion
from tests.github_server import FakeGitHub
from tests.premise import BODY, SHAPES, planted

pytestmark = pytest.mark.slow

REPO = "octo-org/kernels"
TOKEN = "ghs_historyE2eToken0123456789abcdef"
KEY = "sk-canary-history-0123456789abcdef"
GEMM = "kernels/deepgemm_tile/gemm_cpu.cpp"
CALL = "  gemm_tiled<TILE_M, TILE_N, TILE_K>(a, b, c, m, n, k);\n"
AGENT_REPLY = {"candidate_patch": None, "risk_notes": ["runs the tile loop twice"], "local_commands": [],
               "expected_metrics": {}}  # fmt: skip


def test_reviews_and_main_commits_give_the_drift_issue_and_a_dashboard_that_loads(opgate, tmp_path, httpserver):
    for case in SHAPES:  # PR #11's premise: both cases decisively slower (the test asserts > +20 %)
        planted(BODY.replace(CALL, CALL + CALL), case, above=20.0)
    repo = make_repo(tmp_path / "repo", ["deepgemm_tile"])
    git(repo.path, "tag", "v0.1")
    httpserver.expect_request("/v1/chat/completions", method="POST").respond_with_json(
        completion(json.dumps(AGENT_REPLY))
    )

    # PR #11: the GEMM runs twice (correct, about twice as slow). Reviewed with the agent asked.
    git(repo.path, "checkout", "-q", "-b", "pr-11")
    repo.edit(GEMM, CALL, CALL + CALL)
    pr_head = repo.commit("run the tile loop twice")
    env = {"TAOTOKEN_API_KEY_DEEPGEMM_AGENT": KEY, "TAOTOKEN_BASE_URL": httpserver.url_for("/").rstrip("/")}
    pr = opgate("review", "--repo", str(repo.path), "--base", repo.base, "--head", pr_head, "--pr", "11", env=env)
    assert pr.code == 1, pr.stdout + pr.stderr
    cases = [c for c in pr.kernel("deepgemm_tile")["cases"] if c["device"] == "cpu"]
    assert any(c["verdict"] == "fail" for c in cases) and max(c["regression_pct"] for c in cases) > 20

    # A maintainer overrides it; it lands on main as a squash commit.
    with open_ledger(str(tmp_path / "ledger.sqlite")) as ledger:
        ledger.record_acceptance(
            AcceptanceRow(
                pr=11,
                head_sha=pr_head,
                login="maint-alice",
                role="maintain",
                kernels=["deepgemm_tile"],
                override=True,
                reason="simpler code, speed later",
                comment_id=4242,
            )
        )
    git(repo.path, "checkout", "-q", "main")
    git(repo.path, "merge", "-q", "--squash", "pr-11")
    c1 = repo.commit("run the tile loop twice (#11)")
    repo.write("README.md", "docs only\n")
    c2 = repo.commit("docs (#12)")

    # main-record.yml, by hand: each main commit judged against the previous one, then recorded.
    for base, head in ((repo.base, c1), (c1, c2)):
        out = tmp_path / f"main-{head[:7]}"
        review = opgate("review", "--repo", str(repo.path), "--base", base, "--head", head, "--offline",
                        "--out", str(out))  # fmt: skip
        assert review.code in (0, 1), review.stderr
        record = opgate("history", "record", "--report", str(out / "report.json"), "--repo", str(repo.path))
        assert record.code == 0, record.stderr
    assert "no kernel changed" in record.stdout

    with FakeGitHub(TOKEN) as gh:
        gh.add_repo(REPO)
        github = {"GITHUB_TOKEN": TOKEN, "GITHUB_REPOSITORY": REPO, "GITHUB_API_URL": gh.base_url}
        github["OPGATE_GITHUB_LOGIN"] = gh.bot_login  # who the fake's installation token posts as
        # --no-bisect: tests/test_bisect_e2e.py bisects; this test keeps to the record, the issue and the dashboard
        drift = opgate("history", "drift", "--repo", str(repo.path), "--out-dir", str(tmp_path / "reports"),
                       "--post", "--no-bisect", env=github)  # fmt: skip
        assert drift.code == 0, drift.stderr
        assert "drift since v0.1" in drift.stdout and "— DRIFT" in drift.stdout
        (issue,) = [i for i in gh.issues(REPO) if i["title"] == "opgate drift: deepgemm_tile"]
    body = issue["body"]
    assert "`deepgemm_tile` is **" in body and "slower** than v0.1 on `" in body
    assert f"{c1[:12]} run the tile loop twice (#11)" in body and "| #11 |" in body
    assert "`/accept --override` by maint-alice (maintain): “simpler code, speed later”" in body
    assert KEY not in body and TOKEN not in drift.stdout + drift.stderr

    site = tmp_path / "site"
    built = opgate("dashboard", "--out", str(site))
    assert built.code == 0, built.stderr
    size = sum(p.stat().st_size for p in site.iterdir())
    print(f"dashboard: {len(list(site.iterdir()))} pages, {size} bytes")  # the closing note reports it

    reason = browser.missing_reason()
    if reason:
        pytest.skip(reason)
    with browser.Browser(width=1200, height=1000) as chromium:
        for page_file in sorted(site.glob("*.html")):
            page = chromium.open(page_file.as_uri())
            assert page.errors == [], f"{page_file.name}: {page.errors}"
            points = chromium.evaluate(
                page, "Array.from(document.querySelectorAll('svg.chart')).map(s => s.querySelectorAll('.pt').length)"
            )
            assert all(n > 0 for n in points), f"{page_file.name}: {points}"
            if page_file.name == "kernel-deepgemm_tile.html":
                assert chromium.evaluate(page, "document.querySelectorAll('svg .pt.pr').length") >= 1
                assert chromium.evaluate(page, "document.querySelectorAll('svg .pt.override').length") >= 1
            if page_file.name == "tokens.html":
                text = chromium.evaluate(page, "document.body.innerText")
                assert "1,555" in text  # the agent's one answered request: 1,234 + 321 tokens
        if target := os.environ.get("OPGATE_DASHBOARD_SCREENSHOT"):
            chromium.screenshot(chromium.open((site / "index.html").as_uri()), Path(target))
