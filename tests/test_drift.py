"""Cumulative drift on main (bot/mainline/drift.py): small steps that add up, noise, movers, gaps."""

from __future__ import annotations

import pytest

from bot.mainline.drift import Override, chain_ratio, drift
from tests.mainline_world import REF, commit, sha, step


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
