"""FlashMLA's nvcc flags in the forms its setup.py passes them, include_dirs, resource-only manifests and C++
launch expressions: one allow-list for `opgate lint` and the review, and what it still refuses."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from bot.config.manifest import KernelManifest, load_kernel
from bot.errors import InputError
from bot.lint import lint_paths
from bot.review.resource_check import flag_findings
from bot.untrusted.fold import fold_source, parse_folded
from bot.verdict.flags import check_flags, nvcc_options, without_arch
from tests.conftest import git

# csrc/setup.py of deepseek-ai/FlashMLA: extra_compile_args["nvcc"], arch and thread flags as it appends them
FLASHMLA_NVCC = [
    "-O3", "-std=c++20", "-DNDEBUG", "-D_USE_MATH_DEFINES", "-Wno-deprecated-declarations",
    "-U__CUDA_NO_HALF_OPERATORS__", "-U__CUDA_NO_HALF_CONVERSIONS__", "-U__CUDA_NO_HALF2_OPERATORS__",
    "-U__CUDA_NO_BFLOAT16_CONVERSIONS__", "--expt-relaxed-constexpr", "--expt-extended-lambda", "--use_fast_math",
    "--ptxas-options=-v,--register-usage-level=10,--warn-on-spills,--warn-on-local-memory-usage,"
    "--warn-on-double-precision-use",
    "-lineinfo", "--source-in-ptx", "-DFLASH_MLA_DISABLE_FP16",
    "-gencode", "arch=compute_100f,code=sm_100f", "-gencode", "arch=compute_90a,code=sm_90a", "--threads", "32",
]  # fmt: skip
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


def _write(folder: Path, manifest: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "kernel.toml").write_text(textwrap.dedent(manifest))
    return folder / "kernel.toml"


RESOURCE_ONLY = """\
    name = "dense"
    domain = "flashmla"
    globs = ["csrc/dense/**"]

    [build.cuda]
    sources = ["instantiations/bf16.cu"]
    include_dirs = ["csrc", "third_party/dep/include"]
    cuda_cflags = {flags}

    [launch]
    headers = ["traits.h"]

    [launch.functions.mla_kernel]
    dynamic_smem = "sizeof(Traits<cutlass::bfloat16_t>::SharedMemoryPlan)"
    """


def test_a_resource_only_manifest_with_flashmla_flags_and_a_sizeof_loads_and_lints(tmp_path):
    git(tmp_path, "init", "-q")
    (tmp_path / "third_party" / "dep" / "include").mkdir(parents=True)
    (tmp_path / "third_party" / "dep" / "include" / "dep.h").write_text("#pragma once\n")
    path = _write(tmp_path / "csrc" / "dense", RESOURCE_ONLY.format(flags=json.dumps(FLASHMLA_NVCC)))
    (path.parent / "instantiations").mkdir()
    (path.parent / "instantiations" / "bf16.cu").write_text('#include "../kernel.cuh"\n')  # what lint checks exists
    kernel = load_kernel(path.parent, path="csrc/dense")  # no tile_config.json: no tunables declared
    assert kernel.manifest.cases == [] and kernel.config == {}
    assert kernel.manifest.launch.cxx_expressions() == ["sizeof(Traits<cutlass::bfloat16_t>::SharedMemoryPlan)"]
    assert flag_findings(kernel) == []
    assert [f for f in lint_paths([path]) if f.severity == "error"] == []


def test_lint_reports_the_flags_and_include_dirs_the_review_refuses(tmp_path):
    git(tmp_path, "init", "-q")
    (tmp_path / "csrc").mkdir()
    (tmp_path / "third_party" / "dep").mkdir(parents=True)  # a submodule that was not checked out: empty
    manifest = RESOURCE_ONLY.format(flags=json.dumps(["-O3", "-ccbin", "./evil.sh"])).replace(
        '"csrc", "third_party/dep/include"', '"csrc", "third_party/dep", "no/such/dir"'
    )
    path = _write(tmp_path / "csrc" / "dense", manifest)
    findings = lint_paths([path])
    flags = [f for f in findings if f.rule == "KERN004"]
    assert [f.line for f in flags] == [8, 8] and "'-ccbin' is not allowed" in flags[0].message
    dirs = sorted(f.message for f in findings if f.rule == "KERN005")
    assert dirs == [
        "[build.cuda] include_dirs: 'no/such/dir' is not a folder of the repository",
        "[build.cuda] include_dirs: 'third_party/dep' is empty: a submodule not checked out? "
        "(git submodule update --init --recursive)",
    ]
    kernel = load_kernel(path.parent, path="csrc/dense")
    review = flag_findings(kernel)  # the same flags fail the review, and the missing folder too
    assert any("'-ccbin' is not allowed" in f for f in review)
    assert any("'no/such/dir' is not a folder in the repository" in f for f in review)


@pytest.mark.parametrize("bad", ["../outside", "/usr/include", "a/../../b", "has space", "./csrc"])
def test_an_include_dir_must_be_a_relative_path_inside_the_repository(bad):
    raw = {
        "name": "k",
        "domain": "d",
        "globs": ["k/**"],
        "build": {"cuda": {"sources": ["k.cu"], "include_dirs": [bad]}},
    }
    with pytest.raises(ValueError, match="is not a relative path inside the repository"):
        KernelManifest.model_validate(raw)


def test_an_include_dir_that_is_a_symlink_out_of_the_repository_is_refused(tmp_path):
    (tmp_path / "escape").symlink_to("/usr/include")
    path = _write(
        tmp_path / "dense", RESOURCE_ONLY.format(flags="[]").replace('"csrc", "third_party/dep/include"', '"escape"')
    )
    kernel = load_kernel(path.parent, path="dense")
    assert flag_findings(kernel) == [
        "dense/kernel.toml [build.cuda] include_dirs: 'escape' leads out of the repository (a symlink?)"
    ]


@pytest.mark.parametrize(
    "bad",
    ['sizeof(T); system("x")', "sizeof(T) // comment", "sizeof(T))", "sizeof(T) { }", "sizeof(\nT)"],
)
def test_a_cxx_launch_expression_cannot_add_a_statement(bad):
    raw = {
        "name": "k", "domain": "d", "globs": ["k/**"], "build": {"cuda": {"sources": ["k.cu"]}},
        "launch": {"functions": {"k": {"dynamic_smem": bad}}},
    }  # fmt: skip
    with pytest.raises(ValueError, match="a C\\+\\+ expression may hold names"):
        KernelManifest.model_validate(raw)


def test_a_case_needs_its_builds_entry_and_a_missing_config_needs_no_tunables(tmp_path):
    raw = {"name": "k", "domain": "d", "globs": ["k/**"], "build": {"cpu": {"sources": ["k.cpp"]}}}
    with pytest.raises(ValueError, match=r"build\.cpu\.entry: required when a case runs on cpu"):
        KernelManifest.model_validate({**raw, "cases": [{"name": "one"}]})
    path = _write(tmp_path / "k", 'name = "k"\ndomain = "d"\nglobs = ["k/**"]\n[tunables]\nblock = [1]\n'
                  '[build.cpu]\nsources = ["k.cpp"]\n')  # fmt: skip
    with pytest.raises(InputError, match=r"tile_config\.json: cannot read"):
        load_kernel(path.parent)


def test_the_probe_source_and_its_ptx():
    exprs = ["sizeof(Traits<cutlass::bfloat16_t>::SharedMemoryPlan)", "sizeof(float) * 4"]
    text = fold_source(["traits.h"], exprs)
    assert '#include "traits.h"' in text
    assert f"opgate_probe_1 = (unsigned long long)({exprs[1]});" in text
    ptx = ".global .align 8 .u64 opgate_probe_0 = 230816;\n.global .align 8 .u64 opgate_probe_1 = 16;\n"
    assert parse_folded(ptx, exprs) == {exprs[0]: 230816, exprs[1]: 16}
    assert parse_folded("", exprs) == {}
