"""Build keys (bot/untrusted/build.py): what changes a build, what does not, and what is compiled again (no kernel
is built here)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.config.manifest_tables import BuildSpec
from bot.untrusted.build import Built, plan_units, same_binary, unit_flags, unit_key
from bot.untrusted.toolchain import toolchain
from bot.verdict.written import written_kernel


def build_key(folder: Path, spec: BuildSpec, config: dict[str, object], device: str, build_root: Path) -> object:
    """What `build` keys the linked extension by: the toolchain, its link flags and each object's `unit_key`."""
    tc = toolchain(device, build_root / "toolchain")
    keys = sorted(
        unit_key(folder, u, unit_flags(u, spec, config, tc), tc, device) for u in plan_units(folder, spec, device)
    )
    return (tc.key, tc.ldflags, keys)


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


def test_the_build_key_changes_with_sources_headers_tunables_and_flags(kernel_folder, tmp_path):
    key = build_key(kernel_folder, SPEC, CONFIG, "cpu", tmp_path)
    assert build_key(kernel_folder, SPEC, CONFIG, "cpu", tmp_path) == key  # stable
    assert build_key(kernel_folder, SPEC, {"tile_m": 64}, "cpu", tmp_path) != key
    assert build_key(kernel_folder, SPEC.model_copy(update={"cflags": ["-O2"]}), CONFIG, "cpu", tmp_path) != key
    assert build_key(kernel_folder, SPEC, CONFIG, "cuda", tmp_path) != key
    (kernel_folder / "body.h").write_text("int f(); // a header counts too\n")
    assert build_key(kernel_folder, SPEC, CONFIG, "cpu", tmp_path) != key


def test_the_build_key_ignores_files_that_are_not_compiled(kernel_folder, tmp_path):
    key = build_key(kernel_folder, SPEC, CONFIG, "cpu", tmp_path)
    (kernel_folder / "NOTES.md").write_text("changed notes\n")
    (kernel_folder / "reference.py").write_text("REF = 2\n")
    assert build_key(kernel_folder, SPEC, CONFIG, "cpu", tmp_path) == key


def test_a_cuda_only_edit_does_not_rebuild_the_cpu_twin(kernel_folder, tmp_path):
    cuda = BuildSpec(sources=["body.cu"], entry="f")
    (kernel_folder / "body.cu").write_text("__global__ void k() {}\n")
    cpu_key = build_key(kernel_folder, SPEC, CONFIG, "cpu", tmp_path)
    cuda_key = build_key(kernel_folder, cuda, CONFIG, "cuda", tmp_path)
    (kernel_folder / "body.cu").write_text("__global__ void k() { /* edited */ }\n")
    assert build_key(kernel_folder, SPEC, CONFIG, "cpu", tmp_path) == cpu_key
    assert build_key(kernel_folder, cuda, CONFIG, "cuda", tmp_path) != cuda_key


def test_the_build_key_follows_the_toolchain(kernel_folder, monkeypatch, tmp_path):
    key = build_key(kernel_folder, SPEC, CONFIG, "cpu", tmp_path)
    fake = tmp_path / "bin" / "fake-cxx"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\necho 'fake c++ 99.1'\n")
    fake.chmod(0o755)
    monkeypatch.setenv("CXX", str(fake))  # another compiler is another build
    assert build_key(kernel_folder, SPEC, CONFIG, "cpu", tmp_path) != key


def test_a_tunable_change_recompiles_the_kernel_body_but_never_the_binding(kernel_folder, tmp_path):
    (kernel_folder / "binding.cpp").write_text('#include <torch/extension.h>\n#include "body.h"\n')
    spec = BuildSpec(sources=["body.cpp", "binding.cpp"], cflags=["-O3"], entry="f")
    tc = toolchain("cpu", tmp_path)

    def keys(config: dict[str, object]) -> dict[str, str]:
        units = plan_units(kernel_folder, spec, "cpu")
        return {u.source: unit_key(kernel_folder, u, unit_flags(u, spec, config, tc), tc, "cpu") for u in units}

    before, after = keys(CONFIG), keys({"tile_m": 64})
    assert [u.binding for u in plan_units(kernel_folder, spec, "cpu")] == [False, True]
    assert after["binding.cpp"] == before["binding.cpp"]  # torch's translation unit: compiled once
    assert after["body.cpp"] != before["body.cpp"]
    (kernel_folder / "body.cpp").write_text("int f() { return 2; }\n")
    assert keys(CONFIG)["binding.cpp"] == before["binding.cpp"]  # a body edit leaves the binding alone too


def test_a_changed_cuda_source_leaves_the_kernel_undecided_on_a_cpu_runner_a_cpu_only_change_does_not():
    """On a runner without a GPU: a CUDA source changed -> "not judged" (coverage.not_judged_findings); a CPU-only
    change is judged by the CPU cases that ran, the unrun cuda cases merely skipped."""
    from bot.config.manifest import load_kernel
    from bot.config.manifest_tables import Constraints
    from bot.models.report import CaseReport, CaseStatus, KernelReport
    from bot.review.coverage import not_judged_findings
    from bot.untrusted.build import compiled_files
    from bot.verdict.findings import add_kernel
    from bot.verdict.gate import Policy, kernel_verdict

    k = load_kernel(Path(__file__).resolve().parent.parent / "kernels" / "deepgemm_tile")
    compiled = {d: compiled_files(k.folder, spec, d) for d, spec in k.manifest.build.items()}
    cases = [
        CaseReport(name="square_512", tolerance=0.01, verdict="pass", regression_pct=0.1, ci95_pct=[-0.5, 0.7]),
        CaseReport(name="gemm_4096", device="cuda", tolerance=0.01, verdict="skipped", status=CaseStatus.skipped,
                   reasons=["needs a CUDA GPU; this machine has none"]),
    ]  # fmt: skip
    folder = "kernels/deepgemm_tile"

    def judged(paths: list[str]) -> KernelReport:
        report = KernelReport(name="deepgemm_tile", domain="deepgemm", changed=True, verdict="skipped")
        for f in not_judged_findings(paths, folder, compiled, ["cpu"]):  # as the review adds them (verdict/kernel.py)
            add_kernel(report, f)
        return written_kernel(kernel_verdict(report, [], [c.model_copy() for c in cases], Constraints(), Policy()))

    cuda = judged([f"{folder}/gemm_cuda.cu"])
    assert cuda.undecided == [
        f"{folder}/gemm_cuda.cu: changed, compiled by no build that ran here (only [build.cuda], which needs a CUDA "
        "GPU): not judged"
    ]
    assert cuda.verdict == "undecided"  # never a green pass for the CUDA kernel nobody ran
    cpu_only = judged([f"{folder}/gemm_cpu.cpp", f"{folder}/tile_config.json"])
    assert cpu_only.undecided == [] and cpu_only.verdict == "pass"


def test_the_same_extension_bytes_called_the_same_way_are_the_same_binary():
    """A comment-only change has its own build key but compiles to base's very ext.so (issue 40, 4)."""
    base = Built(ok=True, device="cpu", key="k1", entry="gemm", so_path="/b/ext.so", sha256="ab" * 32)
    comment = base.model_copy(update={"key": "k2", "so_path": "/h/ext.so"})
    assert same_binary(base, comment) and same_binary(base, base)
    assert not same_binary(base, comment.model_copy(update={"sha256": "cd" * 32}))  # other bytes: timed
    assert not same_binary(base, comment.model_copy(update={"entry": "gemm_fast"}))  # another function of it
    assert not same_binary(base.model_copy(update={"sha256": ""}), comment.model_copy(update={"sha256": ""}))  # unknown
    assert not same_binary(base, comment.model_copy(update={"ok": False}))
