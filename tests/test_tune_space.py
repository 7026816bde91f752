"""The tuning space (bot/tune/space.py): every allowed config, and a config as a one-line patch."""

from __future__ import annotations

from bot.tune.space import config_key, config_patch, configs, size
from tests.tune_trials import kernel, load_mla, load_v41


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
