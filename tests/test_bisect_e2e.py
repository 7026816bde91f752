"""Done when: on a scratch main of 16 commits (benchmarks/scratch.py `bisect_repo`: commit 11 makes square_512 slower,
commit 5 changes only a comment, commit 8 does not build), `opgate history drift --post` bisects the drifting case
and its issue on the local GitHub server names commit 11, its Δ and the command that reproduces it; at 8 % the
bisection names commit 11 or says why it could not decide, never another commit.

Real builds (the session's build cache: deepgemm_tile's binding is compiled once), real judge runs of one case.
"""

from __future__ import annotations

import json
import math
import shlex

import pytest

from benchmarks.scratch import BROKEN, CALL, COMMENT_ONLY, KERNEL_COMMITS, SLOW_CASE, SLOWER, bisect_repo
from bot.mainline.bisect import BisectReport
from tests.github_server import FakeGitHub
from tests.premise import BODY, planted

pytestmark = pytest.mark.slow

REPO = "octo-org/kernels"
TOKEN = "ghs_bisectE2eToken0123456789abcdefgh"
# Five processes per side from the first measurement: on a 2-core runner a good probe's interval then lies below the
# split (about +40 % for a 2x change) at an early look of its one sequential measurement (4x the review's caps).
QUICK = {"OPGATE_MEASURE_MIN_PROCESSES": "5"}


def test_drift_post_bisects_the_drifting_case_and_the_issue_names_commit_11_and_its_command(opgate, tmp_path):
    planted(BODY.replace(CALL, SLOWER["2x"]), SLOW_CASE, above=40.0)  # the split a good probe must lie below
    repo = tmp_path / "repo"
    shas = bisect_repo(repo, "2x")
    main = tmp_path / "main"
    # main-record.yml by hand: one push of all fifteen commits, judged against the one before, recorded.
    review = opgate("review", "--repo", str(repo), "--base", shas[0], "--head", shas[15], "--offline",
                    "--out", str(main), env=QUICK)  # fmt: skip
    assert review.code in (0, 1), review.stderr
    assert opgate("history", "record", "--report", str(main / "report.json"), "--repo", str(repo)).code == 0

    reports = tmp_path / "reports"
    with FakeGitHub(TOKEN) as gh:
        gh.add_repo(REPO)
        env = {"GITHUB_TOKEN": TOKEN, "GITHUB_REPOSITORY": REPO, "GITHUB_API_URL": gh.base_url, **QUICK}
        env["OPGATE_GITHUB_LOGIN"] = gh.bot_login  # who the fake's installation token posts as
        # the limit keeps the untouched ragged case (noise only) out of the issue: one bisection, not two
        args = ("history", "drift", "--repo", str(repo), "--reference", shas[0], "--limit", "40",
                "--out-dir", str(reports), "--post")  # fmt: skip
        drift = opgate(*args, env=env)
        assert drift.code == 0, drift.stdout + drift.stderr
        assert "15 commit(s) on main's first-parent line, 8 touch the kernel (7 skipped unbuilt)" in drift.stdout
        result = BisectReport.model_validate_json((reports / "bisect" / f"deepgemm_tile-{SLOW_CASE}" / "bisect.json")
                                                  .read_text())  # fmt: skip
        assert result.verdict == "fail", result.model_dump_json(indent=1)
        assert result.first_bad is not None and result.first_bad.sha == shas[11]
        assert len(result.probes) <= math.ceil(math.log2(16)) + 2
        assert {p.sha for p in result.probes} <= {shas[i] for i in KERNEL_COMMITS}  # README commits: never built
        assert [(s.sha, "does not build" in s.why) for s in result.skipped] == [(shas[BROKEN], True)]
        assert all(p.side == "good" for p in result.probes if p.sha == shas[COMMENT_ONLY])
        print(f"bisection: {len(result.probes)} probes, {result.measurements} measurements, {result.seconds:.0f} s")

        (issue,) = [i for i in gh.issues(REPO) if i["title"] == "opgate drift: deepgemm_tile"]
        body = issue["body"]
        assert f"[`{shas[11][:12]}`](https://github.com/{REPO}/commit/{shas[11]})" in body
        assert "kernel: recompute the aligned tiles — p50 +" in body
        assert f"Reproduce: `{result.reproduce}`" in body and f"--bad {shas[11]}" in result.reproduce
        assert TOKEN not in drift.stdout + drift.stderr

        again = opgate(*args, env=env)  # the ledger holds the bisection of this range: nothing is probed again
        assert again.code == 0 and "opgate: probe" not in again.stdout and "unchanged" in again.stdout

    # The issue's command, run as a kernel engineer would: the two builds and the case, one probe.
    command = shlex.split(result.reproduce)
    assert command[:3] == ["opgate", "history", "bisect"]
    out = tmp_path / "repro"
    repro = opgate(*command[1:], "--repo", str(repo), "--out", str(out), "--json", env=QUICK)
    data = json.loads(repro.stdout)
    assert (repro.code, data["verdict"], data["first_bad"], data["probes"]) == (0, "fail", shas[11], 1), data


def test_an_8_percent_slowdown_is_named_or_left_undecided_with_the_reason_never_blamed_elsewhere(opgate, tmp_path):
    planted(BODY.replace(CALL, SLOWER["8pct"]), SLOW_CASE, above=3.0)  # a slowdown beyond the gate's limit
    repo = tmp_path / "repo"
    shas = bisect_repo(repo, "8pct")
    out = tmp_path / "bisect"
    run = opgate("history", "bisect", "--repo", str(repo), "--kernel", "deepgemm_tile", "--case", SLOW_CASE,
                 "--good", shas[0], "--bad", shas[15], "--budget", "2", "--out", str(out))  # fmt: skip
    result = BisectReport.model_validate_json((out / "bisect.json").read_text())
    print(f"8 %: {result.verdict}, {len(result.probes)} probes, {result.measurements} measurements, "
          f"{result.seconds:.0f} s; {result.undecided}")  # fmt: skip
    assert result.verdict in ("fail", "undecided"), result.model_dump_json(indent=1)
    if result.verdict == "fail":
        assert run.code == 0 and result.first_bad is not None and result.first_bad.sha == shas[11]
        return
    assert run.code == 1 and "undecided" in run.stdout
    assert shas[11] in result.suspects  # the first bad commit is still in the range it leaves
    assert result.undecided and all(line.strip() for line in result.undecided)
    reasons = " ".join(result.undecided)
    assert any(w in reasons for w in ("straddles", "inconclusive", "time budget", "measurement")), reasons
    assert result.reproduce.startswith("opgate history bisect --kernel deepgemm_tile --case square_512 --good ")
    assert "❔ **Undecided**" in (out / "bisect.md").read_text()
