"""gpu-check's GPU steps (scripts/gpucheck/gpu_tasks.py) on a machine without a GPU: the first error of a build log,
the scratch repository a review runs on, and each measured CUDA case as one row of the summary."""

from __future__ import annotations

import subprocess
from pathlib import Path

from scripts.gpucheck import gpu_tasks


def test_the_first_line_naming_an_error_is_the_builds_one_line_reason():
    log = "[1/3] c++ -c gemm.cpp\nFAILED: gemm_errors.o\na.cpp:3:5: error: `tile` was not declared\n"
    assert gpu_tasks.first_error(log) == "a.cpp:3:5: error: 'tile' was not declared"
    assert gpu_tasks.first_error("linking\nld returned 1\n\n") == "ld returned 1"
    assert gpu_tasks.first_error("") == "no output"
    assert len(gpu_tasks.first_error("error: " + "x" * 500, limit=50)) <= 50


def test_the_scratch_repository_holds_a_copy_of_the_kernels_in_one_commit(tmp_path: Path):
    base = gpu_tasks.scratch_repo(tmp_path / "scratch", ["deepgemm_tile"])
    files = subprocess.run(["git", "-C", str(tmp_path / "scratch"), "ls-files"], capture_output=True, text=True)
    assert "kernels/deepgemm_tile/kernel.toml" in files.stdout.split() and "README.md" in files.stdout.split()
    head = subprocess.run(["git", "-C", str(tmp_path / "scratch"), "rev-parse", "HEAD"], capture_output=True, text=True)
    assert head.stdout.strip() == base and len(base) == 40
    again = gpu_tasks.scratch_repo(tmp_path / "scratch", [])  # made again from nothing
    files = subprocess.run(["git", "-C", str(tmp_path / "scratch"), "ls-files"], capture_output=True, text=True)
    assert files.stdout.split() == ["README.md"] and again != base


def test_each_cuda_case_of_a_kernel_is_one_row_with_its_figures_and_reasons():
    report = {
        "kernels": [
            {"name": "other", "cases": [{"name": "x", "device": "cuda"}]},
            {"name": "deepgemm_tile", "cases": [
                {"name": "square_512", "device": "cuda", "status": "ok", "verdict": "fail", "max_abs_err": 0.0012,
                 "p50_ms": 2.25, "base_p50_ms": 2.0, "ci95_pct": [10.5, 14.0], "reasons": ["latency +12.5% | slow"]},
                {"name": "tiny", "device": "cpu", "status": "ok", "verdict": "pass"},
            ]},
        ]
    }  # fmt: skip
    rows = gpu_tasks.case_rows(report, "deepgemm_tile")
    assert [c["name"] for c in rows] == ["square_512"] and gpu_tasks.case_rows(report, "missing") == []
    assert gpu_tasks._case_line("deepgemm_tile", rows[0]) == (
        "| deepgemm_tile | square_512 | ok | fail | 0.0012 | 2 → 2.25 | [+10.50, +14.00] | latency +12.5% / slow |"
    )
    bare = {"name": "tiny", "status": "crashed", "verdict": "error"}
    assert gpu_tasks._case_line("k", bare) == "| k | tiny | crashed | error | — | — → — | — | — |"
