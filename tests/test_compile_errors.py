"""bot/verdict/compile_errors.py: a failed compile's first error by repository path and line, the advice, and whether
head's failure is one base shares (undecided) or its own (fail)."""

from __future__ import annotations

from collections.abc import Sequence

from bot.models.report import CompileError
from bot.verdict.compile_errors import (
    MESSAGE_CAP,
    advised,
    build_errors,
    compile_phrases,
    describe,
    first_error,
    manifest_error,
    repository_path,
)
from bot.wording.messages import phrase


def advice(e: CompileError) -> str:
    """The advice as the comment writes it ("" when only the code can fix it)."""
    hint = advised(e)
    return phrase(hint) if hint is not None else ""


def compile_failure(
    step: str, head: Sequence[CompileError], base_failed: bool, base: Sequence[CompileError]
) -> tuple[str | None, str | None]:
    """(failure, undecided) as the comment writes them."""
    failure, undecided = compile_phrases(step, head, base_failed, base)
    return (phrase(failure) if failure else None), (phrase(undecided) if undecided else None)


ROOTS = [("/opgate/src", "ops/gemm"), ("/opgate/inc/0", "third_party/cutlass/include"), ("/opgate/inc/1", "csrc")]

# nvcc 13.0 and g++ 12 as they print them (the sandbox's paths)
GCC_MISSING = """\
In file included from /opgate/src/gemm.cu:4:
/opgate/inc/1/sparse_util.h:2:10: fatal error: cusparse.h: No such file or directory
    2 | #include <cusparse.h>
      |          ^~~~~~~~~~~~
compilation terminated.
"""
EDG = """\
/opgate/src/gemm.cu(17): error: identifier "undefined_y" is undefined
  __attribute__((global)) void k(){ int x = undefined_y; }
                                            ^

1 error detected in the compilation of "/opgate/src/gemm.cu".
"""
EDG_MISSING = '/opgate/src/gemm.cu(3): catastrophic error: cannot open source file "tile_policy.h"\n'
PTXAS = (
    "ptxas /tmp/tmpxft_000026d8_00000000-7_w.compute_90.ptx, line 26; error   : Instruction 'wgmma.fence' not "
    "supported on .target 'sm_90'\nptxas fatal   : Ptx assembly aborted due to errors\n"
)
NINJA = """\
ninja: Entering directory `/opgate/build'
[1/3] g++ -c /opgate/src/scale.cpp -o /opgate/build/a2c5.o
FAILED: /opgate/build/a2c5.o
g++ -c /opgate/src/scale.cpp -o /opgate/build/a2c5.o
/opgate/src/scale.cpp:5:10: fatal error: simd/config.h: No such file or directory
compilation terminated.
FAILED: /opgate/build/b7e1.o
g++ -c /opgate/src/other.cpp -o /opgate/build/b7e1.o
/opgate/src/other.cpp:9:3: error: expected ';' before '}' token
/opgate/src/other.cpp:12:3: error: a second error, never the first
ninja: build stopped: subcommand failed.
"""


def test_a_missing_header_is_named_by_the_file_and_line_of_the_include_that_asked_for_it():
    e = first_error(GCC_MISSING, ROOTS, "ops/gemm/gemm.cu")
    assert e == CompileError(
        kind="missing_header",
        path="csrc/sparse_util.h",
        line=2,
        message="cusparse.h: No such file or directory",
        header="cusparse.h",
    )
    assert describe(e) == "csrc/sparse_util.h:2: #include of cusparse.h, which the compiler cannot find"
    assert "/opgate/" not in describe(e)


def test_nvcc_front_end_errors_and_its_missing_headers_read_the_same_way():
    assert first_error(EDG, ROOTS) == CompileError(
        kind="compiler", path="ops/gemm/gemm.cu", line=17, message='identifier "undefined_y" is undefined'
    )
    missing = first_error(EDG_MISSING, ROOTS)
    assert missing is not None
    assert (missing.kind, missing.header, missing.line) == ("missing_header", "tile_policy.h", 3)


def test_a_ptxas_error_in_a_temporary_ptx_names_the_unit():
    e = first_error(PTXAS, ROOTS, "ops/gemm/gemm.cu")
    assert e is not None and e.path == "ops/gemm/gemm.cu" and e.line is None
    assert e.message == "ptxas: Instruction 'wgmma.fence' not supported on .target 'sm_90'"
    assert describe(e) == f"ops/gemm/gemm.cu: {e.message}"


def test_output_without_an_error_has_none_and_a_long_line_is_capped():
    assert first_error("ptxas info    : Used 10 registers\n", ROOTS) is None
    long = first_error(f"/opgate/src/a.cu(1): error: {'x' * 5000}\n", ROOTS)
    assert long is not None and len(long.message) == MESSAGE_CAP


def test_paths_leave_the_sandbox_for_the_repository_and_unknown_ones_stay_unnamed():
    assert repository_path("/opgate/src/instantiations/bf16.cu", ROOTS) == "ops/gemm/instantiations/bf16.cu"
    assert repository_path("/opgate/inc/0/cutlass/gemm.h", ROOTS) == "third_party/cutlass/include/cutlass/gemm.h"
    assert repository_path("/opgate/src/instantiations/../gemm.cuh", ROOTS) == "ops/gemm/gemm.cuh"
    assert repository_path("/opgate/srcx/a.cu", ROOTS) == ""  # a prefix is a whole path component
    assert repository_path("/usr/include/stdio.h", ROOTS) == ""
    assert repository_path("/opgate/src/k.cu", [("/opgate/src", ".")]) == "k.cu"  # a kernel at the repository root


def test_ninja_gives_the_first_error_of_each_failed_command():
    errors = build_errors(NINJA, ROOTS)
    assert [(e.path, e.line, e.kind) for e in errors] == [
        ("ops/gemm/scale.cpp", 5, "missing_header"),
        ("ops/gemm/other.cpp", 9, "compiler"),
    ]


def test_advice_tells_a_toolkit_header_from_a_separate_library_and_a_repository_header():
    def header(h: str) -> CompileError:
        return CompileError(kind="missing_header", path="a.cu", line=1, message="", header=h)

    assert "ships with the CUDA toolkit (cuSPARSE)" in advice(header("cusparse.h"))
    assert "install that toolkit component" in advice(header("cusparse.h"))
    assert "(CCCL (CUB))" in advice(header("cub/block/block_reduce.cuh"))
    assert "cuDNN's (not part of the CUDA toolkit)" in advice(header("cudnn.h"))
    repo = advice(header("simd/config.h"))
    assert "include_dirs in kernel.toml" in repo and "submodule not checked out" in repo
    assert advice(CompileError(kind="compiler", message="expected ';'")) == ""


MISSING = CompileError(
    kind="missing_header",
    path="ops/k/k.cu",
    line=3,
    message="cusparse.h: No such file or directory",
    header="cusparse.h",
)


def test_a_failure_base_shares_is_undecided_even_when_a_change_above_it_moved_its_line():
    base = [MISSING.model_copy(update={"line": 2})]  # head added a comment line above the #include
    failure, undecided = compile_failure("resource: CUDA sources for sm_90a", [MISSING], True, base)
    assert failure is None
    assert undecided == (
        "resource: CUDA sources for sm_90a: not decided, base fails alike (the runner or the manifest, not the "
        "change): ops/k/k.cu:3: #include of cusparse.h, which the compiler cannot find; cusparse.h ships with the "
        "CUDA toolkit (cuSPARSE): install that toolkit component on the runner, or add the folder that holds it to "
        "include_dirs in kernel.toml"
    )


def test_a_failure_only_head_has_fails_naming_its_first_error():
    failure, undecided = compile_failure("build (cpu)", [MISSING], False, [])
    assert undecided is None and failure is not None
    assert failure.startswith("build (cpu): head does not compile: ops/k/k.cu:3: #include of cusparse.h")
    assert "install that toolkit component" in failure  # what would make it compile


def test_a_head_error_base_does_not_have_fails_and_names_base_s_too():
    own = CompileError(kind="compiler", path="ops/k/k.cu", line=9, message="expected ';' before '}' token")
    failure, undecided = compile_failure("build (cpu)", [own, MISSING], True, [MISSING])
    assert undecided is None
    assert failure == (
        "build (cpu): head does not compile: ops/k/k.cu:9: expected ';' before '}' token (new in head; base fails "
        "with ops/k/k.cu:3: #include of cusparse.h, which the compiler cannot find)"
    )


def test_a_manifest_mistake_is_named_as_one_not_as_a_compiler_error():
    wrong = manifest_error("[build.cuda]: ../escape.cu: not a file inside the kernel folder")
    failure, _ = compile_failure("resource: CUDA sources for sm_90a", [wrong], False, [])
    assert failure == (
        "resource: CUDA sources for sm_90a: head's kernel.toml: [build.cuda]: ../escape.cu: not a file inside the "
        "kernel folder (a kernel.toml problem, not a compiler error); fix the manifest (docs/manifest.md)"
    )
    assert "does not compile" not in failure
    _, shared = compile_failure("build (cpu)", [wrong], True, [wrong])
    assert shared is not None and shared.startswith("build (cpu): not decided, base's kernel.toml has the same problem")


def test_errors_nobody_could_read_fail_as_before():
    failure, undecided = compile_failure("build (cpu)", [], True, [])
    assert (failure, undecided) == ("build (cpu): head does not compile (see the head log)", None)


# nvcc 13 on a runner with torch's CPU build (2.13.0): its c10/cuda headers are there, the generated macros are not
TORCH_CPU = """\
In file included from /opgate/torch/include/c10/cuda/CUDADeviceAssertionHost.h:4,
                 from /opgate/torch/include/c10/cuda/CUDAException.h:4,
                 from /opgate/torch/include/c10/cuda/CUDAFunctions.h:13,
                 from /opgate/torch/include/c10/cuda/CUDAStream.h:8,
                 from /opgate/src/stream.cu:3:
/opgate/torch/include/c10/cuda/CUDAMacros.h:9:10: fatal error: c10/cuda/impl/cuda_cmake_macros.h: No such file or \
directory
    9 | #include <c10/cuda/impl/cuda_cmake_macros.h>
      |          ^~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
compilation terminated.
"""
TORCH_HEADER = CompileError(
    kind="missing_header",
    path="ops/gemm/stream.cu",
    line=3,
    message="c10/cuda/impl/cuda_cmake_macros.h: No such file or directory",
    header="c10/cuda/impl/cuda_cmake_macros.h",
)


def test_a_header_missing_inside_torch_s_headers_is_named_at_the_repository_s_include_line():
    e = first_error(TORCH_CPU, ROOTS, "ops/gemm/stream.cu")
    assert e == TORCH_HEADER  # not CUDAMacros.h:9, a file of torch's nobody in the repository wrote
    assert describe(e) == (
        "ops/gemm/stream.cu:3: #include of torch's CUDA headers; c10/cuda/impl/cuda_cmake_macros.h is not in this "
        "runner's torch (its CPU build)"
    )
    fix = advice(e)
    assert fix.startswith("install torch's CUDA build on the runner: it installs and compiles without a GPU")
    assert "opgate[runner]" in fix and "include_dirs" not in fix


def test_torch_s_cuda_headers_missing_on_both_sides_are_undecided_naming_the_fix():
    base = [TORCH_HEADER.model_copy(update={"line": 2})]
    failure, undecided = compile_failure("resource: CUDA sources for sm_90a", [TORCH_HEADER], True, base)
    assert failure is None and undecided is not None
    assert undecided.startswith(
        "resource: CUDA sources for sm_90a: not decided, base fails alike (the runner or the manifest, not the "
        "change): ops/gemm/stream.cu:3: #include of torch's CUDA headers; c10/cuda/impl/cuda_cmake_macros.h is not"
    )
    assert "install torch's CUDA build on the runner" in undecided


def test_torch_s_cuda_headers_only_head_includes_are_undecided_never_a_fail():
    """Base compiles; head includes <c10/cuda/CUDAStream.h>: only a runner with torch's CUDA build can judge it."""
    failure, undecided = compile_failure("resource: CUDA sources for sm_90a", [TORCH_HEADER], False, [])
    assert failure is None and undecided is not None
    assert undecided.startswith(
        "resource: CUDA sources for sm_90a: not decided, this runner cannot compile head (its torch, not the change)"
    )
    assert "install torch's CUDA build on the runner" in undecided
    own = CompileError(kind="compiler", path="ops/gemm/stream.cu", line=9, message="expected ';'")
    failure, undecided = compile_failure("build (cuda)", [own, TORCH_HEADER], False, [])  # an error of its own too
    assert undecided is None and failure is not None and "expected ';'" in failure
