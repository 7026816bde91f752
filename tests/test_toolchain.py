"""The toolchain a build uses (bot/untrusted/toolchain.py): the runner's compiler, probed once and then read from
the build cache; how the build key follows it is tested in tests/test_build.py."""

from __future__ import annotations

import json
import os
import subprocess
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


def test_a_cold_probe_answers_both_devices_at_once(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """One torch import for a cold review or check, which needs the CPU build's flags and the resource check's nvcc
    flags: the probe that answers the first caches the other device too (where nvcc is on the PATH)."""
    nvcc = tmp_path / "bin" / "nvcc"
    nvcc.parent.mkdir()
    nvcc.write_text("#!/bin/sh\necho 'Cuda compilation tools, release 99.9'\n")
    nvcc.chmod(0o755)
    monkeypatch.setenv("PATH", f"{nvcc.parent}:{os.environ['PATH']}")
    calls: list[list[str]] = []
    real = subprocess.run

    def counted(argv: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
        if "bot.untrusted.toolchain" in argv:
            calls.append(list(argv))
        return real(argv, **kwargs)  # type: ignore[call-overload,no-any-return]

    monkeypatch.setattr(tc_module.subprocess, "run", counted)
    cpu = toolchain("cpu", tmp_path / "cache")
    cuda = toolchain("cuda", tmp_path / "cache")
    assert len(calls) == 1 and calls[0][-2:] == ["cpu", "cuda"]
    assert cpu.device == "cpu" and cpu.nvcc is None and cuda.device == "cuda" and cuda.nvcc == str(nvcc)
    assert cuda.versions["nvcc"].startswith("Cuda compilation tools") and cuda.key != cpu.key


def test_the_probe_never_imports_the_working_directorys_bot_package(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    """opgate's own repository has a bot/ at its root: a pull request's copy of the probe must not run outside the
    sandbox because the review was started in its checkout (`python -P`)."""
    fake = tmp_path / "repo" / "bot" / "untrusted"
    fake.mkdir(parents=True)
    for init in (fake.parent / "__init__.py", fake / "__init__.py"):
        init.write_text("")
    marker = tmp_path / "ran"
    (fake / "toolchain.py").write_text(f"open({str(marker)!r}, 'w').close()\nprint('{{}}')\n")
    monkeypatch.chdir(tmp_path / "repo")
    tc = toolchain("cpu", tmp_path / "cache")
    assert tc.binding_cflags and not marker.exists()
