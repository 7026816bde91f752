"""gpu-check's summaries (scripts/gpucheck/render.py): one row per step, and the JSON with its schema and counts."""

from __future__ import annotations

import json

from scripts.gpucheck.render import render_json, render_markdown
from tests.gpucheck_world import results

META = {
    "started": "2026-12-01 10:00 UTC",
    "commit": "abc1234",
    "mode": "full",
    "budget_s": 450,
    "elapsed_s": 231.4,
    "machine": {"gpu": "NVIDIA H200", "driver": "580.159.04", "torch": "2.11.0+cu130", "nvcc": "13.0.48"},
}


def test_the_summary_has_one_row_per_step_with_status_seconds_and_reason():
    md = render_markdown(results(), META)
    assert "Commit `abc1234` · mode full · budget 450 s, 231 s used · 2 passed, 1 failed, 1 skipped" in md
    assert "Machine: GPU NVIDIA H200 · driver 580.159.04 · torch 2.11.0+cu130 · nvcc 13.0.48" in md
    rows = [line for line in md.splitlines() if line.startswith("| ") and not line.startswith("| step")]
    assert rows[0] == "| machine | passed | 3.2 | a GPU | NVIDIA H200 (sm_90) |"
    # a reason with a pipe and a newline stays inside its cell
    assert (
        rows[1]
        == "| build | **failed** | 88.0 | extensions build | did not build: flashmla_decode (cuda) \\| nvcc error |"
    )
    assert rows[2] == "| pytest | skipped | — | pytest -m gpu | out of time: needs about 240 s, 12 s left |"
    assert "## bench\n\n| x |" in md


def test_the_json_summary_has_its_schema_counts_and_every_step():
    data = json.loads(render_json(results(), META))
    assert data["schema"] == "opgate.gpu-check/1"
    assert data["counts"] == {"passed": 2, "failed": 1, "skipped": 1}
    assert [s["name"] for s in data["steps"]] == ["machine", "build", "pytest", "bench"]
    assert data["steps"][0]["details"] == {"gpu": "NVIDIA H200"} and data["machine"]["torch"] == "2.11.0+cu130"
