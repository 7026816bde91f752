"""scripts/gpu-check.sh on a machine without a GPU: its arguments, its plan and its output folder
(python -m scripts.gpucheck); the step runner and the summaries are in test_gpucheck_steps.py and
test_gpucheck_render.py.

What needs a GPU (the steps' own work) is not run here; the runner is driven with small real commands.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import json
import shutil
import subprocess
import sys
import tarfile

import pytest

from scripts.gpucheck.__main__ import collect, plan, select
from tests.gpucheck_world import PY, ROOT, results

SCRIPT = ROOT / "scripts" / "gpu-check.sh"


def gpu_check(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/bin:/bin", "PYTHON": PY, "HOME": "/tmp"}
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, timeout=timeout, env=env)


# -- where it lives --------------------------------------------------------------------------------------


def test_every_steps_module_is_found_from_the_repository_root_as_the_script_runs_it():
    """The steps run as `python -m <module>` from the checkout (scripts/gpucheck/ is not installed with opgate):
    each module a step names imports there, in a fresh interpreter, as does the orchestrator itself."""
    modules = sorted({s.argv[s.argv.index("-m") + 1] for s in plan(PY, quick=False)} | {"scripts.gpucheck.__main__"})
    code = "import importlib, sys\nfor m in sys.argv[1:]: importlib.import_module(m)"
    proc = subprocess.run([PY, "-c", code, *modules], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


def test_every_name_the_steps_import_from_opgate_exists():
    """The GPU steps import opgate inside their functions (it is installed by the setup step), so a moved or renamed
    name would fail only on the GPU machine: each one is checked here."""
    missing = []
    for path in [*sorted((ROOT / "scripts" / "gpucheck").glob("*.py")), ROOT / "benchmarks" / "kernels_vs_torch.py"]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in ("bot", "scripts"):
                module = importlib.import_module(node.module)
                missing += [
                    f"{path.name}: {node.module}.{a.name}"
                    for a in node.names
                    if not hasattr(module, a.name)
                    and not (hasattr(module, "__path__") and importlib.util.find_spec(f"{node.module}.{a.name}"))
                ]
    assert missing == []


# -- arguments -----------------------------------------------------------------------------------------


def test_quick_runs_machine_to_bench_and_says_the_rest_are_not_part_of_it():
    steps, left_out = select(plan(PY, quick=True), quick=True, only=[])
    assert [s.name for s in steps] == ["machine", "setup", "sandbox", "build", "cases", "bench"]
    assert left_out == dict.fromkeys(["ncu", "review", "example", "pytest"], "not part of --quick")
    bench = next(s for s in steps if s.name == "bench")
    assert bench.argv[-1] == "--quick"  # the benchmark's headline cases only


def test_the_full_run_keeps_every_step_most_telling_first():
    steps, left_out = select(plan(PY, quick=False), quick=False, only=[])
    assert not left_out
    names = [s.name for s in steps]
    assert names[:4] == ["machine", "setup", "sandbox", "build"] and names[-1] == "pytest"
    assert all(s.needs == ("machine", "setup") for s in steps[2:])


def test_steps_runs_the_named_steps_and_what_they_need():
    steps, left_out = select(plan(PY, quick=False), quick=False, only=["review"])
    assert [s.name for s in steps] == ["machine", "setup", "review"]
    assert left_out["bench"] == "not asked for (--steps)"


def test_an_unknown_step_is_one_line_and_exit_2():
    proc = gpu_check("--steps", "bench,warp-drive")
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "gpu-check: error: unknown step warp-drive (steps: machine, setup, sandbox, build, cases, bench, ncu, "
        "review, example, pytest)"
    ]


@pytest.mark.parametrize("budget", ["0", "-5", "99999", "soon"])
def test_a_budget_outside_an_hour_is_refused_with_exit_2(budget):
    proc = gpu_check("--budget", budget)
    assert proc.returncode == 2 and "--budget" in proc.stderr


def test_list_prints_the_plan_and_runs_nothing(tmp_path):
    proc = gpu_check("--quick", "--list", "--work", str(tmp_path / "work"))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("machine ") and "at most 90 s" in lines[0]
    assert any(line.startswith("pytest ") and "left out: not part of --quick" in line for line in lines)
    assert lines[-1] == "budget 300 s"
    assert not (tmp_path / "work").exists()


def test_it_refuses_to_clear_a_folder_it_did_not_make(tmp_path):
    precious = tmp_path / "mine"
    precious.mkdir()
    (precious / "notes.txt").write_text("keep me")
    proc = gpu_check("--steps", "machine", "--work", str(precious))
    assert proc.returncode == 2 and "refusing to clear" in proc.stderr
    assert (precious / "notes.txt").read_text() == "keep me"


def test_without_a_gpu_the_machine_step_fails_and_the_gpu_steps_say_so(tmp_path):
    out = tmp_path / "out"
    proc = gpu_check("--steps", "machine,sandbox", "--work", str(tmp_path / "work"), "--out", str(out))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    report = json.loads((out / "gpu-check.json").read_text())
    steps = {s["name"]: s for s in report["steps"]}
    assert steps["machine"]["status"] == "failed" and "torch sees no CUDA GPU" in steps["machine"]["reason"]
    assert steps["machine"]["details"]["python"] == ".".join(map(str, sys.version_info[:3]))
    assert steps["setup"]["status"] == "passed"  # pulled in by --steps sandbox; opgate is installed here
    assert steps["sandbox"] == steps["sandbox"] | {"status": "skipped", "reason": "needs machine, which failed"}
    assert steps["bench"]["reason"] == "not asked for (--steps)"
    assert "| machine | **failed** |" in (out / "gpu-check.md").read_text()
    assert "| machine | **failed** |" in proc.stdout  # the summary ends the output (what a device call shows)


# -- the step runner -----------------------------------------------------------------------------------


def test_without_a_gpu_the_pytest_step_is_skipped_with_pytests_own_reason(tmp_path):
    env = {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "GPU_CHECK_WORK": str(tmp_path), "PYTHONPATH": str(ROOT)}
    env["GPU_CHECK_STEP_JSON"] = str(tmp_path / "step.json")
    proc = subprocess.run([PY, "-m", "scripts.gpucheck.gpu_tasks", "pytest"], cwd=ROOT, env=env, capture_output=True)
    assert proc.returncode == 0, proc.stdout.decode()[-2000:]
    step = json.loads((tmp_path / "step.json").read_text())
    assert step["status"] == "skipped"
    assert step["reason"].startswith("every gpu test skipped: ") and "needs a CUDA GPU" in step["reason"]


# -- the summary and the output folder -----------------------------------------------------------------


def test_the_output_folder_gets_the_summaries_and_one_tarball_of_every_log(tmp_path):
    work, out = tmp_path / "work", tmp_path / "out"
    for name in ("gpu-check.md", "gpu-check.json", "kernels_vs_torch.md", "kernels_vs_torch.json"):
        (work / name).parent.mkdir(parents=True, exist_ok=True)
        (work / name).write_text(name)
    for i in range(12):
        (work / "logs" / f"step{i}.log").parent.mkdir(exist_ok=True)
        (work / "logs" / f"step{i}.log").write_text(f"log {i}")
    (work / "build" / "ext").mkdir(parents=True)
    (work / "build" / "ext" / "ext.so").write_bytes(b"\0" * 1000)
    written = collect(work, out, results())
    assert sorted(p.name for p in out.iterdir()) == sorted(p.name for p in written)
    assert len(written) <= 8  # what a device call brings back
    with tarfile.open(out / "gpu-check-logs.tar.gz") as tar:
        names = tar.getnames()
    assert "gpu-check/logs/step11.log" in names and not any("build" in n for n in names)


@pytest.mark.skipif(shutil.which("shellcheck") is None, reason="shellcheck is not installed (apt install shellcheck)")
def test_the_scripts_pass_shellcheck():
    proc = subprocess.run(["shellcheck", str(SCRIPT), str(ROOT / "scripts" / "gpu-wheels.sh")], capture_output=True)
    assert proc.returncode == 0, proc.stdout.decode()


def test_the_scripts_parse_as_bash():
    for script in (SCRIPT, ROOT / "scripts" / "gpu-wheels.sh"):
        assert subprocess.run(["bash", "-n", str(script)]).returncode == 0
