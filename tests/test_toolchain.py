"""The toolchain a build uses (bot/untrusted/toolchain.py): the runner's compiler, probed once and then read from
the build cache; how the build key follows it is tested in tests/test_build.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bot.errors import BuildError
from bot.untrusted import toolchain as tc_module
from bot.untrusted.toolchain import toolchain


def test_the_toolchain_is_probed_once_and_then_read_from_the_cache(tmp_path: Path):
    first = toolchain("cpu", tmp_path)
    assert first.device == "cpu" and first.nvcc is None and first.key and first.binding_cflags
    assert first.versions["cxx"] not in ("missing", "unknown")
    [cached] = list(tmp_path.glob("toolchain-cpu-*.json"))
    data = json.loads(cached.read_text())
    cached.write_text(json.dumps({**data, "ldflags": ["-lmarked"]}))
    assert toolchain("cpu", tmp_path).ldflags == ["-lmarked"]  # read back, not probed again
    cached.write_text("{not json")
    assert toolchain("cpu", tmp_path) == first  # a broken cache file is probed again


def test_the_runners_cxx_is_used_and_a_missing_one_is_a_build_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    monkeypatch.setenv("CXX", "opgate-no-such-compiler")
    with pytest.raises(BuildError, match=r"no C\+\+ compiler \(opgate-no-such-compiler\) on the PATH"):
        toolchain("cpu", tmp_path)


def test_a_cuda_build_without_nvcc_is_a_build_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    monkeypatch.setattr(tc_module, "_compilers", lambda: ("/usr/bin/c++", None))
    with pytest.raises(BuildError, match="nvcc is not on the PATH"):
        toolchain("cuda", tmp_path)
