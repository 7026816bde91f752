"""benchmarks/kernels_vs_torch.py end to end on the CPU cases (--device cpu): the GPU benchmark's plumbing,
built, judged and timed by opgate's own judge exactly as on the GPU, with torch's CPU kernels as baselines."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.untimed  # statuses and p50 > 0, no verdict
def test_the_benchmark_times_each_headline_case_and_its_torch_baseline_through_the_judge(tmp_path, build_dir):
    env = {**os.environ, "OPGATE_BUILD_DIR": str(build_dir), "GPU_CHECK_STEP_JSON": str(tmp_path / "step.json")}
    argv = [sys.executable, "-m", "benchmarks.kernels_vs_torch", "--device", "cpu", "--mode", "time", "--quick"]
    proc = subprocess.run([*argv, "--out", str(tmp_path)], cwd=ROOT, env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    cases = json.loads((tmp_path / "kernels_vs_torch.json").read_text())["cases"]
    assert set(cases) == {
        "deepgemm_tile/square_512",
        "flashmla_decode/decode_128",
        "v41_attention_splitk/cpu_causal_512",
    }
    for row in cases.values():
        assert row["check"]["status"] == "ok" and row["check"]["max_abs_err"] <= 1e-2
        assert row["kernel"]["status"] == "ok" and row["kernel"]["p50_ms"] > 0 and row["kernel"]["spot_failures"] == 0
    for key in ("deepgemm_tile/square_512", "v41_attention_splitk/cpu_causal_512"):
        baseline = cases[key]["baseline"]
        assert baseline["status"] == "ok" and baseline["check"]["status"] == "ok"  # torch computed the same function
        assert cases[key]["rates"]["pct_of_baseline"] > 0
    assert cases["flashmla_decode/decode_128"]["rates"]["unit"] == "byte"
    step = json.loads((tmp_path / "step.json").read_text())
    assert step["status"] == "passed" and "square_512" in step["reason"]
    assert any(line.startswith("| deepgemm_tile | square_512 | yes") for line in step["markdown"])
