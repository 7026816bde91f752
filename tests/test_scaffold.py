"""bot/commands/scaffold.py: what `opgate init` proposes for one kernel folder (sources, builds, globs, include
folders, the drafts read from the code)."""

from __future__ import annotations

import os

from bot.commands.scaffold import binds_cuda, propose, root_globs
from tests.layout_repos import FLASH_CU, MAIN_CPP, header_only_layout, root_layout, write


def test_a_pybind_file_declaring_what_a_cu_defines_is_built_with_it_and_a_cpu_twin_stays_cpu(tmp_path):
    write(tmp_path, {"main.cpp": MAIN_CPP, "flash.cu": FLASH_CU, "cpu_twin.cpp": "int twin() { return 1; }\n"})
    assert binds_cuda(tmp_path, "main.cpp", ["flash.cu"])
    assert not binds_cuda(tmp_path, "cpu_twin.cpp", ["flash.cu"])  # no torch/extension.h, declares nothing
    p = propose(tmp_path)
    assert p is not None
    assert p.cuda_sources == ["flash.cu", "main.cpp"] and p.cpu_sources == ["cpu_twin.cpp"] and p.entry == "forward"
    assert "main.cpp binds the .cu files (it declares what they define): built in [build.cuda]" in p.notes


def test_a_binding_whose_functions_no_cu_defines_stays_in_its_own_build(tmp_path):
    write(
        tmp_path,
        {
            "binding.cpp": "#include <torch/extension.h>\ntorch::Tensor add(torch::Tensor a);\n"
            'PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("add", &add); }\n',
            "add_cpu.cpp": "#include <torch/extension.h>\ntorch::Tensor add(torch::Tensor a) { return a + 1; }\n",
            "other.cu": "__global__ void k() {}\nvoid launch() { k<<<1, 32>>>(); }\n",
        },
    )
    p = propose(tmp_path)
    assert p is not None and p.cpu_sources == ["add_cpu.cpp", "binding.cpp"] and p.cuda_sources == ["other.cu"]


def test_at_the_repository_root_tests_and_docs_are_no_sources_and_the_globs_name_the_kernels_files(tmp_path):
    root = root_layout(tmp_path / "flash")
    write(root, {"tests/test_main.cpp": "int main() {}\n", "docs/snippet.cu": "// shown in the docs\n"})
    write(root, {"csrc/helpers.cuh": "#pragma once\n", "util.h": "#pragma once\n"})
    p = propose(root, root)
    assert p is not None and p.cuda_sources == ["flash.cu", "main.cpp"] and p.cpu_sources == []
    assert p.globs == ["*.cu", "*.cpp", "csrc/**", "*.h"]
    assert [(d.function, d.threads, d.dynamic_smem) for d in p.launches] == [("forward_kernel", 128, 49152)]
    assert root_globs(["a.cu", "sub/dir/b.cu", "c.cuh"]) == ["*.cu", "sub/**", "*.cuh"]


def test_a_source_that_links_out_of_the_kernel_folder_is_left_out_and_named(tmp_path):
    write(tmp_path, {"shared/flash.cu": FLASH_CU, "kernels/flash/main.cpp": MAIN_CPP})
    os.symlink("../../shared/flash.cu", tmp_path / "kernels" / "flash" / "flash.cu")
    p = propose(tmp_path / "kernels" / "flash", tmp_path)
    assert p is not None and p.cuda_sources == [] and p.cpu_sources == ["main.cpp"]
    assert p.notes[0] == (
        "flash.cu links to ../../shared/flash.cu, outside the kernel folder: a build compiles only the folder's own "
        "files, so it is left out (give --kernels the folder that holds it, . for the root)"
    )


def test_a_header_only_library_adopted_through_an_instantiation_file_is_resource_only_with_its_include_folder(
    tmp_path,
):
    root = header_only_layout(tmp_path / "fp8lib")
    p = propose(root / "opgate" / "instantiations", root)
    assert p is not None and p.resource_only and p.cuda_sources == ["gemm_128.cu"] and p.entry == ""
    assert p.include_dirs == ["include"]  # named by CMake and found from <fp8lib/impls/gemm.cuh>
    assert p.build.architectures == ["sm_90a", "sm_100a"]
    write(root, {"CMakeLists.txt": "project(x)\n"})  # without CMake's word the #include alone finds the folder
    p = propose(root / "opgate" / "instantiations", root)
    assert p is not None and p.include_dirs == ["include"] and p.build.architectures == []


def test_include_folders_are_guessed_only_from_library_style_includes_never_torchs_or_a_bare_name(tmp_path):
    from bot.commands.scaffold import included_from

    write(
        tmp_path,
        {
            "kernels/gemm/gemm.cu": '#include <torch/extension.h>\n#include "utils.h"\n#include <mylib/tile.cuh>\n',
            "venv/lib/site-packages/torch/include/torch/extension.h": "// torch\n",
            "tests/utils.h": "// a test helper, not the kernel's\n",
            "third_party/mylib/include/mylib/tile.cuh": '#include "detail/inner.cuh"\n#include <cute/tensor.hpp>\n',
            "third_party/mylib/include/mylib/detail/inner.cuh": "// reached from tile.cuh, relative to it\n",
            "third_party/cutlass/include/cute/tensor.hpp": "// cute\n",
        },
    )
    found = included_from(tmp_path, tmp_path / "kernels" / "gemm", ["gemm.cu"])
    assert found == ["third_party/mylib/include", "third_party/cutlass/include"]


def test_a_builds_own_nvcc_flags_keep_ptxas_options_but_v_and_leave_out_what_the_allow_list_refuses():
    from bot.commands.scaffold import own_nvcc_flags

    kept, why = own_nvcc_flags(["-O3", "-Xptxas", "-v,--warn-on-spills", "-ccbin", "/opt/gcc", "-std=c++20"])
    assert kept == ["-O3", "-Xptxas", "--warn-on-spills", "-std=c++20"]
    assert why == [
        "left out: -v of -Xptxas -v,--warn-on-spills: ptxas's -v is the resource check's own (it reads every "
        "function's registers and spills from it); in a build it only prints them into the log",
        "left out: -ccbin: not on opgate's allow-list of compiler flags (docs/manifest.md)",
        "left out: /opt/gcc: not on opgate's allow-list of compiler flags (docs/manifest.md)",
    ]
