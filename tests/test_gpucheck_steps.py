"""The step runner of gpu-check (scripts/gpucheck/steps.py): failures, needs, the budget, limits, a step's own
report."""

from __future__ import annotations

import time
from pathlib import Path

from scripts.gpucheck.steps import Runner
from tests.gpucheck_world import ROOT, step


def runner(tmp_path: Path, budget: float = 300) -> Runner:
    return Runner(ROOT, tmp_path / "work", budget, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)})


def test_a_failing_step_does_not_stop_the_next_one(tmp_path):
    r = runner(tmp_path)
    first = r.run(step("first", "import sys; print('compiling'); print('nvcc fatal: bad flag'); sys.exit(3)"))
    second = r.run(step("second", "print('ok')"))
    assert (first.status, first.exit_code) == ("failed", 3)
    assert first.reason == "exit 3: nvcc fatal: bad flag"
    assert second.status == "passed" and second.reason == ""
    assert (tmp_path / "work" / first.log).read_text() == "compiling\nnvcc fatal: bad flag\n"


def test_a_step_whose_need_did_not_pass_is_skipped_with_the_reason(tmp_path):
    r = runner(tmp_path)
    r.run(step("setup", "raise SystemExit(1)"))
    r.skip(step("ncu", ""), "not part of --quick")
    assert r.run(step("build", "", needs=("setup",))).reason == "needs setup, which failed"
    assert r.run(step("profile", "", needs=("ncu",))).reason == "needs ncu, which was skipped"
    assert r.run(step("other", "", needs=("nothing",))).reason == "needs nothing, which was not run"


def test_a_step_that_does_not_fit_the_budget_is_skipped_and_names_its_rerun(tmp_path):
    r = runner(tmp_path, budget=60)
    result = r.run(step("pytest", "print('never')", estimate=240))
    assert result.status == "skipped"
    assert result.reason.startswith("out of time: needs about 240 s, ")
    assert result.reason.endswith("(run it alone: --steps pytest)")
    assert not (tmp_path / "work" / "logs" / "pytest.log").exists()


def test_a_step_past_its_limit_is_stopped_with_its_whole_process_group(tmp_path):
    marker = tmp_path / "grandchild-alive"
    (tmp_path / "late.py").write_text(f"import time\ntime.sleep(3)\nopen({str(marker)!r}, 'w')\n")
    code = (
        f"import subprocess, sys, time; subprocess.Popen([sys.executable, {str(tmp_path / 'late.py')!r}]); "
        "print('building gemm_cuda.cu', flush=True); time.sleep(60)"
    )
    r = runner(tmp_path)
    started = time.monotonic()
    result = r.run(step("build", code, limit=1.5))
    assert time.monotonic() - started < 10
    assert result.status == "failed"
    assert result.reason == "stopped at its time limit of 2 s; last output: building gemm_cuda.cu"
    time.sleep(3.5)
    assert not marker.exists()  # the step's children went with it


def test_a_step_reports_its_own_status_reason_details_and_lines(tmp_path):
    code = (
        "from scripts.gpucheck.steps import write_step_json; "
        "write_step_json('skipped', 'ncu is not on the PATH', {'ncu': None}, ['| a | b |'])"
    )
    result = runner(tmp_path).run(step("ncu", code))
    assert (result.status, result.reason) == ("skipped", "ncu is not on the PATH")
    assert result.details == {"ncu": None} and result.markdown == ["| a | b |"]


def test_a_step_that_crashes_is_failed_even_if_it_had_written_passed(tmp_path):
    code = (
        "import os; from scripts.gpucheck.steps import write_step_json; write_step_json('passed', 'so far so good'); "
        "os.abort()"
    )
    result = runner(tmp_path).run(step("cases", code))
    assert result.status == "failed" and result.exit_code is not None and result.exit_code < 0
