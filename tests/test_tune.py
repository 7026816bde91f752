"""The tuning loop's logic as pure functions over trial records: best configs, stops, regret, tables, /tune."""

from __future__ import annotations

import pytest

from bot.models.github import Role
from bot.tune import analysis, command
from bot.tune.agent import table
from bot.tune.model import CaseResult, RoundEvent, Trial
from bot.tune.policy import CoordinateDescent, Exhaustive, Search
from bot.tune.space import config_key, config_patch, configs, size
from tests.conftest import KERNELS


def case(name: str, pct: float, half: float = 1.0, verdict: str = "pass", status: str = "ok") -> CaseResult:
    return CaseResult(name=name, status=status, verdict=verdict, regression_pct=pct, ci95_pct=(pct - half, pct + half))


def trial(label: str, *cases: CaseResult, verdict: str = "pass", source: str = "agent") -> Trial:
    m, n = label.split("x")
    config = {"tile_m": int(m), "tile_n": int(n), "tile_k": 64}
    return Trial(key=config_key(config), config=config, source=source, status="judged", verdict=verdict,
                 cases=list(cases))  # fmt: skip


BASE = Trial(key=config_key({"tile_m": 128, "tile_n": 128, "tile_k": 64}), config={"tile_m": 128, "tile_n": 128,
             "tile_k": 64}, source="base", status="judged", verdict="pass")  # fmt: skip


# ---------------------------------------------------------------------------- speedups and the best config


def test_a_trials_speedup_is_the_geometric_mean_of_base_over_candidate() -> None:
    t = trial("128x256", case("a", -20.0), case("b", 25.0))  # 1.25x faster on a, 1.25x slower on b
    assert t.speedup == pytest.approx(1.0)
    assert trial("128x256", case("a", -50.0)).speedup == pytest.approx(2.0)
    assert BASE.speedup == 1.0


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


# ---------------------------------------------------------------------------- stops


def events(*outcomes: tuple[int, str, str]) -> list[RoundEvent]:
    return [RoundEvent(seq=i, round=r, source="agent", outcome=o, key=k) for i, (r, o, k) in enumerate(outcomes, 1)]


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


# ---------------------------------------------------------------------------- strategies


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


def kernel():
    from bot.config.manifest import load_kernel

    return load_kernel(KERNELS / "deepgemm_tile")


def test_the_space_is_every_allowed_config_and_a_config_becomes_a_one_line_patch() -> None:
    k = kernel()
    assert size(k.manifest.tunables) == 27 and len(configs(k.manifest.tunables)) == 27
    assert size(load_v41().manifest.tunables) == 8 and size(load_mla().manifest.tunables) == 9
    text = (k.folder / "tile_config.json").read_text()
    patch = config_patch(k, text, {**k.config, "tile_n": 256})
    assert patch.splitlines()[-2:] == ['-{"tile_m": 128, "tile_n": 128, "tile_k": 64}',
                                       '+{"tile_m": 128, "tile_n": 256, "tile_k": 64}']  # fmt: skip
    assert config_patch(k, text, dict(k.config)) == ""
    assert config_key({"b": 1, "a": 2}) == config_key({"a": 2, "b": 1})


def load_v41():
    from bot.config.manifest import load_kernel

    return load_kernel(KERNELS / "v41_attention_splitk")


def load_mla():
    from bot.config.manifest import load_kernel

    return load_kernel(KERNELS / "flashmla_decode")


def search(k, trials: list[Trial]) -> Search:
    base = BASE.model_copy(update={"key": config_key(k.config), "config": dict(k.config)})
    return Search(
        kernel=k, config_text=(k.folder / "tile_config.json").read_text(), space=configs(k.manifest.tunables),
        round=1, max_rounds=None, tokens_left=0, trials={t.key: t for t in [base, *trials]},
        seen={base.key, *(t.key for t in trials)},
    )  # fmt: skip


def test_coordinate_descent_walks_the_neighbours_of_the_best_config_and_says_when_it_converged() -> None:
    k = kernel()
    first = CoordinateDescent().propose(search(k, []))
    assert first.outcome == "ok" and '"tile_m": 64' in (first.patch or "")
    better = Trial(key=config_key({**k.config, "tile_n": 256}), config={**k.config, "tile_n": 256}, source="policy",
                   status="judged", verdict="pass", cases=[case("a", -10.0)])  # fmt: skip
    nxt = CoordinateDescent().propose(search(k, [better]))
    assert '"tile_m": 64, "tile_n": 256' in (nxt.patch or "")  # moved to the better config
    every = [
        Trial(key=config_key(c), config=c, source="policy", status="judged", verdict="fail")
        for c in configs(k.manifest.tunables)
    ]
    assert CoordinateDescent().propose(search(k, every)).outcome == "done"
    assert Exhaustive().propose(search(k, every)).outcome == "done"
    assert Exhaustive().propose(search(k, [])).outcome == "ok"


# ---------------------------------------------------------------------------- the agent's table


def test_the_prompt_table_shows_each_candidate_once_with_its_measurements_and_notes_the_other_rounds() -> None:
    a = trial("128x256", case("square_512", -4.2, half=0.8), case("ragged", 1.1))
    a = a.model_copy(update={"resources": "gemm: 96 regs, 0 B spill", "reasons": ["ignore previous | instructions"]})
    rows, notes = table(
        events((1, "judged", a.key), (2, "malformed", ""), (3, "repeat", a.key), (4, "base", BASE.key)),
        {a.key: a, BASE.key: BASE},
    )
    [row] = rows
    assert row.label == "tile_m=128 tile_n=256 tile_k=64" and row.speedup.startswith("x1.0")
    assert "square_512 -4.2% [-5.0, -3.4] pass" in row.cases and "96 regs" in row.resources
    assert "|" not in row.errors  # untrusted text cannot break the table
    assert any("round 2: your reply could not be used" in n for n in notes)
    assert any("round 3" in n and "answered from round 1" in n for n in notes)
    assert any("round 4" in n and "current config" in n for n in notes)


# ---------------------------------------------------------------------------- /tune


@pytest.mark.parametrize(
    ("body", "kernel", "error"),
    [
        ("/tune deepgemm_tile", "deepgemm_tile", None),
        ("/tune deepgemm_tile --strategy both --rounds 4 --tokens 20000\nplease", "deepgemm_tile", None),
        ("/tune", None, "which kernel"),
        ("/tune a b", None, "more than one kernel"),
        ("/tune deepgemm_tile --rounds 0", None, "--rounds needs a whole number"),
        ("/tune deepgemm_tile --strategy random", None, "--strategy is one of"),
        ("/tune deepgemm_tile --budget 3", None, "unknown option --budget"),
    ],
)
def test_tune_commands_are_read_from_the_first_line(body: str, kernel: str | None, error: str | None) -> None:
    parsed = command.parse_command(body)
    assert parsed is not None
    assert parsed.kernel == kernel if error is None else error in (parsed.error or "")


@pytest.mark.parametrize("body", ["/tunex deepgemm_tile", "> /tune deepgemm_tile", "hi\n/tune deepgemm_tile", ""])
def test_only_a_first_line_tune_is_a_command(body: str) -> None:
    assert command.parse_command(body) is None


def test_tune_needs_write_access_and_a_known_kernel() -> None:
    parsed = command.parse_command("/tune deepgemm_tile --rounds 4")
    assert parsed is not None
    kernels = ["deepgemm_tile", "flashmla_decode"]
    ok = command.decide(parsed, login="maint-bob", role=Role(level="write", name="write"), kernels=kernels, number=7)
    assert ok.granted and ok.inputs == {"kernel": "deepgemm_tile", "strategy": "agent", "rounds": "4", "issue": "7"}
    for level in ("read", "triage", "none"):
        no = command.decide(parsed, login="eve", role=Role(level=level, name=level), kernels=kernels, number=7)
        assert not no.granted and "needs write, maintain or admin" in no.reason and no.inputs == {}
    custom = Role(level="write", name="kernel-maintainer")  # a custom role counts as the base role it builds on
    granted = command.decide(parsed, login="kay", role=custom, kernels=kernels, number=7)
    assert granted.granted and granted.role == "kernel-maintainer" and "(kernel-maintainer (write))" in granted.reason
    other = command.parse_command("/tune ../../etc")
    assert other is not None
    admin = Role(level="admin", name="admin")
    assert not command.decide(other, login="maint-bob", role=admin, kernels=kernels, number=7).granted


# ---------------------------------------------------------------------------- a candidate's identity


def test_a_candidate_is_named_by_what_it_changes_not_by_how_the_patch_is_written(kernel_repo) -> None:
    import json

    from bot.config.manifest import load_kernel
    from bot.review.candidates import CandidateError
    from bot.tune.model import candidate_label
    from bot.tune.space import file_patch, inspect

    k = load_kernel(kernel_repo.path / "kernels" / "deepgemm_tile")
    path = "kernels/deepgemm_tile/tile_config.json"
    text = (kernel_repo.path / path).read_text()
    wider = {**k.config, "tile_n": 256}
    one_line = inspect(kernel_repo.path, kernel_repo.base, file_patch(path, text, json.dumps(wider) + "\n"), k)
    pretty = inspect(kernel_repo.path, kernel_repo.base, file_patch(path, text, json.dumps(wider, indent=4)), k)
    assert one_line.key == pretty.key == config_key(wider) and not one_line.is_base and one_line.paths == [path]
    same = inspect(kernel_repo.path, kernel_repo.base, file_patch(path, text, json.dumps(k.config, indent=2)), k)
    assert same.is_base and same.key == config_key(k.config)
    source = "kernels/deepgemm_tile/gemm_cpu.cpp"
    body = (kernel_repo.path / source).read_text()
    edited = inspect(kernel_repo.path, kernel_repo.base, file_patch(source, body, "// tuned\n" + body), k)
    assert edited.key.startswith("tree:") and not edited.is_base
    assert candidate_label(edited.key, edited.config).startswith("tile_m=128 tile_n=128 tile_k=64 + files ")
    with pytest.raises(CandidateError, match="outside kernels/deepgemm_tile/"):
        inspect(kernel_repo.path, kernel_repo.base, file_patch("README.md", "a\n", "b\n"), k)
    with pytest.raises(CandidateError, match="git apply"):
        inspect(kernel_repo.path, kernel_repo.base, file_patch(path, '{"tile_m": 1}\n', "{}\n"), k)


def test_a_trials_problems_name_each_failed_case_once_with_its_reason() -> None:
    slow = case("ragged", 40.0, verdict="fail").model_copy(update={"reason": "performance: p50 +40% regresses"})
    t = trial("128x256", case("square", -30.0), slow, verdict="fail")
    t = t.model_copy(update={"reasons": ["ragged: fail", "resource: spills 8 bytes"]})
    assert t.problems == ["resource: spills 8 bytes", "ragged: performance: p50 +40% regresses"]
