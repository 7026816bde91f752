"""bot/verdict/flags.py: the nvcc flag allow-list (FlashMLA's flags as setup.py passes them, and what it refuses) and
the target options one architecture is compiled with, as the manifest ships them."""

from __future__ import annotations

import pytest

from bot.verdict.flags import check_flags, default_target, for_arch, nvcc_options, without_arch
from tests.flashmla_repo import FLASHMLA_NVCC

FLASHMLA_CXX = ["-O3", "-std=c++20", "-DNDEBUG", "-Wno-deprecated-declarations"]


def test_flashmlas_own_flags_are_allowed_in_the_forms_setup_py_passes_them():
    assert check_flags(FLASHMLA_NVCC, nvcc=True, where="w") == []
    assert check_flags(FLASHMLA_CXX, nvcc=False, where="w") == []


@pytest.mark.parametrize(
    ("flags", "why"),
    [
        (["--ptxas-options=-v,--output-file=/tmp/x"], "ptxas option '--output-file=/tmp/x' is not allowed"),
        (["-Xptxas", "--input-as-string"], "ptxas option '--input-as-string' is not allowed"),
        (["-Xptxas"], "-Xptxas without a value"),
        (["-gencode", "arch=compute_90a,code=sm_90a;rm"], "flag '-gencode arch=compute_90a,code=sm_90a;rm'"),
        (["--threads", "all"], "flag '--threads all' is not allowed"),
        (["-ccbin", "./evil.sh"], "flag '-ccbin' is not allowed"),
        (["-I/etc"], "list include directories in include_dirs"),
        (["-std=c++17", "-std=c++20"], "-std= given 2 times"),
    ],
)
def test_what_the_allow_list_still_refuses(flags, why):
    findings = check_flags(flags, nvcc=True, where="kernel.toml [build.cuda] cuda_cflags")
    assert any(why in f for f in findings), findings


def test_two_token_options_are_one_option_and_arch_options_leave_in_either_form():
    options = nvcc_options(["-gencode", "arch=compute_90a,code=sm_90a", "--threads", "32", "-O3"])
    assert [(o.name, o.value) for o in options] == [
        ("-gencode", "arch=compute_90a,code=sm_90a"),
        ("--threads", "32"),
        ("-O3", None),
    ]
    flags = ["-gencode", "arch=compute_90a,code=sm_90a", "-gencode=arch=compute_100f,code=sm_100f", "-arch", "sm_90a"]
    assert without_arch([*flags, "--threads", "32"]) == ["--threads", "32"]


BOTH = ["-O3", "-gencode", "arch=compute_90a,code=sm_90a", "-gencode=arch=compute_100a,code=sm_100a", "-lineinfo"]


def test_the_default_target_adds_no_ptx_of_another_architecture():
    assert default_target("sm_90a") == ["-gencode", "arch=compute_90a,code=sm_90a"]
    assert default_target("sm_100a") == ["-gencode", "arch=compute_100a,code=sm_100a"]
    assert default_target("sm_80") == ["-gencode", "arch=compute_80,code=sm_80"]


@pytest.mark.parametrize(
    ("flags", "arch", "expected"),
    [
        (BOTH, "sm_90a", ["-O3", "-lineinfo", "-gencode", "arch=compute_90a,code=sm_90a"]),
        (BOTH, "sm_100a", ["-O3", "-lineinfo", "-gencode=arch=compute_100a,code=sm_100a"]),
        (["-O3"], "sm_90a", ["-O3", "-gencode", "arch=compute_90a,code=sm_90a"]),  # only `architectures`
        (["-arch=sm_90a"], "sm_90a", ["-arch=sm_90a"]),  # as written, with the compute_90 PTX it ships
        (["-arch=sm_90a"], "sm_100a", ["-gencode", "arch=compute_100a,code=sm_100a"]),
        (["-arch", "compute_90a", "-code", "sm_90a"], "sm_90a", ["-arch", "compute_90a", "-code", "sm_90a"]),
        (
            ["--generate-code=arch=compute_90a,code=[sm_90a,compute_90a]"],
            "sm_90a",
            ["--generate-code=arch=compute_90a,code=[sm_90a,compute_90a]"],
        ),
        (["-gencode", "arch=compute_80,code=sm_80"], "sm_90a", ["-gencode", "arch=compute_90a,code=sm_90a"]),
    ],
)
def test_each_architecture_keeps_the_manifests_own_target_options(flags, arch, expected):
    assert for_arch(flags, arch) == expected


DEEPGEMM = ["-std=c++20", "-O3", "--expt-relaxed-constexpr", "--expt-extended-lambda", "--gpu-architecture=sm_90a"]


@pytest.mark.parametrize(
    ("flags", "arch", "expected"),
    [
        (DEEPGEMM, "sm_90a", [*DEEPGEMM[:-1], "-arch=sm_90a"]),  # as the JIT compiles it: that one target alone
        (["-O3", "--gpu-architecture=sm_100f"], "sm_100f", ["-O3", "-arch=sm_100f"]),
        (BOTH, "sm_100a", ["-O3", "-lineinfo", "-arch=sm_100a"]),  # no -gencode: a cubin holds no PTX
        (["-O3"], "sm_90a", ["-O3", "-arch=sm_90a"]),
    ],
)
def test_a_kernel_that_ships_a_cubin_is_compiled_for_its_one_architecture(flags, arch, expected):
    """Issue 54, 9: DeepGEMM's JIT runs `nvcc -cubin --gpu-architecture=sm_90a`; the object build's targets would
    embed a compute_90 PTX beside it (where wgmma fails), a cubin has none."""
    assert for_arch(flags, arch, "cubin") == expected
    assert for_arch(flags, arch) != expected


def test_cubin_in_the_flags_is_refused_and_names_ships():
    [finding] = check_flags(["-O3", "-cubin"], nvcc=True, where="kernel.toml [build.cuda] cuda_cflags")
    assert "'-cubin' is not allowed" in finding and 'ships = "cubin"' in finding


def test_ships_is_an_object_or_a_cubin_and_only_for_cuda():
    from pydantic import ValidationError

    from bot.config.manifest import KernelManifest
    from bot.config.manifest_tables import BuildSpec

    assert BuildSpec(sources=["k.cu"]).ships == "object"
    assert BuildSpec(sources=["k.cu"], ships="cubin").ships == "cubin"
    with pytest.raises(ValidationError, match="object"):
        BuildSpec(sources=["k.cu"], ships="fatbin")
    manifest = {"name": "k", "domain": "gemm", "globs": ["k/**"]}
    with pytest.raises(ValidationError, match=r"only \[build.cuda\] ships a cubin"):
        KernelManifest.model_validate({**manifest, "build": {"cpu": {"sources": ["k.cpp"], "ships": "cubin"}}})
    cuda = KernelManifest.model_validate({**manifest, "build": {"cuda": {"sources": ["k.cu"], "ships": "cubin"}}})
    assert cuda.build["cuda"].ships == "cubin"
