"""Where a lint finding points (bot/lint/locate.py): the line of every JSON and TOML key, array elements and
`[[cases]]` by index, the nearest parent's line for a key that is not there, and key paths as messages write them."""

from __future__ import annotations

from bot.lint.locate import json_key_lines, label_of, line_of, strings, toml_key_lines

JSON = """{
  "provider": {
    "base_url": "https://taotoken.net/api",
    "api_key_env": "X"
  },
  "deny": [
    "a",
    "b"
  ],
  "note": "a \\"quoted\\" { brace"
}
"""

TOML = '''name = "k"
notes = """
key = "inside a multi-line string"
"""

[build.cpu]
sources = ["a.cpp"]
params = { c = 1.5, "d" = 2 }

[[cases]]
name = "small"

[[cases]]
name = "large"
'''


def test_json_keys_and_array_elements_are_found_at_their_lines() -> None:
    lines = json_key_lines(JSON)
    assert lines[("provider",)] == 2
    assert lines[("provider", "base_url")] == 3 and lines[("provider", "api_key_env")] == 4
    assert (lines[("deny",)], lines[("deny", 0)], lines[("deny", 1)]) == (6, 7, 8)
    assert lines[("note",)] == 10  # an escaped quote and a brace inside a string do not confuse it


def test_toml_tables_keys_and_each_case_at_its_own_header() -> None:
    lines = toml_key_lines(TOML)
    assert lines[("name",)] == 1 and lines[("notes",)] == 2
    assert ("key",) not in lines  # text inside a multi-line string is not a key
    assert lines[("build",)] == lines[("build", "cpu")] == 6
    assert lines[("build", "cpu", "sources")] == 7
    assert lines[("build", "cpu", "params", "c")] == lines[("build", "cpu", "params", "d")] == 8
    assert (lines[("cases", 0)], lines[("cases", 0, "name")]) == (10, 11)
    assert (lines[("cases", 1)], lines[("cases", 1, "name")]) == (13, 14)


def test_a_missing_key_points_at_its_nearest_parent() -> None:
    lines = json_key_lines(JSON)
    assert line_of(lines, ["provider", "model"]) == 2
    assert line_of(lines, ["deny", 5]) == 6
    assert line_of(lines, ["absent", "deeper"]) == 1


def test_key_paths_read_as_in_messages_and_every_string_is_visited() -> None:
    assert label_of(["provider", "base_url"]) == "provider.base_url"
    assert label_of(["deny", 0]) == "deny[0]" and label_of(["cases", 1, "name"]) == "cases[1].name"
    data = {"a": {"b": ["x", 3, {"c": "y"}]}, "n": 1}
    assert list(strings(data)) == [(("a", "b", 0), "x"), (("a", "b", 2, "c"), "y")]
