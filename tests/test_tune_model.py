"""Trial records (bot/tune/model.py): a trial's speedup is the geometric mean over its cases, a candidate is named by
what it changes, a trial's problems name each failed case once."""

from __future__ import annotations

import pytest

from bot.tune.space import config_key
from tests.tune_trials import BASE, case, trial


def test_a_trials_speedup_is_the_geometric_mean_of_base_over_candidate() -> None:
    t = trial("128x256", case("a", -20.0), case("b", 25.0))  # 1.25x faster on a, 1.25x slower on b
    assert t.speedup == pytest.approx(1.0)
    assert trial("128x256", case("a", -50.0)).speedup == pytest.approx(2.0)
    assert BASE.speedup == 1.0


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
