"""bot/config/key_lines.py: each top-level key of a JSON object's text at its line (json.loads gives none)."""

from __future__ import annotations

import json

from bot.config.key_lines import key_lines
from bot.config.manifest import load_kernel
from tests.conftest import ROOT


def test_each_top_level_key_is_on_the_line_its_name_starts_and_nested_keys_are_not_counted():
    text = (
        '{\n  "tile_m": 128,\n  "nested": {"tile_n": 1, "list": [1, "a,\\"b"]},\n  "q\\"uote": "x",\n\n'
        '  "tile_k": 64\n}\n'
    )
    assert key_lines(text) == {"tile_m": 2, "nested": 3, 'q"uote': 4, "tile_k": 6}
    assert set(key_lines(text)) == set(json.loads(text))
    assert key_lines('{"tile_m": 128, "tile_n": 128, "tile_k": 64}') == {"tile_m": 1, "tile_n": 1, "tile_k": 1}


def test_a_key_given_twice_keeps_the_line_json_keeps_its_value_from_and_no_object_has_no_lines():
    assert key_lines('{\n"a": 1,\n"a": 2\n}') == {"a": 3}
    assert key_lines("[1, 2]") == {} and key_lines("") == {} and key_lines('{"a": "unterminated') == {"a": 1}


def test_a_loaded_kernel_carries_its_tunables_lines():
    k = load_kernel(ROOT / "kernels" / "deepgemm_tile", path="kernels/deepgemm_tile")
    assert k.config_lines == {"tile_m": 1, "tile_n": 1, "tile_k": 1}
