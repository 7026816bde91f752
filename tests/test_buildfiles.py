"""bot/config/buildfiles.py: the architectures and include folders a repository's setup.py, CMakeLists.txt and
cpp_extension.load scripts name, as `opgate init` drafts them."""

from __future__ import annotations

from bot.config.buildfiles import (
    BuildFacts,
    architecture_conditions,
    buildable,
    cmake_architectures,
    python_architectures,
    python_flags,
    read_build_files,
)
from tests.layout_repos import header_only_layout, setup_py_layout, write


def test_gencode_pairs_arch_flags_and_torch_cuda_arch_list_each_name_their_architectures():
    text = """
cc_flag.append("-gencode")
cc_flag.append("arch=compute_80,code=sm_80")
nvcc = ["-gencode=arch=compute_90a,code=[sm_90a,compute_90a]", "-arch=sm_86"]
os.environ["TORCH_CUDA_ARCH_LIST"] = "8.0 8.9;9.0+PTX 10.0a"
"""
    assert python_architectures(text) == {
        "-gencode": ["sm_80", "sm_90a", "sm_90a"],
        "-arch": ["sm_86"],
        "TORCH_CUDA_ARCH_LIST": ["sm_80", "sm_89", "sm_90", "sm_100a"],
    }
    assert python_architectures("extra_cuda_cflags=['-O3']") == {}


def test_cuda_architectures_in_cmake_and_the_values_init_cannot_read():
    text = 'set(CMAKE_CUDA_ARCHITECTURES "80;90a")  # Ampere, Hopper\n'
    text += "set_target_properties(k PROPERTIES CUDA_ARCHITECTURES 100a-real native)\n"
    assert cmake_architectures(text) == (["sm_80", "sm_90a", "sm_100a"], ["native"])


def test_setup_py_gives_sorted_architectures_its_include_folders_and_names_an_unchecked_out_submodule(tmp_path):
    root = setup_py_layout(tmp_path / "matmul")
    facts = read_build_files(root, root / "csrc")
    assert facts.architectures == ["sm_80", "sm_86", "sm_90a"]
    assert facts.found_in == ["setup.py (-gencode)", "setup.py (TORCH_CUDA_ARCH_LIST)"]
    assert facts.include_dirs == ["csrc/common", "third_party/cutlass/include"]
    assert facts.notes == [
        "include folder third_party/cutlass/include (named in setup.py) lies in the git submodule third_party/cutlass, "
        "which is not checked out here: git submodule update --init third_party/cutlass (a review checks out the "
        "commit base and head pin)"
    ]


def test_a_missing_include_folder_outside_any_submodule_is_left_out_and_said(tmp_path):
    root = setup_py_layout(tmp_path / "matmul", submodule=False)
    facts = read_build_files(root, root / "csrc")
    assert facts.include_dirs == ["csrc/common"]
    assert facts.notes == [
        "include folder third_party/cutlass/include (named in setup.py) is not in the repository: left out"
    ]


def test_cmake_above_the_kernel_folder_names_architectures_and_include_directories(tmp_path):
    root = header_only_layout(tmp_path / "fp8lib")
    facts = read_build_files(root, root / "opgate" / "instantiations")
    assert facts.read == ["CMakeLists.txt"]
    assert facts.architectures == ["sm_90a", "sm_100a"] and facts.found_in == ["CMakeLists.txt (CUDA_ARCHITECTURES)"]
    assert facts.include_dirs == ["include"]


def test_a_load_script_at_the_root_is_read_and_flags_built_in_code_are_named_not_guessed(tmp_path):
    root = write(
        tmp_path,
        {
            "bench.py": "from torch.utils.cpp_extension import load\n"
            "load(name='m', sources=['main.cpp', 'flash.cu'], extra_cuda_cflags=['-arch=sm_89'])\n",
            "setup.py": "flags = []\nfor a in ARCHS:\n    flags += ['-gencode', f'arch=compute_{a},code=sm_{a}']\n",
        },
    )
    facts = read_build_files(root, root)
    assert facts.architectures == ["sm_89"] and facts.found_in == ["bench.py (-arch)"]
    assert facts.notes == [
        "setup.py: -gencode flags built in code (a loop or an f-string): name the architectures in [constraints] "
        "architectures"
    ]


def test_an_architecture_named_under_its_own_condition_keeps_it_and_one_every_architecture_shares_is_dropped():
    text = """
if not SKIP_CUDA_BUILD:
    if cuda < Version("13.0"):
        flags += ["-gencode", "arch=compute_70,code=sm_70"]
    else:
        flags += ["-gencode", "arch=compute_100a,code=sm_100a"]
    flags += ["-gencode", "arch=compute_80,code=sm_80"]
    if cuda < Version("13.0"):
        flags += ["-gencode", "arch=compute_80,code=sm_80"]
"""
    assert architecture_conditions(text) == {
        "sm_70": "cuda < Version('13.0')",
        "sm_100a": "not (cuda < Version('13.0'))",
        "sm_80": None,  # also named under no condition of its own
    }


def test_without_an_nvcc_that_lists_its_targets_every_architecture_is_drafted_and_the_conditions_still_said():
    facts = BuildFacts(architectures=["sm_70", "sm_90a"], conditions={"sm_70": "setup.py: if cuda < Version('13.0')"})
    assert buildable(facts, None, None) == (
        ["sm_70", "sm_90a"],
        ["a choice: sm_70: setup.py adds it only if cuda < Version('13.0')"],
    )
    assert buildable(facts, ("sm_80", "sm_90"), "13.0.88") == (
        ["sm_90a"],
        [
            "left out: sm_70: nvcc 13.0.88 here cannot build it; setup.py adds it only if cuda < Version('13.0') "
            "(a choice: add it for a runner whose nvcc builds it)"
        ],
    )


def test_nvcc_flags_are_evaluated_from_the_ast_through_names_helpers_and_branches_never_run():
    text = """
import os
def add_threads(args):
    return args + ["--threads", "4"]
cc = ["-gencode", "arch=compute_80,code=sm_80"]
if torch.version.hip:
    cc.append("-DHIP_ONLY")
    args = {"nvcc": ["-O3", "--offload-arch=gfx90a"]}
else:
    try:
        cc += ["-lineinfo"]
    except ImportError:
        cc += ["-never"]
    args = {"cxx": ["-O2"], "nvcc": add_threads(["-O3", f"-DNAME={os.getenv('X')}", *cc])}
os.system("never run")
"""
    assert python_flags(text) == (
        {"cxx": ["-O2"], "nvcc": ["-O3", "-gencode", "arch=compute_80,code=sm_80", "-lineinfo", "--threads", "4"]},
        {"cxx": 'extra_compile_args["cxx"]', "nvcc": 'extra_compile_args["nvcc"]'},
        ["f\"-DNAME={os.getenv('X')}\""],
    )


def test_the_package_name_comes_from_setup_then_pyproject_then_the_one_package_folder(tmp_path):
    from bot.config.buildfiles import package_name

    repo = write(tmp_path / "clone", {"tests/__init__.py": "", "fast_conv/__init__.py": "", "csrc/k.cu": ""})
    assert package_name(repo) == ("fast_conv", "the package folder fast_conv/")
    write(repo, {"pyproject.toml": '[project]\nname = "fast-conv"\n'})
    assert package_name(repo) == ("fast-conv", "pyproject.toml [project] name")
    write(repo, {"setup.py": 'NAME = "conv_ext"\nsetup(name=NAME, version=read_version())\n'})
    assert package_name(repo) == ("conv_ext", "setup.py setup(name=…)")
    assert package_name(write(tmp_path / "bare", {"a/__init__.py": "", "b/__init__.py": ""})) is None
