"""bot/config/launches.py: the launches a kernel's sources write with constants, as `opgate init` drafts [launch]."""

from __future__ import annotations

from bot.config.launches import LaunchDraft, constant, constants, read_launches
from tests.layout_repos import FLASH_CU, write


def test_constants_from_defines_and_constexpr_evaluate_in_order():
    text = "#define THREADS 128\n#define WARPS (THREADS / 32)\nconstexpr int SMEM = 48 * 1024u;\n"
    text += 'static constexpr size_t BIG = SMEM << 1;\nconst int RUNTIME = n * 2;\n#define NAME "x"\n'
    assert constants(text) == {"THREADS": 128, "WARPS": 4, "SMEM": 49152, "BIG": 98304}
    assert constant("static_cast<int>(THREADS) * 2", {"THREADS": 128}) == 256
    assert constant("blockDim.x", {}) is None and constant("1 / 0", {}) is None


def test_a_launch_with_constant_threads_and_shared_memory_is_drafted_with_its_line(tmp_path):
    write(tmp_path, {"flash.cu": FLASH_CU})
    drafts, notes = read_launches(tmp_path, ["flash.cu"])
    line = FLASH_CU[: FLASH_CU.index("forward_kernel<<<")].count("\n") + 1
    assert drafts == [LaunchDraft("forward_kernel", 128, 49152, f"flash.cu:{line}")] and notes == []


def test_dim3_blocks_a_header_constant_and_the_attribute_set_for_a_runtime_smem(tmp_path):
    write(
        tmp_path,
        {
            "config.h": "#define BLOCK_X 32\n#define BLOCK_Y 8\n#define SMEM (64 * 1024)\n",
            "k.cu": '#include "config.h"\n__global__ void tile_kernel(float *x) {}\n'
            "__global__ void plain_kernel(float *x) {}\n__global__ void free_kernel(float *x) {}\n"
            "void run(float *x, int n, size_t smem) {\n"
            "    dim3 block(BLOCK_X, BLOCK_Y);\n"
            "    cudaFuncSetAttribute((void *)tile_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM);\n"
            "    tile_kernel<<<n, block, smem, 0>>>(x);\n"
            "    plain_kernel<<<n, dim3(256)>>>(x);\n"
            "    free_kernel<<<n, n>>>(x);  // threads from a runtime value: nothing to draft\n"
            "}\n",
        },
    )
    drafts, _ = read_launches(tmp_path, ["k.cu"], ["config.h"])
    assert drafts == [
        LaunchDraft("tile_kernel", 256, 65536, "k.cu:8"),
        LaunchDraft("plain_kernel", 256, 0, "k.cu:9"),
        LaunchDraft("free_kernel", None, 0, "k.cu:10"),  # no third argument: no dynamic shared memory
    ]


def test_a_function_launched_with_two_figures_is_left_to_the_team(tmp_path):
    write(tmp_path, {"k.cu": "__global__ void k() {}\nvoid a() { k<<<1, 128>>>(); }\nvoid b() { k<<<1, 256>>>(); }\n"})
    drafts, notes = read_launches(tmp_path, ["k.cu"])
    assert drafts == []
    assert notes == ["k is launched with different figures (k.cu:2 and others): write its [launch] entry by hand"]


def test_a_launch_through_a_name_no_global_function_has_is_not_drafted_but_said(tmp_path):
    write(
        tmp_path,
        {
            "k.cu": "__global__ void fast_kernel(float *x) {}\n__global__ void slow_kernel(float *x) {}\n"
            "void run(float *x, bool fast) {\n"
            "    auto kernel = fast ? &fast_kernel : &slow_kernel;\n"
            "    kernel<<<1, 128, 0>>>(x);\n"
            "    fast_kernel<<<1, 256>>>(x);\n"
            "}\n"
        },
    )
    drafts, notes = read_launches(tmp_path, ["k.cu"])
    assert drafts == [LaunchDraft("fast_kernel", 256, 0, "k.cu:6")]
    assert notes == [
        "k.cu:5: the launch names kernel, which no __global__ function of the kernel's sources is called (a local "
        "function pointer?): not drafted; write [launch.functions.KERNEL] under the kernel function's name"
    ]
