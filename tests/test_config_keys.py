"""Unknown keys in a configuration file (bot/config/keys.py): "did you mean" for a misspelt key at any depth of a
manifest (through lists, dicts and optional fields), else the keys allowed there."""

from __future__ import annotations

from bot.config.keys import did_you_mean, model_at
from bot.config.manifest import KernelManifest
from bot.config.manifest_tables import BuildSpec, Case, Constraints


def test_a_misspelt_key_gets_the_closest_one() -> None:
    assert did_you_mean(KernelManifest, ["constraints", "tolerence"]) == " (did you mean 'tolerance'?)"
    assert did_you_mean(KernelManifest, ["timeout"]) == " (did you mean 'timeout_s'?)"


def test_a_key_far_from_every_field_lists_the_allowed_ones() -> None:
    hint = did_you_mean(KernelManifest, ["constraints", "zzz"])
    assert hint.startswith(" (allowed: ") and "tolerance" in hint and "max_speedup" in hint


def test_the_model_is_found_through_lists_and_dicts() -> None:
    assert model_at(KernelManifest, ["constraints", "x"]) is Constraints
    assert model_at(KernelManifest, ["cases", 2, "x"]) is Case  # [[cases]]: a list, the index skipped
    assert model_at(KernelManifest, ["build", "cuda", "x"]) is BuildSpec  # [build.cuda]: a dict's key skipped
    assert model_at(KernelManifest, ["nosuch", "x"]) is None and model_at(KernelManifest, ["name", "x"]) is None
    assert did_you_mean(KernelManifest, ["cases", 0]) == "" and did_you_mean(KernelManifest, []) == ""
