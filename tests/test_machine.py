"""The machine a review ran on (bot/edges/machine.py): how a GPU is named for baselines, and what is detected."""

from __future__ import annotations

import platform

import pytest

from bot.edges import machine


def test_a_gpu_is_named_by_its_model_and_architecture_and_by_its_model_alone_without_one():
    assert machine.device_key("NVIDIA H100 80GB HBM3", "sm_90") == "NVIDIA H100 80GB HBM3 · sm_90"
    assert machine.device_key("NVIDIA H100 80GB HBM3", None) == "NVIDIA H100 80GB HBM3"
    assert machine.device_key(None, None) == "cuda"
    assert machine.device_key("NVIDIA H100 80GB HBM3", "sm_90") != machine.device_key("NVIDIA H100 80GB HBM3", "sm_90a")


def test_without_a_gpu_the_machine_is_a_cpu_and_no_architecture_is_asked(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(machine, "gpu_name", lambda: None)
    monkeypatch.setattr(machine, "gpu_arch", lambda: pytest.fail("the architecture of no GPU was asked"))
    m = machine.detect()
    assert (m.device, m.gpu, m.arch, m.python) == ("cpu", None, None, platform.python_version())


def test_with_a_gpu_its_name_and_architecture_are_kept(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(machine, "gpu_name", lambda: "NVIDIA H200")
    monkeypatch.setattr(machine, "gpu_arch", lambda: "sm_90")
    m = machine.detect()
    assert (m.device, m.gpu, m.arch) == ("cuda", "NVIDIA H200", "sm_90")


def test_a_tool_that_is_missing_or_fails_is_unknown_never_an_error():
    assert machine._run("opgate-no-such-tool-here", "--version") is None
    assert machine._run("false") is None
    assert machine._run("echo", "12.4") == "12.4\n"
