"""`opgate history record` and `opgate history drift --post` on a scratch git repository and the local GitHub
server; the arithmetic is in test_drift.py and test_record.py, the ledger in test_mainline_store.py."""

from __future__ import annotations

import pytest

from bot.ledger import open_ledger
from bot.mainline.drift import drift
from bot.mainline.store import History
from bot.models.ledger import AcceptanceRow
from tests.conftest import git
from tests.github_server import FakeGitHub
from tests.mainline_world import REF, _report, sha, step
from tests.pg import pg_cluster, pg_url  # noqa: F401  (fixtures)

REPO = "octo-org/kernels"
TOKEN = "ghs_historyTestToken0123456789abcdef"


# ---------------------------------------------------------------------------- pure


# ---------------------------------------------------------------------------- ledger, both databases


# ---------------------------------------------------------------------------- the CLI on a git repository


def _main_repo(tmp_path):
    """main: a tagged release, then three commits touching kernels/deepgemm_tile (the 2nd lands PR #12)."""
    from tests.conftest import make_repo

    repo = make_repo(tmp_path / "repo", ["deepgemm_tile"])
    git(repo.path, "tag", "v0.3")
    shas = []
    for i, subject in enumerate(["tile_k 64", "split the K loop (#12)", "comments"], 1):
        repo.write(f"kernels/deepgemm_tile/notes_{i}.txt", f"{i}\n")
        shas.append(repo.commit(subject))
    return repo, shas


def _write_report(tmp_path, name: str, base: str, head: str, pct: float):
    report = _report().model_copy(update={"base_sha": base, "head_sha": head})
    k = report.kernels[0]
    case = k.cases[0].model_copy(
        update={"regression_pct": pct, "ci95_pct": [pct - 0.5, pct + 0.5], "p50_ms": 1 + pct / 100}
    )
    report.kernels[0] = k.model_copy(update={"cases": [case]})
    path = tmp_path / name
    path.write_text(report.to_json())
    return path


def test_record_then_drift_post_files_one_issue_per_kernel_edits_it_and_closes_it_when_fixed(opgate, tmp_path):
    repo, (c1, c2, c3) = _main_repo(tmp_path)
    ledger = tmp_path / "ledger.sqlite"
    with open_ledger(str(ledger)) as led:
        led.record_acceptance(
            AcceptanceRow(
                pr=12, head_sha="e" * 40, login="maint-alice", role="maintain", kernels=["deepgemm_tile"],
                override=True, reason="the split is worth it", comment_id=77,
            )
        )  # fmt: skip
    for base, head, pct in ((repo.base, c1, 1.0), (c1, c2, 6.0)):
        rec = opgate("history", "record", "--report", str(_write_report(tmp_path, f"{head}.json", base, head, pct)),
                     "--repo", str(repo.path))  # fmt: skip
        assert rec.code == 0, rec.stderr
    assert f"recorded main {c2[:12]} (against {c1[:12]}, PR #12): 1 case figure(s), 1 function(s)" in rec.stdout
    with FakeGitHub(TOKEN) as gh:
        gh.add_repo(REPO)
        env = {"GITHUB_TOKEN": TOKEN, "GITHUB_REPOSITORY": REPO, "GITHUB_API_URL": gh.base_url}
        env["OPGATE_GITHUB_LOGIN"] = gh.bot_login  # who the fake's installation token posts as
        # --no-bisect: these figures are written by hand, no build ran them (tests/test_bisect*.py bisect for real)
        args = ("history", "drift", "--repo", str(repo.path), "--out-dir", str(tmp_path / "reports"), "--post",
                "--no-bisect")  # fmt: skip
        first = opgate(*args, env=env)
        assert first.code == 0, first.stderr
        assert "deepgemm_tile: +7.1% on square_512 (cpu) — DRIFT" in first.stdout
        assert f"{c3[:12]} touched it but main's record has no figures for it" in first.stdout
        (issue,) = [i for i in gh.issues(REPO) if i["title"] == "opgate drift: deepgemm_tile"]
        body = issue["body"]
        assert body.startswith("<!-- opgate:drift -->")
        assert "`deepgemm_tile` is **7.1% slower** than v0.3 on `square_512` since 2026" in body
        assert f"{c2[:12]} split the K loop (#12)" in body and "| #12 |" in body
        assert "by maint-alice (maintain): “the split is worth it”" in body
        assert [label["name"] for label in issue["labels"]] == ["opgate-drift"]

        again = opgate(*args, env=env)  # same figures: the issue is found, not duplicated
        assert "unchanged" in again.stdout
        rec = opgate("history", "record", "--report", str(_write_report(tmp_path, "c3.json", c2, c3, -6.5)),
                     "--repo", str(repo.path))  # fmt: skip
        assert rec.code == 0, rec.stderr
        fixed = opgate(*args, env=env)
        assert fixed.code == 0 and "within the limit" in fixed.stdout and "closed" in fixed.stdout
        (issue,) = [i for i in gh.issues(REPO) if i["title"] == "opgate drift: deepgemm_tile"]
        assert issue["state"] == "closed" and "is back within 5.0% of v0.3" in issue["body"]
        assert TOKEN not in first.stdout + first.stderr + fixed.stdout + fixed.stderr
    summary = opgate("summary", "--out-dir", str(tmp_path / "reports"))
    assert summary.code == 0, summary.stderr
    text = next((tmp_path / "reports").glob("summary-*.md")).read_text()
    assert "### Cumulative drift on main" in text and "No case of main drifted more than 5% from v0.3" in text


def test_the_weekly_summary_lists_a_drifting_case(opgate, tmp_path):
    from bot.mainline.drift import checks

    with open_ledger(str(tmp_path / "ledger.sqlite")) as led:
        (d,) = drift(REF, [sha(1), sha(2)], [step(1, 3.0), step(2, 3.0)], {})
        History(led).record_checks(checks([d], "2026-03-02T00:00:00+00:00", {"deepgemm_tile": "https://gh/i/4"}))
    run = opgate("summary", "--out-dir", str(tmp_path / "reports"))
    assert run.code == 0 and "drift: deepgemm_tile +6.1% on square_512 since v0.3" in run.stdout
    text = next((tmp_path / "reports").glob("summary-*.md")).read_text()
    assert "- `deepgemm_tile` on `square_512`: +6.09% (95% CI" in text and "https://gh/i/4" in text


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["record", "--report", "missing.json"], "cannot read it"),
        (["drift", "--reference", "no-such-tag"], "drift reference 'no-such-tag'"),
        (["drift", "--post"], "--post needs GITHUB_TOKEN and GITHUB_REPOSITORY"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(opgate, tmp_path, args, words):
    repo, _ = _main_repo(tmp_path)
    extra = ["--repo", str(repo.path)]
    run = opgate("history", *args, *extra)
    assert run.code == 2 and words in run.stderr and "Traceback" not in run.stderr


def test_a_pull_request_review_is_not_recorded_as_main(opgate, tmp_path):
    repo, _ = _main_repo(tmp_path)
    path = tmp_path / "pr.json"
    path.write_text(_report(pr=9).to_json())
    run = opgate("history", "record", "--report", str(path), "--repo", str(repo.path))
    assert run.code == 2 and "reviews pull request #9, not a main commit" in run.stderr
