"""The tuning loop's decisions over trial records (bot/tune/analysis.py): the best config across cases and per shape,
what a proposal needs, the pass rate, the stops, regret against the sweep."""

from __future__ import annotations

import pytest

from bot.config.settings import load_settings
from bot.tune import analysis
from bot.tune.model import Trial
from bot.tune.trial import candidate_settings
from tests.tune_trials import BASE, case, events, trial


def test_a_config_faster_on_one_case_and_slower_on_another_is_not_the_best_across_cases() -> None:
    mixed = trial("128x256", case("square", -30.0), case("ragged", 2.5))  # geomean x1.19, ragged 2.5 % slower
    steady = trial("256x128", case("square", -5.0), case("ragged", -4.0))
    assert (mixed.speedup or 0) > (steady.speedup or 0)
    assert not mixed.qualifies and steady.qualifies
    assert analysis.best([mixed, steady]) is steady
    shapes = {s.case: s for s in analysis.per_shape([mixed, steady], BASE.label, steady.key)}
    assert shapes["square"].key == mixed.key and not shapes["square"].is_overall  # the best differs by shape
    assert shapes["ragged"].key == steady.key and shapes["ragged"].is_overall


def test_per_shape_keeps_the_current_config_where_nothing_is_faster_and_ignores_incorrect_configs() -> None:
    wrong = trial("64x64", case("square", -40.0, status="incorrect", verdict="fail"), verdict="fail")
    slower = trial("256x256", case("square", 4.0, verdict="fail"), verdict="fail")
    [only] = analysis.per_shape([wrong, slower], BASE.label, None)
    assert only.is_base and only.label == BASE.label and only.speedup == 1.0


def test_failed_gates_and_errors_never_make_the_best_config() -> None:
    failed = trial("128x256", case("a", -30.0), verdict="fail")
    crashed = Trial(key="config:x", source="agent", status="error", verdict="error")
    assert analysis.best([failed, crashed]) is None
    assert analysis.best_speedup([failed, crashed]) == 1.0


def test_a_proposal_needs_a_one_percent_gain_and_after_verification_a_gain_beyond_noise() -> None:
    small = trial("128x256", case("a", -0.5, half=0.2))
    noisy = trial("128x256", case("a", -5.0, half=9.0), case("b", -4.0, half=8.0))
    clear = trial("128x256", case("a", -5.0, half=1.0), case("b", 1.0, half=0.5))
    assert not analysis.proposable(small)
    assert analysis.proposable(noisy) and not analysis.proposable(noisy, measured=True)
    assert analysis.proposable(clear, measured=True)


def test_the_pass_rate_counts_cases_measurably_faster_in_a_candidate_that_passed() -> None:
    a = trial("128x256", case("square", -5.0), case("ragged", -0.5, half=2.0))
    b = trial("256x128", case("square", -9.0), case("ragged", -6.0), verdict="fail")
    assert analysis.pass_rate([]) == (0, 0)
    assert analysis.pass_rate([a, b]) == (1, 2)


def test_plateau_means_no_one_percent_gain_over_the_last_k_rounds() -> None:
    assert not analysis.plateau([1.0, 1.0], 2)
    assert analysis.plateau([1.0, 1.0, 1.0], 2)
    assert not analysis.plateau([1.0, 1.0, 1.05], 2)
    assert analysis.plateau([1.0, 1.05, 1.055, 1.059], 2)  # +0.9 % over two rounds
    a, b = trial("128x256", case("a", -5.0)), trial("256x128", case("a", -5.5))
    found = analysis.history(events((1, "judged", a.key), (2, "malformed", ""), (3, "judged", b.key)),
                             {a.key: a, b.key: b})  # fmt: skip
    assert found == pytest.approx([1.0, 1 / 0.95, 1 / 0.95, 1 / 0.945])


def test_each_stop_is_named() -> None:
    common = {"best_by_round": [1.0, 1.0], "plateau_rounds": 3, "seen": 2, "space_size": 27}
    assert analysis.next_stop(rounds_done=1, max_rounds=6, **common) is None
    rounds = analysis.next_stop(rounds_done=6, max_rounds=6, **common)
    assert rounds is not None and rounds.kind == "rounds" and "--rounds 6" in rounds.detail
    rising = {**common, "best_by_round": [1.0, 1.02, 1.02, 1.02]}  # +2 % since three rounds ago
    assert analysis.next_stop(rounds_done=3, max_rounds=6, **rising) is None
    flat = analysis.next_stop(rounds_done=4, max_rounds=6, **{**common, "best_by_round": [1.0, 1.02, 1.02, 1.02, 1.02]})
    assert flat is not None and flat.kind == "plateau" and "1.020" in flat.detail
    seen = analysis.next_stop(rounds_done=1, max_rounds=6, **{**common, "seen": 27})
    assert seen is not None and seen.kind == "space" and "27 of 27" in seen.detail


def test_a_spent_budget_without_a_gain_in_pass_rate_hands_over_to_a_person() -> None:
    stop = analysis.budget_stop("weekly token budget exhausted", (0, 0), (0, 2))
    assert stop.kind == "budget" and stop.handover
    assert stop.line().endswith("hand over to a person: review the search space")
    gained = analysis.budget_stop("weekly token budget exhausted", (0, 0), (1, 2))
    assert not gained.handover and "hand over" not in gained.line()


def test_regret_and_evaluations_to_the_optimum_compare_the_agent_with_the_sweep() -> None:
    opt = trial("256x128", case("a", -20.0, half=1.0), source="exhaustive")
    near = trial("128x256", case("a", -19.5, half=1.0))  # within noise of the optimum
    worse = trial("64x128", case("a", -5.0))
    both = analysis.compare([worse, near], [worse, near, opt])
    assert both.optimum_key == opt.key and both.agent_best_key == near.key
    assert both.regret_pct == pytest.approx((1.25 / (1 / 0.805) - 1) * 100, abs=0.01)
    assert both.evaluations_to_optimum == 2 and both.agent_evaluations == 2 and both.exhaustive_evaluations == 3
    lost = analysis.compare([worse], [worse, opt])
    assert lost.evaluations_to_optimum is None and lost.regret_pct > 10
    flat = analysis.compare([], [trial("64x64", case("a", 5.0), verdict="fail")])
    assert flat.optimum_label == "the current config" and flat.evaluations_to_optimum == 0


def test_a_search_candidate_is_reviewed_without_callgrind_and_the_winner_as_a_pull_request_is():
    """Issue 40, 4: the search ranks candidates by their intervals; only the re-verification asks callgrind."""
    settings = load_settings({"OPGATE_SIMULATE": "always", "OPGATE_MEASURE_MAX_SECONDS": "2"})
    search = candidate_settings(settings, search=True)
    assert search.simulate == "off" and search.measure == settings.measure  # timed exactly as before
    assert candidate_settings(settings, search=False) == settings
