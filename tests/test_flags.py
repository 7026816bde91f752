"""The nvcc flag allow-list (bot/verdict/flags.py): FlashMLA's flags as setup.py passes them, and what it refuses."""

from __future__ import annotations

import pytest

from bot.verdict.flags import check_flags, nvcc_options, without_arch
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
