"""bot/untrusted/fold.py: the launches' block size and dynamic shared memory read back by the compiler, per
instantiation (markers in a rewritten copy, compiled to PTX, nothing run)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.config.launch_sites import scan
from bot.untrusted.fold import (
    SITE_PRELUDE,
    fold_sites,
    fold_source,
    mark_sources,
    markers,
    parse_folded,
    parse_site_values,
)
from bot.untrusted.resources import CompileJob, demangle, demangler, nvcc_path
from bot.untrusted.sandbox import Sandbox
from bot.verdict.launch import marked_function

# Two instantiations of one kernel whose pipeline depth is a template argument (the JIT GEMM library's shape), a
# launch whose size is a runtime value, and one without a shared-memory argument.
STAGED = """\
template <int kStages> struct Plan { static constexpr int kThreads = 128, kSmem = kStages * 32768; };
template <int kStages> __global__ void gemm(float* c) { extern __shared__ float s[]; c[threadIdx.x] = s[kStages]; }
__global__ void tail(float* c, int n) { extern __shared__ float s[]; c[0] = s[n]; }
__global__ void plain(float* c) { c[0] = 1.0f; }

template <int kStages> void run(float* c) {
  auto kernel = gemm<kStages>;
  kernel<<<1, Plan<kStages>::kThreads, Plan<kStages>::kSmem>>>(c);
}
void go(float* c, int n) {
  run<3>(c);
  run<4>(c);
  tail<<<1, 64, n * sizeof(float)>>>(c, n);
  plain<<<1, 32>>>(c);
}
"""

# Recorded from nvcc 13.0.88's PTX of STAGED marked by `mark_sources` (tail's runtime size replaced by 0 so that it
# compiles), and of marker 5 alone without its function: one marker kernel per instantiation and argument.
RECORDED_PTX = """
.visible .entry _ZN11opgate_fold10site_valueILi0EXadL_Z4gemmILi3EEvPfEELy128EEEvv()
.visible .entry _ZN11opgate_fold10site_valueILi1EXadL_Z4gemmILi3EEvPfEELy98304EEEvv()
.visible .entry _ZN11opgate_fold10site_valueILi0EXadL_Z4gemmILi4EEvPfEELy128EEEvv()
.visible .entry _ZN11opgate_fold10site_valueILi1EXadL_Z4gemmILi4EEvPfEELy131072EEEvv()
.visible .entry _ZN11opgate_fold10site_valueILi2EXadL_Z4tailPfiEELy64EEEvv()
.visible .entry _ZN11opgate_fold10site_valueILi3EXadL_Z4tailPfiEELy0EEEvv()
.visible .entry _ZN11opgate_fold10site_valueILi4EXadL_Z5plainPfEELy32EEEvv()
.visible .entry _ZN11opgate_fold10site_valueILi5EXadL_Z5plainPfEELy0EEEvv()
.visible .entry _ZN11opgate_fold8site_anyILi5ELy0EEEvv()
"""


def test_each_marked_argument_becomes_a_template_argument_and_lines_stay_where_they_were():
    sites = scan("staged.cu", STAGED)
    chosen = markers(sites)
    assert [(m.site.function, m.what) for m in chosen] == [
        ("gemm", "threads"),
        ("gemm", "smem"),
        ("tail", "threads"),
        ("tail", "smem"),
        ("plain", "threads"),
        ("plain", "smem"),
    ]
    text = mark_sources({"staged.cu": STAGED}, chosen)["staged.cu"]
    assert text.startswith(SITE_PRELUDE + '#line 1 "staged.cu"\n')
    body = text.removeprefix(SITE_PRELUDE).split("\n", 1)[1]
    assert body.count("\n") == STAGED.count("\n")
    assert "::opgate_fold::value<1, &gemm<kStages>, (unsigned long long)(Plan<kStages>::kSmem)>()" in body
    assert (
        "(unsigned)(::opgate_fold::value<0, &gemm<kStages>, (unsigned long long)(Plan<kStages>::kThreads)>())" in body
    )
    assert "plain<<<1, (unsigned)(::opgate_fold::value<4, &plain, (unsigned long long)(32)>()), " in body
    assert "::opgate_fold::value<5, &plain, 0ull>()>>>(c);" in body  # no smem argument: it launches with 0
    anonymous = mark_sources({"staged.cu": STAGED}, chosen[:1], with_function=False)["staged.cu"]
    assert "::opgate_fold::any<0, (unsigned long long)(Plan<kStages>::kThreads)>()" in anonymous


def test_recorded_markers_parse_to_one_value_per_instantiation_and_argument():
    values = parse_site_values(RECORDED_PTX)
    assert [(v.marker, v.value) for v in values if v.marker < 2] == [(0, 128), (0, 128), (1, 98304), (1, 131072)]
    assert [v.function for v in values if v.marker == 1] == [
        "_ZN11opgate_fold10site_valueILi1EXadL_Z4gemmILi3EEvPfEELy98304EEEvv",
        "_ZN11opgate_fold10site_valueILi1EXadL_Z4gemmILi4EEvPfEELy131072EEEvv",
    ]
    assert next((v.function, v.value) for v in values if v.marker == 5) == ("", 0)  # site_any: no function
    assert len(values) == 9
    assert parse_site_values(".visible .entry _ZN11opgate_fold10site_valueILi1EXadL_Z4gemmE") == []


@pytest.mark.slow
@pytest.mark.untimed
@pytest.mark.skipif(nvcc_path() is None, reason="needs nvcc (the CUDA toolkit)")
def test_the_compiler_reads_back_each_instantiations_size_and_leaves_a_runtime_size_unfolded(tmp_path: Path):
    (tmp_path / "staged.cu").write_text(STAGED)
    nvcc = nvcc_path()
    assert nvcc is not None
    job = CompileJob(tmp_path / "staged.cu", tmp_path, (), ("-std=c++17",))
    sites = scan("staged.cu", STAGED)
    fold = fold_sites(
        nvcc, [job], {"staged.cu": STAGED}, sites, arch="sm_90a", cache_dir=tmp_path / "c", sandbox=Sandbox.detect()
    )
    readable = demangle(sorted({v.function for v in fold.values}), demangler(nvcc))
    got = {(v.marker, marked_function(readable[v.function]) if v.function else "", v.value) for v in fold.values}
    assert {(1, "gemm<3>", 98304), (1, "gemm<4>", 131072), (0, "gemm<3>", 128), (0, "gemm<4>", 128)} <= got
    assert (2, "tail", 64) in got and (4, "plain", 32) in got and (5, "plain", 0) in got
    assert set(fold.unfolded) == {3}  # tail's n * sizeof(float): a runtime value
    assert fold.unfolded[3].why == "not_constant" and "error" in fold.unfolded[3].error
    again = fold_sites(
        nvcc, [job], {"staged.cu": STAGED}, sites, arch="sm_90a", cache_dir=tmp_path / "c", sandbox=Sandbox.detect()
    )
    assert again.cached and again.values == fold.values


def test_the_probe_source_and_its_ptx():
    exprs = ["sizeof(Traits<cutlass::bfloat16_t>::SharedMemoryPlan)", "sizeof(float) * 4"]
    text = fold_source(["traits.h"], exprs)
    assert '#include "traits.h"' in text
    assert f"opgate_probe_1 = (unsigned long long)({exprs[1]});" in text
    ptx = ".global .align 8 .u64 opgate_probe_0 = 230816;\n.global .align 8 .u64 opgate_probe_1 = 16;\n"
    assert parse_folded(ptx, exprs) == {exprs[0]: 230816, exprs[1]: 16}
    assert parse_folded("", exprs) == {}
