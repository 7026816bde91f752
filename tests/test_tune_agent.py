"""The tuning agent's prompt (bot/tune/agent.py): the table shows each candidate once with its measurements and notes
the other rounds."""

from __future__ import annotations

import json

from bot.agent import estimate, materials
from bot.agent.materials import Baseline, Sources
from bot.config.manifest import load_kernel
from bot.tune.agent import View, messages, table
from tests.conftest import KERNELS, REPO_CONFIG
from tests.tune_trials import BASE, case, events, trial


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


def test_the_tune_prompt_fits_the_materials_after_the_table_and_names_what_it_left_out() -> None:
    """Within the per-request budget the table comes first; the materials fill what is left in the domain's order
    (the review's `prompt.fill`), and one that does not fit is named in the prompt."""
    kernel = load_kernel(KERNELS / "deepgemm_tile", config=REPO_CONFIG, path="kernels/deepgemm_tile")
    pieces = materials.pieces(
        kernel, kernel, [], order=("constraints", "cases"), baseline=Baseline(missing="none"), sources=Sources(),
        reference_text=None,
    )  # fmt: skip
    a = trial("128x256", case("square_512", -4.2, half=0.8))
    rows, _ = table(events((1, "judged", a.key)), {a.key: a, BASE.key: BASE})
    view = View(round=2, max_rounds=6, tokens_left=9_000, seen=2, space_size=27, rows=rows, notes=[])
    text = json.dumps(kernel.config) + "\n"

    def user(limit: int) -> tuple[str, int]:
        out = messages(kernel, view, config_text=text, example=("--- a\n", "x"), limit=limit, pieces=pieces)
        return out[1]["content"], estimate.count_messages(out)

    full, size = user(100_000)
    assert "Gate limits (base's kernel.toml [constraints])" in full and "- square_512: cpu" in full
    assert "Left out of this prompt" not in full
    cut, cut_size = user(size - 20)  # the case list (the last material) no longer fits
    assert cut_size <= size - 20 and "Gate limits" in cut and "- square_512: cpu" not in cut
    assert f"Left out of this prompt for size (the per-request budget): {pieces[1].label}." in cut
    assert "tile_m=128 tile_n=256 tile_k=64" in cut  # the table stays
