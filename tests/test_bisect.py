"""`opgate history bisect` without building anything: the search and its probe count, a probe's side from the
review's case verdict, the split, the range a drifting case gives, bisect.md, the ledger, and the CLI's bad input,
the bisection plan and the parts `opgate history drift --post --bisections` reads.

The bisections that build and measure real commits are in tests/test_bisect_e2e.py."""

from __future__ import annotations

import json
import math

import pytest

from benchmarks.scratch import BROKEN, KERNEL_COMMITS
from bot.commands.bisect import render_md
from bot.ledger import open_ledger
from bot.mainline import bisect
from bot.mainline.bisect import BisectReport, BisectStep, Search, Skipped, side, split_pct
from bot.mainline.drift import drift
from bot.mainline.store import History
from bot.models.judging import MeasureSettings
from bot.models.report import Build, CaseReport, CaseStatus, KernelReport
from bot.present.render import commit_url
from bot.verdict.compile_errors import build_errors
from tests.conftest import git
from tests.github_server import FakeGitHub
from tests.hostile import problems
from tests.mainline_world import REF, sha, step
from tests.pg import pg_cluster, pg_url  # noqa: F401  (fixtures)
from tests.test_history import TOKEN, _main_repo, _write_report

REPO = "octo-org/kernels"


def walk(n: int, side_of) -> tuple[Search, list[int]]:
    """Run the search to its end with an oracle: index -> side."""
    search, probed = Search(n), []
    while (i := search.next()) is not None:
        probed.append(i)
        found = side_of(i)
        search.record(i, found)
        if len(probed) == 1 and found != "bad":
            break
    return search, probed


# ---------------------------------------------------------------------------- the search


def test_sixteen_commits_name_commit_11_within_log2_16_plus_2_probes_and_skip_the_one_that_does_not_build():
    cands = list(KERNEL_COMMITS)  # main's commits that touch the kernel; 2, 4, 6, 7, 10, 13, 14 do not
    oracle = {c: "skipped" if c == BROKEN else ("bad" if c >= 11 else "good") for c in cands}
    search, probed = walk(len(cands), lambda i: oracle[cands[i]])
    assert search.suspects() == [cands.index(11)]
    assert len(probed) <= math.ceil(math.log2(16)) + 2
    assert [cands[i] for i in probed] == [15, BROKEN, 5, 9, 11]  # the bad end first; 8 skipped, a neighbour instead


@pytest.mark.parametrize("n", range(1, 18))
def test_every_first_bad_commit_is_found_within_log2_n_plus_1_probes(n):
    for first_bad in range(n):
        search, probed = walk(n, lambda i, f=first_bad: "bad" if i >= f else "good")
        assert search.suspects() == [first_bad]
        assert len(probed) <= (math.ceil(math.log2(n)) + 1 if n > 1 else 1)


def test_commits_that_cannot_be_judged_next_to_the_first_bad_one_leave_it_ambiguous():
    search, _ = walk(6, lambda i: "skipped" if i in (2, 3) else ("bad" if i >= 3 else "good"))
    assert search.suspects() == [2, 3, 4]  # 2 and 3 not judged: the first bad is one of them or 4


def test_the_plan_is_log2_candidates_plus_the_bad_end():
    p = bisect.plan(15, 8, budget_s=1200)
    assert (p.max_probes, p.untouched, p.longer) == (4, 7, bisect.LONGER)
    text = bisect.plan_text(p, "deepgemm_tile", "square_512", "a" * 40, "b" * 40)
    assert "15 commit(s)" in text and "8 touch the kernel (7 skipped unbuilt)" in text and "at most 4 probe(s)" in text
    assert "budget 20 min" in text and f"one sequential measurement that may run {bisect.LONGER}x" in text
    assert bisect.plan(3, 1, 60).max_probes == 1 and bisect.plan(3, 0, 60).max_probes == 0


# ---------------------------------------------------------------------------- one probe's side


def case(verdict: str, pct: float | None = None, ci: tuple[float, float] | None = None, **kw) -> CaseReport:
    return CaseReport(
        name="square_512",
        tolerance=0.01,
        verdict=verdict,
        regression_pct=pct,
        ci95_pct=list(ci) if ci else None,
        max_regression_pct=kw.pop("limit", 3.0),
        **kw,
    )


def kernel(*cases: CaseReport, **kw) -> KernelReport:
    return KernelReport(name="deepgemm_tile", domain="deepgemm", changed=True, verdict="fail", cases=list(cases), **kw)


def test_a_probe_takes_its_side_from_the_case_verdict_against_the_limit_it_was_judged_by():
    bad = case("fail", 84.4, (65.1, 107.7), limit=41.4)
    assert side(kernel(bad), bad) == ("bad", "p50 +84.4% (95% CI +65.1%..+107.7%) is above the +41.4% limit")
    good = case("pass", 8.8, (-14.4, 30.1), limit=41.4)
    assert side(kernel(good), good)[0] == "good"
    straddles = case("inconclusive", 20.0, (-5.0, 60.0), limit=41.4, reasons=["performance inconclusive: …"])
    assert side(kernel(straddles), straddles) == ("undecided", "performance inconclusive: …")
    same = case("pass", stop_reason="identical_build")
    assert side(kernel(same), same) == ("good", "the same binary as the good build")
    untouched = KernelReport(name="deepgemm_tile", domain="deepgemm", changed=False, verdict="skipped")
    assert side(untouched, None) == ("good", "the kernel's sources are the good build's")


def test_a_commit_that_does_not_build_is_skipped_with_the_compiler_error_and_a_case_not_run_stops_it():
    broken = case("fail", status=CaseStatus.compile_fail, reasons=["head does not build"])
    # the error first, then more warnings than the build's log tail keeps (its last 40 lines): read from the
    # build's structured errors, as the review reads them, never from the tail
    warnings = [f"/opgate/src/gemm_cpu.cpp:{60 + i}:5: warning: unused variable 'w{i}'" for i in range(60)]
    output = "\n".join(["FAILED: gemm_cpu.o", "/opgate/src/gemm_cpu.cpp:50:1: error: expected ';' before '}' token",
                        *warnings, "ninja: build stopped: subcommand failed."])  # fmt: skip
    tail = "\n".join(output.splitlines()[-40:])
    assert "error:" not in tail
    errors = build_errors(output, [("/opgate/src", "kernels/deepgemm_tile")])
    built = Build(ok=False, seconds=1.0, cached=False, device="cpu", key="k", log_tail=tail, errors=errors)
    assert side(kernel(broken, build=built), broken) == (
        "skipped",
        "does not build: kernels/deepgemm_tile/gemm_cpu.cpp:50: expected ';' before '}' token",
    )
    nameless = built.model_copy(update={"errors": []})
    assert side(kernel(broken, build=nameless), broken) == ("skipped", "does not build")
    wrong = case("fail", status=CaseStatus.incorrect, reasons=["max_abs_err 3.1 > 0.01"])
    assert side(kernel(wrong), wrong) == ("skipped", "incorrect: max_abs_err 3.1 > 0.01")
    gpu = case("skipped", status=CaseStatus.skipped, reasons=["needs a CUDA GPU; this machine has none"])
    assert side(kernel(gpu), gpu) == ("error", "the case was not run: needs a CUDA GPU; this machine has none")


def test_the_split_is_halfway_in_ratio_to_the_bad_end_and_never_below_the_gate():
    assert split_pct(3.0, 100.0) == pytest.approx(41.42, abs=0.01)  # 2x: a probe is bad above +41 %
    assert split_pct(3.0, 8.0) == pytest.approx(3.92, abs=0.01)
    assert split_pct(3.0, 4.0) == 3.0  # a small drift: the gate's own limit


def test_a_probe_is_the_reviews_sequential_rule_with_longer_caps_and_the_same_floor():
    m = MeasureSettings(max_seconds=0.5, min_processes=3, max_processes=10, max_samples=200)
    assert bisect.longer(m, 1) == m
    four = bisect.longer(m)
    assert (four.max_seconds, four.max_processes, four.max_samples) == (2.0, 40, 800)
    assert four.min_processes == 3  # a probe whose interval clears the limit early stops as early as a review
    assert (four.min_blocks, four.target_pct) == (m.min_blocks, m.target_pct)


def test_a_drifting_case_is_bisected_from_the_reference_to_the_first_record_beyond_the_limit():
    (d,) = drift(REF, [sha(i) for i in range(1, 5)], [step(i, 2.9, ci=0.05) for i in range(1, 5)], {})
    assert bisect.drift_range(REF.sha, d.worst, 5.0) == (REF.sha, sha(2))  # 1.029^2 - 1 = 5.9 %
    assert bisect.drift_range(REF.sha, d.worst, 50.0) is None


# ---------------------------------------------------------------------------- bisect.json, bisect.md, the ledger


def found(**update) -> BisectReport:
    good, c9, c11 = (f"{i:x}" * 40 for i in (10, 9, 11))
    first = BisectStep(sha=c11, subject="kernel: recompute the aligned tiles", position=11, side="bad", verdict="fail",
                  why="p50 +84.4% (95% CI +65.1%..+107.7%) is above the +41.4% limit", regression_pct=84.4,
                  ci95_pct=[65.1, 107.7])  # fmt: skip
    report = BisectReport(
        kernel="deepgemm_tile",
        case_name="square_512",
        good_sha=good,
        bad_sha=c11,
        verdict="fail",
        first_bad=first,
        last_good_sha=c9,
        suspects=[c11],
        probes=[first],
        skipped=[Skipped(sha="8" * 40, subject="start a refactor", why="does not build: error: expected ';'")],
        plan=bisect.plan(15, 8, 1200),
        reproduce=bisect.reproduce("deepgemm_tile", "square_512", c9, c11),
    )
    return report.model_copy(update=update)


def test_bisect_json_round_trips_with_its_schema_and_the_markdown_links_only_full_shas():
    r = found()
    data = json.loads(r.to_json())
    assert data["schema"] == "opgate.bisect/1" and BisectReport.model_validate(data) == r
    base = commit_url("https://github.com", REPO)
    md = render_md(r, None)
    assert "First bad commit: `bbbbbbbbbbbb`" in md and "(https://" not in md and problems(md) == []
    linked = render_md(r, _settings(github_repository=REPO))
    assert f"[`bbbbbbbbbbbb`]({base}{'b' * 40})" in linked
    assert f"opgate history bisect --kernel deepgemm_tile --case square_512 --good {'9' * 40} --bad {'b' * 40}" in md
    assert "could not be judged: `888888888888`" in md
    assert commit_url("javascript:alert(1)//", REPO) == "" and commit_url("https://github.com", "a/b) [x](y") == ""


def _settings(**kw):
    from bot.config.settings import Settings

    return Settings(**kw)


def test_the_latest_bisection_of_a_range_is_read_back(url):
    with open_ledger(url) as ledger:
        store = History(ledger)
        r = found()
        store.record_bisection(r.model_copy(update={"verdict": "undecided", "first_bad": None}))
        store.record_bisection(r)
        assert store.bisection("deepgemm_tile", "square_512", "cpu", r.good_sha, r.bad_sha) == r
        assert store.bisection("deepgemm_tile", "square_512", "cpu", r.good_sha, "0" * 40) is None


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request: pytest.FixtureRequest, tmp_path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "l.sqlite")
    return str(request.getfixturevalue("pg_url"))


# ---------------------------------------------------------------------------- the CLI, nothing built


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--case", "square_512", "--good", "HEAD", "--bad", "HEAD~1"], "is not an ancestor of --bad"),
        (["--case", "nope", "--good", "HEAD~2", "--bad", "HEAD"], "--case nope: kernel deepgemm_tile has no such case"),
        (["--case", "square_512"], "main's record has no figures for it since v0.3"),
        (["--case", "square_512", "--good", "HEAD~1", "--bad", "HEAD", "--budget", "0"], "--budget 0"),
        (["--case", "square_512", "--good", "HEAD~1", "--bad", "HEAD", "--remeasure", "2"], "--remeasure was removed"),
    ],
)
def test_bad_input_is_one_line_and_exit_2_before_anything_is_built(opgate, tmp_path, args, words):
    repo, _ = _main_repo(tmp_path)
    run = opgate("history", "bisect", "--repo", str(repo.path), "--kernel", "deepgemm_tile", *args)
    assert run.code == 2 and words in run.stderr and "Traceback" not in run.stderr, run.stderr


def _recorded(opgate, tmp_path):
    """main: v0.3, then c1 +1 % and c2 +6 % recorded (c3 touches the kernel, unrecorded)."""
    repo, (c1, c2, _) = _main_repo(tmp_path)
    for base, head, pct in ((repo.base, c1, 1.0), (c1, c2, 6.0)):
        path = _write_report(tmp_path, f"{head}.json", base, head, pct)
        assert opgate("history", "record", "--report", str(path), "--repo", str(repo.path)).code == 0
    return repo, c1, c2


def test_the_bisection_plan_lists_each_drifting_case_with_its_range_and_runs_none(opgate, tmp_path):
    repo, _, c2 = _recorded(opgate, tmp_path)
    plan = tmp_path / "plan.json"
    run = opgate("history", "drift", "--repo", str(repo.path), "--bisect-plan", str(plan))
    assert run.code == 0, run.stderr
    entry = {"n": 0, "kernel": "deepgemm_tile", "case": "square_512", "device": "cpu", "good": repo.base, "bad": c2}
    assert json.loads(plan.read_text()) == {"include": [entry]}
    assert "1 bisection(s) to run" in run.stdout and "probe" not in run.stdout
    both = opgate("history", "drift", "--repo", str(repo.path), "--bisect-plan", str(plan), "--post")
    assert both.code == 2 and "drop --post" in both.stderr


def test_drift_post_names_the_first_bad_commit_a_bisection_job_found_and_ignores_parts_of_other_ranges(
    opgate, tmp_path
):
    repo, c1, c2 = _recorded(opgate, tmp_path)
    first = BisectStep(sha=c2, subject="split the K loop (#12)", position=2, side="bad", verdict="fail",
                  why="p50 +6.1% (95% CI +5.5%..+6.6%) is above the +3% limit", regression_pct=6.1,
                  ci95_pct=[5.5, 6.6])  # fmt: skip
    part = found(good_sha=repo.base, bad_sha=c2, first_bad=first, last_good_sha=c1, suspects=[c2], probes=[first],
                 skipped=[], reproduce=bisect.reproduce("deepgemm_tile", "square_512", c1, c2))  # fmt: skip
    (tmp_path / "bisect-0").mkdir()
    (tmp_path / "bisect-0" / "bisect.json").write_text(part.to_json())
    (tmp_path / "bisect-1").mkdir()
    (tmp_path / "bisect-1" / "bisect.json").write_text(part.model_copy(update={"bad_sha": c1}).to_json())
    (tmp_path / "bisect-2").mkdir()  # a bisection job that failed: its folder is there, empty
    with FakeGitHub(TOKEN) as gh:
        gh.add_repo(REPO)
        env = {"GITHUB_TOKEN": TOKEN, "GITHUB_REPOSITORY": REPO, "GITHUB_API_URL": gh.base_url}
        env["OPGATE_GITHUB_LOGIN"] = gh.bot_login  # who the fake's installation token posts as
        args = ("history", "drift", "--repo", str(repo.path), "--out-dir", str(tmp_path / "reports"), "--post")
        parts = [str(tmp_path / f"bisect-{i}") for i in range(3)]
        run = opgate(*args, "--bisections", *parts, env=env)
        assert run.code == 0, run.stderr
        assert "over a range no drifting case has now; not used" in run.stdout and "no bisect.json" in run.stdout
        (issue,) = [i for i in gh.issues(REPO) if i["title"] == "opgate drift: deepgemm_tile"]
        body = issue["body"]
        assert "### First bad commit" in body
        assert f"[`{c2[:12]}`](https://github.com/{REPO}/commit/{c2})" in body and "p50 +6.10%" in body
        command = f"opgate history bisect --kernel deepgemm_tile --case square_512 --good {c1} --bad {c2}"
        assert f"Reproduce: `{command}`" in body

        # A later run (the push-triggered record job) builds nothing and names the stored bisection.
        again = opgate(*args, "--no-bisect", env=env)
        assert again.code == 0 and "unchanged" in again.stdout, again.stdout
        outside = part.model_copy(update={"suspects": ["f" * 40]})
        (tmp_path / "bisect-0" / "bisect.json").write_text(outside.to_json())
        bad = opgate(*args, "--bisections", parts[0], env=env)
        assert bad.code == 2 and "names a commit outside" in bad.stderr
        (tmp_path / "bisect-0" / "bisect.json").write_text("{}")
        bad = opgate(*args, "--bisections", parts[0], env=env)
        assert bad.code == 2 and "not an opgate.bisect/1 file" in bad.stderr


def test_without_a_bisection_the_issue_says_it_is_pending_and_how_to_run_it(opgate, tmp_path):
    repo, _, c2 = _recorded(opgate, tmp_path)
    run = opgate("history", "drift", "--repo", str(repo.path), "--out-dir", str(tmp_path / "reports"))
    assert run.code == 0, run.stderr
    text = (tmp_path / "reports" / "drift.md").read_text()
    command = f"opgate history bisect --kernel deepgemm_tile --case square_512 --good {repo.base} --bad {c2}"
    assert f"`square_512`: not bisected — `opgate history drift --post` runs it, or run `{command}`" in text
    assert git(repo.path, "rev-parse", "HEAD") != c2  # c3 is after it: the range ends at the first bad record
