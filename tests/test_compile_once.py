"""Issue 54, 2: a comment compiles nothing twice. Through `opgate review` on a scratch repository of three .cu units:
a comment-only change to one unit is reviewed with each unit compiled once (base and head share it: comments vanish
in preprocessing, and so do the lines they shift), and the same review again compiles nothing; report.json's
`units` and the progress lines on stderr say so."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from tests.compile_repo import ops_repo, prepend
from tests.conftest import KernelRepo

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on the PATH")

MANIFEST = """\
name = "trio"
domain = "deepgemm"
globs = ["ops/trio/**"]

[build.cuda]
sources = ["norm.cu", "scale.cu", "shift.cu", "square.cu"]
cuda_cflags = ["-O3", "-std=c++17", "-gencode", "arch=compute_90a,code=sm_90a"]
"""

UNIT = """\
#include "common.cuh"

__global__ void __launch_bounds__(128) {name}_kernel(const float* x, float* y, int n) {{
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = {body};
}}

void {name}(const float* x, float* y, int n) {{ {name}_kernel<<<(n + 127) / 128, 128>>>(x, y, n); }}
"""

BODIES = {"scale": "x[i] * kFactor", "shift": "x[i] + kFactor", "square": "x[i] * x[i]"}
NORM = """\
#include "common.cuh"

__global__ void __launch_bounds__(128) norm_kernel(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] / kFactor;
}
"""  # launched from no file of the kernel: the read-back has nothing to read in it


def _repo(path: Path) -> KernelRepo:
    files = {"ops/trio/kernel.toml": MANIFEST, "ops/trio/common.cuh": "#pragma once\nconstexpr float kFactor = 3.0f;\n"}
    files |= {f"ops/trio/{name}.cu": UNIT.format(name=name, body=body) for name, body in BODIES.items()}
    return ops_repo(path, files | {"ops/trio/norm.cu": NORM}, "three units")


def _review(opgate, repo: KernelRepo, head: str, build: Path):
    args = ("review", "--repo", str(repo.path), "--base", repo.base, "--head", head, "--offline")
    run = opgate(*args, env={"OPGATE_BUILD_DIR": str(build)})
    assert run.code == 0, run.stdout + run.stderr
    return run


@pytest.mark.slow
@pytest.mark.untimed
@needs_nvcc
def test_a_comment_only_change_compiles_each_unit_once_and_again_nothing(opgate, tmp_path: Path) -> None:
    repo = _repo(tmp_path / "repo")
    prepend(repo, "ops/trio/shift.cu", "// Shifts every element by the factor.\n// (two lines: every line moves)\n")
    repo.edit("ops/trio/shift.cu", "if (i < n)", "if (i < n)  /* in bounds */")
    head = repo.commit("a comment")
    build = tmp_path / "build"  # its own cache: cold

    cold = _review(opgate, repo, head, build)
    check = cold.kernel("trio")["resource_check"]
    assert (check["status"], check["base_status"]) == ("ok", "ok"), check["log_tail"]
    units = sorted((u["step"], u["source"], u["sides"], u["cached"]) for u in check["units"])
    # each unit once for ptxas -v, once for the read-back of the launches the changed file holds (norm.cu, which holds
    # none and includes none, not at all), base's and head's alike
    compiled = [("resources", f"ops/trio/{name}.cu", ["head", "base"], False) for name in sorted([*BODIES, "norm"])]
    compiled += [("launches", f"ops/trio/{name}.cu", ["head", "base"], False) for name in sorted(BODIES)]
    assert units == sorted(compiled)
    started = re.findall(r"compiling unit (\d)/(\d): ops/trio/(\w+)\.cu \(sm_90a\)", cold.stderr)
    assert sorted(n for n, _, _ in started) == ["1", "2", "3", "4"], cold.stderr  # each unit once, counted n of N
    assert {(total, name) for _, total, name in started} == {("4", name) for name in [*BODIES, "norm"]}, cold.stderr
    assert check["unchanged"] == "same" and len(check["head"]) == len(BODIES) + 1
    assert {r["threads"] for r in check["head"]} == {128} and check["launch_undecided"] == []
    to_ptx = re.findall(r"compiling unit ops/trio/(\w+)\.cu \(sm_90a\) to PTX", cold.stderr)
    assert sorted(to_ptx) == sorted(BODIES), cold.stderr

    warm = _review(opgate, repo, head, build)
    check = warm.kernel("trio")["resource_check"]
    assert [u["cached"] for u in check["units"]] == [True] * len(compiled)
    assert "compiling unit" not in warm.stderr

    repo.edit("ops/trio/square.cu", "{\n", "{  // squares\n")  # another comment, on the warm cache: compiles nothing
    other = _review(opgate, repo, repo.commit("another comment"), build)
    check = other.kernel("trio")["resource_check"]
    assert [u["cached"] for u in check["units"]] == [True] * len(compiled)
    assert "compiling unit" not in other.stderr
