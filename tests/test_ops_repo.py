"""Ops as repositories write them (issue 54, parts 5 and 6), through `opgate review` and `opgate check` on
tests/fixtures/ops_repo: an optional tensor a case leaves out crosses to the worker as None and is judged like any
other argument; `opgate check`'s reference-only run passes the case's `args` scalars; a `.cu` that includes torch's
CUDA headers, on this machine's CPU build of torch, is undecided naming the header and the fix, never a fail."""

from __future__ import annotations

import shutil

import pytest

from bot.models.report import CaseReport
from tests.conftest import only_latency_can_fail
from tests.ops_repo import make_ops_repo

pytestmark = [pytest.mark.slow, pytest.mark.untimed]

NVCC = shutil.which("nvcc") is not None
needs_nvcc = pytest.mark.skipif(not NVCC, reason="nvcc is not on the PATH")
TORCH_CUDA = (
    "#include of torch's CUDA headers; c10/cuda/impl/cuda_cmake_macros.h is not in this runner's torch (its CPU "
    "build); install torch's CUDA build on the runner: it installs and compiles without a GPU"
)


def _cpu_torch() -> bool:
    import torch

    return torch.version.cuda is None


needs_cpu_torch = pytest.mark.skipif(not _cpu_torch(), reason="torch's CUDA build is installed: its headers compile")


def _lines(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if line.startswith("  ")]


def test_an_optional_tensor_a_case_leaves_out_is_passed_as_none_and_both_cases_are_judged_correct(opgate, tmp_path):
    repo = make_ops_repo(tmp_path / "repo")
    repo.edit("ops/bias_act/bias_act.cpp", "// The body:", "// The kernel body:")
    run = opgate("review", "--repo", str(repo.path), "--base", repo.base, "--head", repo.commit("a comment"),
                 "--offline")  # fmt: skip
    assert run.code in (0, 1), run.stdout + run.stderr
    kernel = run.kernel("bias_act")
    by_name = {c["name"]: c for c in kernel["cases"]}
    assert set(by_name) == {"no_bias", "bias"}  # make_inputs returns None for the bias in no_bias, a tensor in bias
    for name, case in by_name.items():
        assert case["status"] == "ok", (name, case["reasons"])
        assert case["max_abs_err"] is not None and case["max_abs_err"] <= 1e-5, name
        assert only_latency_can_fail(CaseReport.model_validate(case)), (name, case["reasons"])


@needs_nvcc
@needs_cpu_torch
def test_torch_s_cuda_headers_on_a_cpu_torch_runner_leave_the_kernel_undecided_naming_the_fix(opgate, tmp_path):
    repo = make_ops_repo(tmp_path / "repo")
    repo.edit("ops/stream_scale/stream_scale.cu", "// Scales", "// Reworded: scales")
    repo.edit("ops/conv_update/conv_update.cu", "__global__", "#include <c10/cuda/CUDAStream.h>\n\n__global__")
    run = opgate("review", "--repo", str(repo.path), "--base", repo.base, "--head", repo.commit("two .cu changes"),
                 "--offline")  # fmt: skip
    assert run.code == 0, run.stdout + run.stderr
    both = run.kernel("stream_scale")  # base includes <c10/cuda/CUDAStream.h> too: base fails alike
    check = both["resource_check"]
    assert (check["status"], check["base_status"]) == ("compile_fail", "compile_fail")
    assert check["errors"][0]["header"] == "c10/cuda/impl/cuda_cmake_macros.h"
    assert (check["errors"][0]["path"], check["errors"][0]["line"]) == ("ops/stream_scale/stream_scale.cu", 2)
    assert both["verdict"] == "undecided" and both["reasons"] == []
    [why] = both["undecided"]
    assert why.startswith(
        "resource: CUDA sources for sm_90a: not decided, base fails alike (the runner or the manifest, not the "
        f"change): ops/stream_scale/stream_scale.cu:2: {TORCH_CUDA}"
    ), why
    head_only = run.kernel("conv_update")  # base compiles; head's new #include needs torch's CUDA build
    assert head_only["resource_check"]["base_status"] == "ok"
    assert head_only["verdict"] == "undecided" and head_only["reasons"] == []
    assert any(
        u.startswith(
            "resource: CUDA sources for sm_90a: not decided, this runner cannot compile head (its torch, not the "
            f"change): ops/conv_update/conv_update.cu:2: {TORCH_CUDA}"
        )
        for u in head_only["undecided"]
    ), head_only["undecided"]
    assert "c10/cuda/impl/cuda_cmake_macros.h" in run.comment.split("### ")[0]


def test_check_runs_the_reference_with_the_case_s_args_and_an_optional_tensor_as_none(opgate, tmp_path):
    """conv_update has only [build.cuda]: on this GPU-less machine check runs its reference alone, which takes
    silu_activation from [build.cuda] args; bias_act's dry run hands its worker None for the left-out bias."""
    make_ops_repo(tmp_path)
    run = opgate("check")
    lines = _lines(run.stdout)
    assert (
        "  ok  decode_64 (the smallest): reference ran once" in run.stdout
        and "(64,) float32 (on the CPU: this runner has no GPU)" in run.stdout
    ), lines
    assert any(line.startswith("  ok  no_bias (the smallest): entry and reference agree") for line in lines), lines
    if NVCC and _cpu_torch():
        [stream] = [line for line in lines if "resources on sm_90a: ops/stream_scale" in line]
        assert stream.startswith(
            f"  --  not checked on this runner: resources on sm_90a: ops/stream_scale/stream_scale.cu:2: {TORCH_CUDA}"
        ), stream
        assert stream.endswith("docs/adopt.md)")  # the whole fix, not cut short
    assert run.code == 0, run.stdout + run.stderr
