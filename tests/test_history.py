"""Main's record and cumulative drift: the pure arithmetic, the ledger on SQLite and PostgreSQL, and the CLI
(`opgate history record`, `opgate history drift --post`) on a scratch git repository and the local GitHub server."""

from __future__ import annotations

import pytest

from bot.ledger import open_ledger
from bot.mainline.drift import Override, Reference, chain_ratio, drift
from bot.mainline.record import CaseFigure, MainCommit, ResourceFigure, figures, occupancy_estimate, pr_from_subject
from bot.mainline.store import History
from bot.models.ledger import AcceptanceRow
from bot.models.report import (
    AgentReport,
    Build,
    CaseReport,
    KernelReport,
    Machine,
    Report,
    Resource,
    ResourceCheckReport,
)
from tests.conftest import git
from tests.github_server import FakeGitHub
from tests.pg import pg_cluster, pg_url  # noqa: F401  (fixtures)

REPO = "octo-org/kernels"
TOKEN = "ghs_historyTestToken0123456789abcdef"
REF = Reference(label="v0.3", sha="r" * 40, committed_at="2026-01-01T00:00:00+00:00")


def sha(i: int) -> str:
    return f"{i:040x}"


def step(i: int, pct: float, *, kernel: str = "deepgemm_tile", case: str = "square_512", ci: float = 0.5) -> CaseFigure:
    base = REF.sha if i == 1 else sha(i - 1)
    return CaseFigure(
        sha=sha(i),
        base_sha=base,
        kernel=kernel,
        domain="deepgemm",
        case_name=case,
        device="cpu",
        device_name="cpu",
        p50_ms=1.0 + pct / 100,
        base_p50_ms=1.0,
        regression_pct=pct,
        ci_low_pct=pct - ci,
        ci_high_pct=pct + ci,
        verdict="pass" if pct + ci <= 3 else "fail",
        committed_at=f"2026-02-{i:02d}T10:00:00+00:00",
    )


def commit(i: int, pr: int | None = None) -> MainCommit:
    return MainCommit(
        sha=sha(i),
        base_sha=REF.sha if i == 1 else sha(i - 1),
        committed_at=f"2026-02-{i:02d}T10:00:00+00:00",
        subject=f"change {i}" + (f" (#{pr})" if pr else ""),
        pr=pr,
    )


# ---------------------------------------------------------------------------- pure


def test_ten_changes_that_each_pass_the_3_percent_gate_add_up_to_a_flagged_drift():
    figs = [step(i, 2.9, ci=0.05) for i in range(1, 11)]
    (d,) = drift(REF, [sha(i) for i in range(1, 11)], figs, {}, limit_pct=5.0)
    case = d.worst
    assert all(f.verdict == "pass" for f in figs)
    assert case.drift_pct == pytest.approx((1.029**10 - 1) * 100, abs=0.01)  # +33.0%, not 10 × 2.9
    assert case.ci_low_pct < case.drift_pct < case.ci_high_pct and d.flagged
    assert case.reference_p50_ms == 1.0 and case.since == "2026-02-01"


def test_steps_inside_their_noise_do_not_drift_and_the_ci_widens_with_every_step():
    assert chain_ratio([]) == (0.0, 0.0, 0.0)
    figs = [step(i, 0.3 if i % 2 else -0.3, ci=1.0) for i in range(1, 9)]
    (d,) = drift(REF, [sha(i) for i in range(1, 9)], figs, {}, limit_pct=5.0)
    assert not d.flagged and abs(d.worst.drift_pct) < 0.1
    assert d.movers == []  # every step's CI holds zero: nothing "moved" it
    width = d.worst.ci_high_pct - d.worst.ci_low_pct
    assert 2.0 * 2**0.5 < width < 2.0 * 8**0.5 + 0.1  # sqrt(8) × one step's width (2 × 1.0%)


def test_the_movers_name_their_commit_pr_and_override_and_only_commits_in_the_range_count():
    figs = [step(1, 0.1), step(2, 6.0), step(3, 0.0), step(4, 2.0, case="ragged")]
    figs.append(step(9, 50.0).model_copy(update={"sha": "f" * 40}))  # not on main's line since the reference
    commits = {c.sha: c for c in (commit(1), commit(2, pr=12), commit(3), commit(4, pr=14))}
    override = Override(pr=12, login="maint-alice", role="maintain", reason="noisy runner", kernels=["deepgemm_tile"])
    (d,) = drift(REF, [sha(i) for i in range(1, 5)], figs, commits, limit_pct=5.0, overrides={12: [override]})
    assert {c.case_name for c in d.cases} == {"square_512", "ragged"}
    assert d.worst.case_name == "square_512" and d.worst.drift_pct == pytest.approx(6.11, abs=0.01)
    assert [(m.sha, m.pr, m.changes) for m in d.movers] == [
        (sha(2), 12, [("square_512", 6.0)]),
        (sha(4), 14, [("ragged", 2.0)]),
    ]
    assert d.movers[0].overrides == [override] and d.movers[0].verdict == "fail"


def test_a_commit_that_touched_the_kernel_but_has_no_record_is_named_as_a_gap():
    figs = [step(1, 1.0), step(3, 1.0)]  # commit 2 touched the kernel; its record is missing
    touched = {sha(1): {"deepgemm_tile"}, sha(2): {"deepgemm_tile"}, sha(3): {"deepgemm_tile"}, sha(4): {"other"}}
    (d,) = drift(REF, [sha(i) for i in range(1, 5)], figs, {}, touched=touched)
    assert d.gaps == [sha(2)]


def test_a_push_of_several_commits_is_one_record_covering_all_of_them():
    figs = [step(3, 4.0).model_copy(update={"base_sha": REF.sha})]  # one push: reference..commit 3
    touched = {sha(i): {"deepgemm_tile"} for i in range(1, 4)}
    (d,) = drift(REF, [sha(i) for i in range(1, 4)], figs, {}, touched=touched)
    assert d.gaps == [] and d.worst.drift_pct == pytest.approx(4.0)


@pytest.mark.parametrize(
    ("subject", "pr"),
    [
        ("deepgemm: tile_n 256 (#42)", 42),
        ("Merge pull request #7 from octo/branch", 7),
        ("fix #42 in the README", None),
        ("plain commit", None),
    ],
)
def test_the_pull_request_of_a_main_commit_comes_from_its_subject(subject, pr):
    assert pr_from_subject(subject) == pr


def test_occupancy_is_limited_by_registers_threads_or_shared_memory():
    assert occupancy_estimate(128, 256, 0) == 0.25  # 4096 regs per warp × 8 warps: 2 blocks, 16 of 64 warps
    assert occupancy_estimate(32, 256, 0) == 1.0
    assert occupancy_estimate(32, 256, 100_000) == 0.25  # 2 blocks of 101 KiB fit in 228 KiB
    assert occupancy_estimate(64, None, 0) is None
    assert occupancy_estimate(130, 256, 0) == 0.125  # 136 allocated per thread: 1 block of 8 warps, not 2


def test_occupancy_is_estimated_on_the_architecture_the_function_was_compiled_for():
    # 32 registers x 256 threads fill sm_90's 64 warps; an A10 (sm_86) holds 48, a T4 (sm_75) 32: both are full
    assert [occupancy_estimate(32, 256, 0, arch) for arch in ("sm_90a", "sm_86", "sm_75")] == [1.0, 1.0, 1.0]
    # 40 KiB of static shared memory: 5 blocks of 8 in sm_90's 228 KiB, 2 in an A10's 100 KiB, 1 in a T4's 64 KiB
    assert [occupancy_estimate(32, 256, 40_960, arch) for arch in ("sm_90a", "sm_86", "sm_75")] == [
        40 / 64,
        16 / 48,
        8 / 32,
    ]
    assert occupancy_estimate(32, 256, 0, "sm_110a") is None  # no table: no estimate, never sm_90's
    row = ResourceFigure(sha="a" * 40, kernel="k", function="f", arch="sm_86", registers=32, smem_bytes=40_960,
                         threads=256, committed_at="2025-01-01T00:00:00+00:00")  # fmt: skip
    assert row.occupancy == 16 / 48


def _report(pr: int | None = None) -> Report:
    cases = [
        CaseReport(
            name="square_512", tolerance=0.01, p50_ms=1.1, base_p50_ms=1.0, regression_pct=10.0, ci95_pct=[9.0, 11.0],
            verdict="fail",
        ),
        CaseReport(name="gemm_4096", device="cuda", tolerance=0.01, verdict="skipped", reasons=["needs a CUDA GPU"]),
    ]  # fmt: skip
    check = ResourceCheckReport(
        status="ok", head=[Resource(function="k1", registers=96, smem_bytes=4096)], threads={"k1": 256}
    )
    return Report(
        base_sha="b" * 40,
        head_sha="c" * 40,
        pr=pr,
        verdict="fail",
        kernels=[
            KernelReport(
                name="deepgemm_tile", domain="deepgemm", changed=True, verdict="fail", cases=cases,
                resource_check=check, build=Build(ok=True, seconds=1, cached=False, device="cpu"),
            ),
            KernelReport(name="flashmla_decode", domain="flashmla", changed=False, verdict="skipped"),
        ],
        agent=AgentReport(status="offline"),
        environment=Machine(device="cpu", python="3.11"),
        created_at="2026-03-02T10:00:00+00:00",
        opgate_version="0.1.0",
    )  # fmt: skip


def test_a_main_review_gives_one_figure_per_measured_case_and_one_per_compiled_function():
    main = MainCommit(sha="c" * 40, base_sha="b" * 40, committed_at="2026-03-02T09:00:00+00:00")
    cases, resources = figures(_report(), main)
    assert [(c.kernel, c.case_name, c.p50_ms, c.ci_low_pct, c.ci_high_pct) for c in cases] == [
        ("deepgemm_tile", "square_512", 1.1, 9.0, 11.0)
    ]
    assert resources == [
        ResourceFigure(
            sha="c" * 40, kernel="deepgemm_tile", function="k1", registers=96, smem_bytes=4096, threads=256,
            committed_at=main.committed_at,
        )
    ]  # fmt: skip


# ---------------------------------------------------------------------------- ledger, both databases


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request: pytest.FixtureRequest, tmp_path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "l.sqlite")
    return str(request.getfixturevalue("pg_url"))


def test_main_figures_round_trip_and_recording_a_commit_again_replaces_them(url):
    with open_ledger(url) as ledger:
        store = History(ledger)
        res = ResourceFigure(sha=sha(1), kernel="deepgemm_tile", function="k", registers=90, committed_at="2026-02-01")
        store.record(commit(1, pr=11), [step(1, 1.0)], [res])
        store.record(commit(1, pr=11), [step(1, 2.0)], [res.model_copy(update={"registers": 92})])
        store.record(commit(2), [step(2, 0.5)], [])
        assert [c.sha for c in store.commits()] == [sha(1), sha(2)] and store.commits()[0].pr == 11
        assert [(f.sha, f.regression_pct) for f in store.figures()] == [(sha(1), 2.0), (sha(2), 0.5)]
        assert [r.registers for r in store.resources()] == [92]
        assert store.figures(kernel="other") == []
        assert store.has_table("main_figures") and store.has_table("tuning_trials") and not store.has_table("nothing")


def test_the_latest_drift_check_and_every_override_are_read_back(url):
    from bot.mainline.drift import checks

    with open_ledger(url) as ledger:
        store = History(ledger)
        (d,) = drift(REF, [sha(1), sha(2)], [step(1, 3.0), step(2, 3.0)], {})
        store.record_checks(checks([d], "2026-03-01T00:00:00+00:00", {}))
        store.record_checks(checks([d], "2026-03-02T00:00:00+00:00", {"deepgemm_tile": "https://x/issues/1"}))
        (latest,) = store.latest_checks()
        assert (latest.checked_at, latest.flagged, latest.issue_url) == (
            "2026-03-02T00:00:00+00:00",
            True,
            "https://x/issues/1",
        )
        ledger.record_acceptance(
            AcceptanceRow(pr=5, head_sha="h" * 40, login="a", role="admin", kernels=[], override=True, comment_id=9)
        )
        assert [(a.pr, a.override) for a in store.acceptances()] == [(5, True)]


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
