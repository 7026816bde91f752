"""Timing you can trust: interleaving order, adaptive stopping, build-cache keys (no kernels built here)."""

from __future__ import annotations

import itertools
import json
import time
from pathlib import Path

import pytest

from bot.build import build_key
from bot.manifest import BuildSpec
from bot.runner.child import Events, measure

SETTINGS = {
    "warmup_ms": 1.0,
    "warmup_calls": 2,
    "min_blocks": 3,
    "max_samples": 40,
    "max_seconds": 5.0,
    "target_pct": 0.5,
}


def _busy(ms: float):
    def fn() -> None:
        end = time.perf_counter() + ms / 1e3
        while time.perf_counter() < end:
            pass

    return fn


def _run_measure(tmp_path: Path, fns: dict, settings: dict) -> dict:
    events_path = tmp_path / "events.jsonl"
    events = Events(str(events_path))
    measure(fns, "cpu", settings, events)
    events.close()
    return [json.loads(line) for line in events_path.read_text().splitlines()][-1]


def test_base_and_head_are_measured_in_alternating_blocks(tmp_path):
    calls: list[str] = []

    def recorder(label: str):
        def fn() -> None:
            calls.append(label)
            _busy(2.0)()

        return fn

    settings = {**SETTINGS, "max_samples": 30, "target_pct": 1e-9}  # never precise enough: run to the cap
    timing = _run_measure(tmp_path, {"base": recorder("base"), "head": recorder("head")}, settings)
    # Warm-up: 2 calls of base then 2 of head (2 ms each already exceed the 1 ms floor). Then blocks of k
    # calls in the order A B | B A | A B …, so after the first block every run of one label is 2k long.
    assert calls[:4] == ["base", "base", "head", "head"]
    runs = [(label, len(list(group))) for label, group in itertools.groupby(calls[4:])]
    k = runs[0][1]
    assert runs[0][0] == "base" and k >= 1
    assert [label for label, _ in runs] == ["base", "head"] * (len(runs) // 2) + ["base"] * (len(runs) % 2)
    assert all(n == 2 * k for _, n in runs[1:-1])  # ABBA: each side runs twice in a row at every turn
    assert len(runs) >= 4
    assert len(timing["samples_ms"]["base"]) == len(timing["samples_ms"]["head"]) >= 30
    assert timing["stop_reason"] == "max_samples"


def test_sampling_stops_once_the_ratio_is_precise(tmp_path):
    timing = _run_measure(
        tmp_path, {"base": _busy(1.0), "head": _busy(1.0)}, {**SETTINGS, "max_samples": 2000, "target_pct": 5.0}
    )
    assert timing["stop_reason"] == "precision"
    assert len(timing["samples_ms"]["head"]) < 2000


def test_sampling_stops_at_the_time_cap(tmp_path):
    started = time.perf_counter()
    timing = _run_measure(
        tmp_path,
        {"base": _busy(5.0), "head": _busy(5.0)},
        {**SETTINGS, "max_samples": 10**6, "target_pct": 1e-9, "max_seconds": 0.5},
    )
    assert timing["stop_reason"] == "max_seconds"
    assert time.perf_counter() - started < 3.0


@pytest.fixture
def kernel_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "k"
    folder.mkdir()
    (folder / "body.cpp").write_text("int f() { return 1; }\n")
    (folder / "body.h").write_text("int f();\n")
    (folder / "reference.py").write_text("REF = 1\n")
    (folder / "NOTES.md").write_text("notes\n")
    return folder


SPEC = BuildSpec(sources=["body.cpp"], cflags=["-O3"], entry="f")
CONFIG = {"tile_m": 128}


def test_the_build_key_changes_with_sources_headers_tunables_and_flags(kernel_folder):
    key = build_key(kernel_folder, SPEC, CONFIG, "cpu")
    assert build_key(kernel_folder, SPEC, CONFIG, "cpu") == key  # stable
    assert build_key(kernel_folder, SPEC, {"tile_m": 64}, "cpu") != key
    assert build_key(kernel_folder, SPEC.model_copy(update={"cflags": ["-O2"]}), CONFIG, "cpu") != key
    assert build_key(kernel_folder, SPEC, CONFIG, "cuda") != key
    (kernel_folder / "body.h").write_text("int f(); // a header counts too\n")
    assert build_key(kernel_folder, SPEC, CONFIG, "cpu") != key


def test_the_build_key_ignores_files_that_are_not_compiled(kernel_folder):
    key = build_key(kernel_folder, SPEC, CONFIG, "cpu")
    (kernel_folder / "NOTES.md").write_text("changed notes\n")
    (kernel_folder / "reference.py").write_text("REF = 2\n")
    assert build_key(kernel_folder, SPEC, CONFIG, "cpu") == key


def test_a_cuda_only_edit_does_not_rebuild_the_cpu_twin(kernel_folder):
    cuda = BuildSpec(sources=["body.cu"], entry="f")
    (kernel_folder / "body.cu").write_text("__global__ void k() {}\n")
    cpu_key, cuda_key = build_key(kernel_folder, SPEC, CONFIG, "cpu"), build_key(kernel_folder, cuda, CONFIG, "cuda")
    (kernel_folder / "body.cu").write_text("__global__ void k() { /* edited */ }\n")
    assert build_key(kernel_folder, SPEC, CONFIG, "cpu") == cpu_key
    assert build_key(kernel_folder, cuda, CONFIG, "cuda") != cuda_key


def test_the_build_key_follows_the_toolchain(kernel_folder, monkeypatch, tmp_path):
    key = build_key(kernel_folder, SPEC, CONFIG, "cpu")
    fake = tmp_path / "bin" / "fake-cxx"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\necho 'fake c++ 99.1'\n")
    fake.chmod(0o755)
    monkeypatch.setenv("CXX", str(fake))  # another compiler is another build
    assert build_key(kernel_folder, SPEC, CONFIG, "cpu") != key
