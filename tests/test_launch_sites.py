"""bot/config/launch_sites.py: the launches a kernel's sources make, and which changed file can move them."""

from __future__ import annotations

from bot.config.launch_sites import CHEVRON, INSTANTIATION, blank, constants, launch_inputs, scan, split_args, touches
from bot.verdict.launch import touch_phrase
from bot.wording.messages import phrase
from tests.conftest import KERNELS

GEMM = "kernels/deepgemm_tile/gemm_cuda.cu"


def test_the_gemm_launch_and_its_opt_in_are_found_with_the_function_behind_the_local_alias():
    sites = scan(GEMM, (KERNELS / "deepgemm_tile" / "gemm_cuda.cu").read_text())
    assert [(s.kind, s.function) for s in sites] == [
        ("cudaFuncSetAttribute", "gemm_bf16_kernel"),
        (CHEVRON, "gemm_bf16_kernel"),
    ]
    launch = sites[1]
    assert launch.kernel == "kernel" and launch.target == "gemm_bf16_kernel<TM, TN, TK, kVec>"
    assert (launch.block.text, launch.smem.text) == ("Cfg::kThreads", "Cfg::kSmemBytes")
    assert launch.describe() == f"{GEMM}:{launch.line} kernel<<<…, Cfg::kThreads, Cfg::kSmemBytes>>>"
    assert sites[0].smem.text == "Cfg::kSmemBytes"  # the opt-in's value, MaxDynamicSharedMemorySize


def test_a_launch_without_a_shared_memory_argument_and_one_with_a_literal_zero():
    text = "void f() {\n  k1<<<g, 128>>>(x);\n  k2<<<g, kThreads, 0, s>>>(x);\n}\n"
    one, two = scan("a.cu", text)
    assert (one.function, one.block.text, one.smem, one.line) == ("k1", "128", None, 2)
    assert text[one.close : one.close + 3] == ">>>"
    assert (two.function, two.smem.text) == ("k2", "0")


def test_comments_and_strings_are_not_launches_and_offsets_still_point_into_the_original():
    text = (
        "// k<<<1, 2, 3>>>(x);\n/* cudaLaunchKernel(k, g, b, a, 9, s) */\n"
        'const char* s = "k<<<1,2,3>>>";\nint n = 1\'000;\n'
    )
    assert scan("a.cu", text) == []
    assert len(blank(text)) == len(text) and blank(text).count("\n") == text.count("\n")
    assert "1'000" in blank(text)  # a digit separator is no character literal


def test_template_arguments_with_commas_stay_one_argument():
    text = "x<<<grid, Cfg<128, 64>::kThreads, Cfg<128, 64>::kSmem + sizeof(Plan<a, b>), stream>>>(p);"
    (site,) = scan("a.cu", text)
    assert (site.block.text, site.smem.text) == ("Cfg<128, 64>::kThreads", "Cfg<128, 64>::kSmem + sizeof(Plan<a, b>)")
    assert [a.text for a in split_args("f(a < b, c)", 2, 10)] == ["a < b", "c"]


def test_the_launch_apis_name_their_kernel_block_and_shared_memory_arguments():
    text = (
        "cudaLaunchKernel((void*)&ns::gemm<3>, grid, dim3(256), args, kSmem, stream);\n"
        "cuLaunchKernel(fn, gx, 1, 1, 128, 1, 1, kDriverSmem, stream, params, nullptr);\n"
        "cudaLaunchKernelEx(&config, attn_kernel, q, k);\n"
        "cudaFuncSetAttribute(attn_kernel, cudaFuncAttributePreferredSharedMemoryCarveout, 100);\n"
    )
    runtime, driver, ex, carveout = scan("a.cu", text)
    assert (runtime.kind, runtime.function, runtime.block.text, runtime.smem.text) == (
        "cudaLaunchKernel",
        "gemm",
        "dim3(256)",
        "kSmem",
    )
    assert (driver.kind, driver.smem.text, driver.block) == ("cuLaunchKernel", "kDriverSmem", None)
    assert (ex.kind, ex.function, ex.smem) == ("cudaLaunchKernelEx", "attn_kernel", None)
    assert (carveout.kind, carveout.smem) == ("cudaFuncSetAttribute", None)  # not the dynamic-smem attribute


def test_an_explicit_instantiation_is_a_site_of_its_kernel():
    (site,) = scan("inst_3.cu", "template __global__ void gemm<128, 3>(const float*, float*);\n")
    assert (site.kind, site.function) == (INSTANTIATION, "gemm")


def test_constants_and_defines_and_the_names_a_launch_is_computed_from():
    header = "constexpr int kStages = 4;\nstatic constexpr size_t kStageBytes{2 * 64 * 128};\n#define EXTRA 1024\n"
    body = "constexpr size_t kSmem = kStages * kStageBytes + EXTRA;\nvoid go() { k<<<1, 128, kSmem>>>(); }\n"
    assert constants(header) == {"kStages": "4", "kStageBytes": "2 * 64 * 128", "EXTRA": "1024"}
    (site,) = scan("body.cu", body)
    defined = {n: [d] for n, d in {**constants(header), **constants(body)}.items()}
    assert {"kSmem", "kStages", "kStageBytes", "EXTRA"} <= launch_inputs(site, defined)


def test_a_changed_header_that_defines_what_the_launch_size_is_computed_from_touches_the_launch():
    files = {
        "k/plan.h": "constexpr int kStages = 4;\nconstexpr int kUnrelated = 9;\n",
        "k/body.cu": '#include "plan.h"\nconstexpr int kSmem = kStages * 4096;\nvoid go() {\n'
        " k<<<1, 128, kSmem>>>();\n}\n",
        "k/other.h": "constexpr int kUnrelated2 = 1;\n",
        "k/inst.cu": "template __global__ void k<3>();\n",
    }
    found = touches(["k/plan.h", "k/other.h", "k/README.md"], files)
    assert [(t.path, t.kind, t.names) for t in found] == [("k/plan.h", "defines", ("kStages",))]
    assert (
        phrase(touch_phrase(found[0].path, found[0].kind, found[0].names, [found[0].site.describe()]))
        == "k/plan.h defines kStages, which the launch is computed from: k/body.cu:4 k<<<…, 128, kSmem>>>"
    )
    assert [t.kind for t in touches(["k/body.cu"], files)] == ["holds"]
    assert [t.kind for t in touches(["k/inst.cu"], files)] == ["instantiates"]
    config = touches(["k/config.json"], files, config="k/config.json")
    assert [t.kind for t in config] == ["tunables"]


def test_a_local_alias_set_by_a_choice_of_one_kernel_function_names_that_function():
    text = (
        "auto kernel = params.cache_seqlens == nullptr\n"
        "    ? &ns::update_kernel<Ktraits, false>\n"
        "    : &ns::update_kernel<Ktraits, true>;\n"
        "kernel<<<grid, Ktraits::kNThreads, 0, stream>>>(params);\n"
        "auto other = fast ? &fast_kernel : &slow_kernel;\n"
        "other<<<grid, 128>>>(params);\n"
    )
    first, second = scan("u.cu", text)
    assert (first.function, first.target) == ("update_kernel", "kernel")  # the fold still reads the alias back
    assert second.function == "other"  # two kernel functions: not one name to give it


def test_a_constant_another_unit_defines_is_not_what_a_launch_reads():
    files = {
        "c/fwd.cu": "struct T { static constexpr int kNThreads = 128; };\nvoid f() { k<<<1, T::kNThreads, 0>>>(); }\n",
        "c/bwd.cu": "struct U { static constexpr int kNThreads = 64; };\nvoid g() { j<<<1, U::kNThreads, 0>>>(); }\n",
        "c/common.h": "constexpr int kNThreads = 32;\n",
    }
    found = touches(["c/fwd.cu"], files)
    assert [(t.path, t.kind, t.site.path) for t in found] == [("c/fwd.cu", "holds", "c/fwd.cu")]
    found = touches(["c/common.h"], files)  # a header either launch may include
    assert [(t.path, t.kind, t.site.path) for t in found] == [
        ("c/common.h", "defines", "c/fwd.cu"),
        ("c/common.h", "defines", "c/bwd.cu"),
    ]
