"""Issue 54, 9: compiled as it ships, when it ships as a cubin. DeepGEMM's JIT compiles each kernel with `nvcc -cubin
--gpu-architecture=sm_90a`; with those flags in kernel.toml the resource check's object compile (`-c`) also embeds a
compute_90 PTX, where ptxas rejects wgmma, on base and head alike. Through `opgate review` on a scratch repository:
`ships = "cubin"` compiles the unit as the JIT does, so a comment-only change is judged (registers and spills read for
sm_90a, the launch read back) and is no fail; the same manifest without it fails to compile, as before."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.compile_repo import ops_repo
from tests.conftest import KernelRepo, git

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on the PATH")

MANIFEST = """\
name = "fence"
domain = "deepgemm"
globs = ["ops/fence/**"]

[build.cuda]
sources = ["fence.cu"]
cuda_cflags = ["-std=c++17", "-O3", "--expt-relaxed-constexpr", "--gpu-architecture=sm_90a"]
{ships}
"""

UNIT = """\
__global__ void __launch_bounds__(128) fence_kernel(const float* x, float* y, int n) {
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");  // sm_90a only
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = 2.0f * x[i];
}

void fence(const float* x, float* y, int n) { fence_kernel<<<(n + 127) / 128, 128>>>(x, y, n); }
"""


def _repo(path: Path, ships: str) -> KernelRepo:
    files = {"ops/fence/kernel.toml": MANIFEST.format(ships=ships), "ops/fence/fence.cu": UNIT}
    repo = ops_repo(path, files, "a wgmma kernel")
    repo.edit("ops/fence/fence.cu", "if (i < n)", "if (i < n)  /* in bounds */")
    repo.commit("a comment")
    return repo


def _review(opgate, repo: KernelRepo, tmp_path: Path) -> dict:
    head = git(repo.path, "rev-parse", "HEAD").strip()
    args = ("review", "--repo", str(repo.path), "--base", repo.base, "--head", head, "--offline")
    run = opgate(*args, env={"OPGATE_BUILD_DIR": str(tmp_path / "build")})
    assert run.code == 0, run.stdout + run.stderr
    return run.kernel("fence")


@pytest.mark.slow
@pytest.mark.untimed
@needs_nvcc
def test_a_cubin_kernel_is_compiled_as_the_jit_does_and_a_comment_is_no_fail(opgate, tmp_path: Path) -> None:
    kernel = _review(opgate, _repo(tmp_path / "repo", 'ships = "cubin"'), tmp_path)
    check = kernel["resource_check"]
    assert (check["status"], check["base_status"]) == ("ok", "ok"), check["log_tail"]
    [row] = check["head"]
    assert row["function"] == "fence_kernel(float const*, float*, int)"
    assert row["registers"] > 0 and row["spill_bytes"] == 0 and row["threads"] == 128
    assert check["unchanged"] == "same" and check["launch_undecided"] == []
    assert row["launch_from"] == "read back"  # the launch's PTX, compiled for sm_90a alone too
    units = [(u["step"], u["source"], u["sides"]) for u in check["units"]]  # base and head share each compile
    assert sorted(units) == [
        ("launches", "ops/fence/fence.cu", ["head", "base"]),
        ("resources", "ops/fence/fence.cu", ["head", "base"]),
    ]
    assert kernel["verdict"] == "undecided" and kernel["reasons"] == [], kernel  # no case ran, and nothing failed


@pytest.mark.slow
@pytest.mark.untimed
@needs_nvcc
def test_the_same_kernel_shipped_as_an_object_fails_to_compile_on_both_sides(opgate, tmp_path: Path) -> None:
    kernel = _review(opgate, _repo(tmp_path / "repo", ""), tmp_path)
    check = kernel["resource_check"]
    assert (check["status"], check["base_status"]) == ("compile_fail", "compile_fail")
    assert "Instruction 'wgmma.fence' not supported on .target 'sm_90'" in check["log_tail"]
