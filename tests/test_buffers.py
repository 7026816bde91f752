"""Entries that write into their arguments: the call's layout, the poison, and the judge reading the buffers it named.

The extension (tests/data/out_ext.c) is `mul(A, B, C, s, workspace)`: it writes C = (A @ B) * s in place and returns
nothing; workspace is scratch that must arrive zeroed. Variants leave C's last element unwritten, return the answer
instead of writing it, or point C at a fresh tensor: each must fail, naming the element the judge still finds poisoned.
"""

from __future__ import annotations

import math
import subprocess
import sysconfig
from pathlib import Path
from typing import Any

import pytest
import torch

from bot.config.manifest_tables import Case, Constraints
from bot.models.judging import JudgeJob, MeasureSettings, ReferenceSource
from bot.models.report import CaseReport, CaseStatus
from bot.untrusted.runner import buffers
from bot.untrusted.runner.spawn import new_secret, run_cases
from bot.verdict.gate import case_verdict
from bot.verdict.written import written_case
from bot.wording.messages import phrase
from tests.conftest import only_latency_can_fail

ROOT = Path(__file__).resolve().parent.parent
ARGUMENTS = ["A", "B", "C", "s", "workspace"]
C = {"name": "C", "role": "output", "shape": [200, 328], "dtype": "float32"}
WORKSPACE = {"name": "workspace", "role": "scratch", "shape": [5], "dtype": "int32"}
CASE = Case(name="mul", device="cpu", dtype="float32", shape={"m": 200, "n": 328, "k": 16})
REFERENCE = '''"""C = (A @ B) * s, the expected output argument."""
import torch


def make_inputs(case, device, seed):
    gen = torch.Generator().manual_seed(seed)
    m, n, k = (case["shape"][d] for d in "mnk")
    a = torch.randint(-3, 4, (m, k), generator=gen).float()
    b = torch.randint(-3, 4, (k, n), generator=gen).float()
    s = torch.full((n,), 0.25)
    return a.to(device), b.to(device), s.to(device)


def reference(a, b, s):
    return (a @ b) * s
'''


def judged_case(*args: Any, **kw: Any) -> CaseReport:
    """`case_verdict`'s report as report.json states it (its findings' lines written)."""
    return written_case(case_verdict(*args, **kw))


def test_the_layout_places_inputs_buffers_and_scalars_where_arguments_names_them():
    lay = buffers.layout(["C", "A", "alpha", "B", "workspace"], ["alpha"], [C, WORKSPACE])
    assert lay is not None
    assert lay.inputs == ["A", "B"]
    # the set is A, B (make_inputs' tensors), then C, workspace (the judge's buffers); alpha is args[0]
    assert lay.call == [("t", 2), ("t", 0), ("a", 0), ("t", 1), ("t", 3)]
    assert lay.writes == [2]
    assert buffers.layout([], ["alpha"], []) is None  # no `arguments`: entry(*inputs, *args) as before


def test_outputs_are_poisoned_and_scratch_is_zeroed_on_the_cases_device():
    lay = buffers.layout(ARGUMENTS, [], [C, WORKSPACE, {**C, "name": "D", "dtype": "int16", "shape": [3]}])
    assert lay is not None
    out, work, ints = buffers.allocate(lay, "cpu")
    assert out.shape == (200, 328) and out.dtype == torch.float32 and bool(out.isnan().all())
    assert work.dtype == torch.int32 and int(work.abs().sum()) == 0
    assert ints.view(torch.uint8).tolist() == [0x5A] * 6  # every byte of an integer output is 0x5A
    assert buffers.unwritten(math.nan, "float32") and not buffers.unwritten(3.25, "float32")
    assert buffers.unwritten(float(0x5A5A), "int16") and not buffers.unwritten(7.0, "int16")


def test_make_inputs_and_the_reference_must_fit_the_arguments_kernel_toml_names():
    lay = buffers.layout(ARGUMENTS, [], [C, WORKSPACE])
    assert lay is not None
    assert buffers.input_mismatch(lay, 3) is None
    assert "name 3 input(s) (A, B, s)" in (buffers.input_mismatch(lay, 2) or "")
    assert buffers.reference_mismatch(lay, [torch.zeros(200, 328)]) is None
    wrong = buffers.reference_mismatch(lay, [torch.zeros(200, 327)])
    assert wrong == "returned C of shape [200, 327], but [buffers.C] gives [200, 328]"


@pytest.fixture(scope="module")
def out_ext(tmp_path_factory: pytest.TempPathFactory):
    """Build out_ext.c with the given variant; one .so per variant."""
    folder = tmp_path_factory.mktemp("out_ext")
    built: dict[str, Path] = {}

    def make(*defines: str) -> Path:
        name = "-".join(defines) or "right"
        if name not in built:
            so = folder / f"out_{name}.so"
            flags = [*(f"-D{d}" for d in defines), f"-I{sysconfig.get_path('include')}"]
            source = ROOT / "tests/data/out_ext.c"
            subprocess.run(["gcc", "-shared", "-fPIC", "-O1", *flags, str(source), "-o", str(so)], check=True)
            built[name] = so
        return built[name]

    return make


def _job(tmp_path: Path, sides: dict[str, Path], reference: str = REFERENCE, device: str = "cpu") -> JudgeJob:
    ref = tmp_path / "reference.py"
    ref.write_text(reference)
    case = {**CASE.model_dump(), "device": device, "tolerance": 1e-2, "max_regression_pct": 50.0}
    return JudgeJob(
        kernel="mul",
        reference=ReferenceSource(path=str(ref), shown="ops/reference.py"),
        cases=[{**case, "buffers": [C, WORKSPACE]}],
        sides={label: {device: str(so)} for label, so in sides.items()},
        module="opgate_ext",
        entry="mul",
        arguments=ARGUMENTS,
        measure=MeasureSettings(max_seconds=0.5, min_blocks=2, min_processes=2, max_processes=2, target_pct=30.0),
        timeout_s=60,
        secret=new_secret(),
    )


@pytest.mark.slow
@pytest.mark.untimed
def test_an_entry_that_writes_its_output_argument_passes_and_is_timed_with_spot_checks(tmp_path, out_ext):
    so = out_ext()
    run = run_cases(_job(tmp_path, {"base": so, "head": so}))["mul"]
    assert run.status == CaseStatus.ok, run.detail
    head = run.checks["head"]
    assert head.max_abs_err == 0.0 and [o.name for o in head.outputs] == ["C"]
    assert run.spots["head"].checked >= 1 and run.spots["head"].failed == 0  # every timed block's C was read
    report = judged_case(CASE, Constraints(max_regression_pct=50.0), run)
    assert only_latency_can_fail(report) and report.p50_ms is not None, report.reasons


@pytest.mark.slow
@pytest.mark.untimed
@pytest.mark.parametrize("variant", ["UNWRITTEN_LAST", "RETURNS", "REBIND"])
def test_an_element_the_kernel_never_writes_fails_naming_it(tmp_path, out_ext, variant):
    """The judge reads the buffer it allocated and named C: a returned answer or a C pointed elsewhere is not it."""
    run = run_cases(_job(tmp_path, {"base": out_ext(), "head": out_ext(variant)}))["mul"]
    assert run.status == CaseStatus.ok, run.detail
    report = judged_case(CASE, Constraints(max_regression_pct=50.0), run)
    assert report.verdict == "fail"
    first = "C[199, 327]" if variant == "UNWRITTEN_LAST" else "C[0, 0]"
    assert report.failure is not None and report.failure.unwritten and report.failure.output == "C"
    assert any(
        f"output C has elements the kernel never wrote, first at {first}: got NaN (never written), reference " in r
        for r in report.reasons
    ), report.reasons
    assert run.checks["base"].failure is None  # base wrote every element
    assert "head" not in run.timings  # a wrong side is not timed


@pytest.mark.slow
@pytest.mark.untimed
def test_a_reference_that_does_not_fit_the_output_arguments_is_named_as_the_references_fault(tmp_path, out_ext):
    wrong = REFERENCE.replace("return (a @ b) * s", "return (a @ b)[:, :-1]")
    run = run_cases(_job(tmp_path, {"head": out_ext()}, wrong))["mul"]
    assert run.status == CaseStatus.crashed and run.failed_label == "the reference"
    assert phrase(run.detail) == (
        "ops/reference.py: reference() returned C of shape [200, 327], but [buffers.C] gives [200, 328] (case mul)"
    )


@pytest.mark.gpu
@pytest.mark.slow
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU and a CUDA build of torch")
@pytest.mark.parametrize("variant", ["", "UNWRITTEN_LAST", "REBIND"])
def test_on_a_gpu_the_judge_fetches_the_output_arguments_it_allocated(tmp_path, out_ext, variant):
    run = run_cases(_job(tmp_path, {"base": out_ext(), "head": out_ext(*filter(None, [variant]))}, device="cuda"))
    report = judged_case(CASE.model_copy(update={"device": "cuda"}), Constraints(max_regression_pct=50.0), run["mul"])
    if not variant:
        assert not any(r.startswith(("correctness", "stability")) for r in report.reasons), report.reasons
        return
    first = [199, 327] if variant == "UNWRITTEN_LAST" else [0, 0]
    assert report.failure is not None and report.failure.unwritten and report.failure.index == first
