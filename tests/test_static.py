"""Static checks before any build (bot/verdict/static.py): a tunable outside its allowed set is named with the set."""

from __future__ import annotations

from bot.verdict.static import check_tunables


def test_static_check_names_the_parameter_and_the_allowed_set():
    allowed = {"tile_m": [64, 128, 256], "tile_n": [64, 128, 256], "tile_k": [32, 64, 128]}
    assert check_tunables({"tile_m": 128, "tile_n": 64, "tile_k": 32}, allowed, "tile_config.json") == []
    findings = check_tunables({"tile_m": 96, "tile_n": 64, "tile_k": 32}, allowed, "tile_config.json")
    assert findings == ["tile_config.json: tile_m=96 not in {64,128,256}"]
    findings = check_tunables({"tile_m": 64, "tile_n": 64, "tile_kk": 32, "tile_k": True}, allowed, "c.json")
    assert "c.json: unknown tunable 'tile_kk' (allowed: tile_k, tile_m, tile_n)" in findings
    assert "c.json: tile_k=True not in {32,64,128}" in findings  # True == 1 must not sneak through
