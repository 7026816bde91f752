"""`opgate init`: a kernel repository gets its configuration, manifests, .env.example and the workflow caller."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from bot import UPSTREAM
from bot.commands.init import caller
from bot.config.repo import load_config
from tests.conftest import discover, git

SHA = "0123456789abcdef0123456789abcdef01234567"


def kernel_repository(root: Path) -> Path:
    """A team's repository before opgate: two kernel folders under ops/, one of them CPU-only."""
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    for name, files in {
        "moe_gate": ["gate_cuda.cu", "binding_cuda.cpp", "gate_cpu.cpp", "binding_cpu.cpp", "gate_config.json"],
        "rmsnorm": ["rmsnorm.cpp"],
        "docs": [],
    }.items():
        (root / "ops" / name).mkdir(parents=True)
        for f in files:
            (root / "ops" / name / f).write_text("{}\n" if f.endswith(".json") else "// kernel\n")
    (root / "ops" / "Not-A-Name").mkdir()
    (root / "ops" / "Not-A-Name" / "x.cu").write_text("// x\n")
    return root


def test_init_scaffolds_a_repository_that_lints_clean_and_loads(opgate, tmp_path):
    repo = kernel_repository(tmp_path / "kernels-team")
    run = opgate("init", "--repo", str(repo), "--kernels", "ops", "--domain", "moe", "--pin", SHA)
    assert run.code == 0, run.stderr
    assert run.stdout.splitlines()[:13] == [
        "opgate: wrote opgate.toml",
        "opgate: wrote ops/Not-A-Name/tunables.json",
        "opgate: wrote ops/Not-A-Name/kernel.toml",
        "opgate: wrote ops/Not-A-Name/reference.py",
        "opgate: wrote ops/Not-A-Name/agent_task.json",
        "opgate: wrote ops/moe_gate/kernel.toml",
        "opgate: wrote ops/moe_gate/reference.py",
        "opgate: wrote ops/moe_gate/agent_task.json",
        "opgate: wrote ops/rmsnorm/tunables.json",
        "opgate: wrote ops/rmsnorm/kernel.toml",
        "opgate: wrote ops/rmsnorm/reference.py",
        "opgate: wrote ops/rmsnorm/agent_task.json",
        "opgate: wrote .env.example",
    ]
    assert (
        "opgate: note: ops/Not-A-Name: kernel named not_a_name (its kernel.toml's name; the folder keeps its own)"
        in (run.stdout)
    )  # a display name: the folder keeps its own
    assert "opgate: skipped ops/docs: no .cu, .cpp or .cc source in it or its subfolders" in run.stdout
    assert "opgate lint: 0 error(s), 0 warning(s), 3 info" in run.stderr  # the three model placeholders

    config = load_config(repo)
    assert config.manifests == ["ops/*/kernel.toml"] and list(config.domains) == ["moe"]
    assert config.key_variable("moe") == "TAOTOKEN_API_KEY_MOE_AGENT"
    kernels = discover(repo, config)
    assert kernels["not_a_name"].path == "ops/Not-A-Name"
    gate, norm = kernels["moe_gate"].manifest, kernels["rmsnorm"].manifest
    assert gate.build["cuda"].sources == ["gate_cuda.cu", "binding_cuda.cpp"]
    assert gate.build["cpu"].sources == ["binding_cpu.cpp", "gate_cpu.cpp"] and gate.config == "gate_config.json"
    assert set(norm.build) == {"cpu"} and norm.globs == ["ops/rmsnorm/**"] and norm.domain == "moe"
    assert (
        kernels["rmsnorm"].task is not None
        and kernels["rmsnorm"].task.provider.api_key_env == "TAOTOKEN_API_KEY_MOE_AGENT"
    )
    assert "TAOTOKEN_API_KEY_MOE_AGENT=YOUR_MOE_KEY" in (repo / ".env.example").read_text()
    assert (repo / ".github" / "workflows" / "opgate.yml").read_text() == caller(UPSTREAM, SHA)

    again = opgate("init", "--repo", str(repo), "--json")  # the configuration now says where and which domain
    data = json.loads(again.stdout)
    assert again.code == 0 and data["written"] == [] and data["skipped"][0]["folder"] == "ops/docs"
    assert data["ignored"] == []  # .gitignore holds opgate's outputs already: nothing appended twice
    assert {"opgate.toml", "ops/moe_gate/kernel.toml", ".env.example", ".github/workflows/opgate.yml"} <= set(
        data["kept"]
    )
    # Nothing was written, so the next steps do not ask for references it did not write.
    assert not any("write the reference.py" in step for step in data["next"])
    assert data["next"][0].startswith(
        "every kernel folder already has its kernel.toml: nothing to write; then opgate check"
    )


def test_init_refuses_what_it_cannot_decide_with_the_fix(opgate, tmp_path):
    bare = tmp_path / "bare"
    bare.mkdir()
    git(bare, "init", "-q")
    run = opgate("init", "--repo", str(bare))
    assert run.code == 2 and "give --kernels DIR" in run.stderr
    repo = kernel_repository(tmp_path / "team")
    (repo / "opgate.toml").write_text(
        "[domains.a]\nweekly_budget = 1\nrequest_budget = 1\n[domains.b]\nweekly_budget = 1\nrequest_budget = 1\n"
    )
    run = opgate("init", "--repo", str(repo), "--kernels", "ops")
    assert run.code == 2 and "configures a, b: give --domain NAME" in run.stderr
    run = opgate("init", "--repo", str(repo), "--kernels", "ops", "--domain", "c")
    assert run.code == 2 and "domain 'c' is not configured (configured: a, b)" in run.stderr


TUTORIAL = Path(__file__).resolve().parent / "fixtures" / "torch_library_repo"


def tutorial_repository(root: Path, *, git_repo: bool = True) -> Path:
    """A copy of the fixture laid out like PyTorch's custom-operator tutorial (ops/csrc/, ops/csrc/cuda/)."""
    shutil.copytree(TUTORIAL, root)
    if git_repo:
        git(root, "init", "-q", "-b", "main")
    return root


def test_init_turns_a_torch_library_op_into_a_torch_ops_entry_with_its_scalar_and_both_builds(opgate, tmp_path):
    repo = tutorial_repository(tmp_path / "ext")
    (repo / ".gitignore").write_text("build/\n*.so")  # the team's own lines stay, in front
    run = opgate("init", "--repo", str(repo), "--kernels", "ops", "--domain", "moe")
    assert run.code == 0, run.stderr
    assert "opgate: note: ops/csrc: kernel named extension_cpp (its kernel.toml's name; the folder keeps its own)" in (
        run.stdout
    )
    assert "opgate: added to .gitignore: /reports/latest/ /reports/opgate.sqlite*" in run.stdout
    assert (repo / ".gitignore").read_text().startswith("build/\n*.so\n\n# opgate's outputs")
    next_steps = [line for line in run.stdout.splitlines() if line.startswith("next: ")]
    assert next_steps[0] == (
        "next: write the reference.py (make_inputs, reference) and the [[cases]] of ops/csrc; then opgate check "
        "(seconds: validates, builds, runs the smallest case once, nothing timed)"
    )
    kernel = discover(repo, load_config(repo))["extension_cpp"]
    m = kernel.manifest
    assert kernel.path == "ops/csrc" and m.globs == ["ops/csrc/**"]
    assert m.build["cpu"].sources == ["muladd.cpp"]
    assert m.build["cuda"].sources == ["cuda/muladd.cu", "muladd.cpp"]  # the CUDA build needs the op's definition
    for spec in m.build.values():
        assert (spec.entry, spec.args) == ("torch.ops.extension_cpp.mymuladd", ["c"])
    assert [(c.name, c.device, c.params) for c in m.cases] == [
        ("smoke", "cpu", {"c": 1.5}),
        ("smoke_cuda", "cuda", {"c": 1.5}),
    ]
    reference = (repo / "ops" / "csrc" / "reference.py").read_text()
    assert "def reference(a: torch.Tensor, b: torch.Tensor, c: float) -> torch.Tensor:" in reference
    assert "return a.to(device), b.to(device)\n" in reference


def test_init_finds_flashmla_sources_in_instantiations_one_kernel_per_folder(opgate, tmp_path):
    repo = tmp_path / "flashmla"
    decode = repo / "csrc" / "sm90" / "decode"
    files = {
        "dense/splitkv_mla.cuh": "template <typename T> __global__ void splitkv_mla_kernel(T *out) {}\n",
        "dense/traits.h": "struct Traits {};\n",
        "dense/instantiations/bf16.cu": '#include "../splitkv_mla.cuh"\ntemplate __global__ void '
        "splitkv_mla_kernel<float>(float *);\n",
        "sparse_fp8/splitkv_mla.cuh": "__global__ void sparse_kernel() {}\n",
        "sparse_fp8/components/config.h": "#define BLOCK 64\n",
        "sparse_fp8/instantiations/v32.cu": '#include "../splitkv_mla.cuh"\n',
        "sparse_fp8/instantiations/model1.cu": '#include "../splitkv_mla.cuh"\n',
    }
    for rel, text in files.items():
        (decode / rel).parent.mkdir(parents=True, exist_ok=True)
        (decode / rel).write_text(text)
    git(repo, "init", "-q", "-b", "main")
    run = opgate("init", "--repo", str(repo), "--kernels", "csrc/sm90/decode", "--domain", "flashmla", "--json")
    assert run.code == 0, run.stderr
    data = json.loads(run.stdout)
    assert data["skipped"] == []
    assert {"csrc/sm90/decode/dense/kernel.toml", "csrc/sm90/decode/sparse_fp8/kernel.toml"} <= set(data["written"])
    no_binding = (  # a header-only layout: its instantiation files, compiled for the resource check, no cases
        "no torch binding (TORCH_LIBRARY or PYBIND11_MODULE) in its sources, only .cu files that include kernel "
        "headers (instantiation files): written as a resource-only kernel (compiled for every architecture, no cases)"
    )
    assert any(n.startswith(f"csrc/sm90/decode/dense: {no_binding}") for n in data["notes"]), data["notes"]
    assert not (decode / "dense" / "reference.py").exists()
    kernels = discover(repo, load_config(repo))
    dense, sparse = kernels["dense"].manifest, kernels["sparse_fp8"].manifest
    assert dense.cases == [] and dense.build["cuda"].entry == ""
    assert set(dense.build) == {"cuda"} and dense.build["cuda"].sources == ["instantiations/bf16.cu"]
    assert sparse.build["cuda"].sources == ["instantiations/model1.cu", "instantiations/v32.cu"]
    assert dense.globs == ["csrc/sm90/decode/dense/**"]  # ../splitkv_mla.cuh and traits.h are the kernel's own
    from bot.untrusted.build import compiled_files

    assert {"instantiations/bf16.cu", "splitkv_mla.cuh", "traits.h"} <= compiled_files(
        kernels["dense"].folder, dense.build["cuda"], "cuda"
    )
    assert data["next"][0].startswith(
        "write the reference.py (make_inputs, reference) and the [[cases]] of csrc/sm90/decode/dense, "
        "csrc/sm90/decode/sparse_fp8; then opgate check"
    )


def test_init_names_a_folder_that_is_not_a_git_repository_and_refuses_one_without_sources(
    opgate, tmp_path, tmp_path_factory
):
    # outside tmp_path, whose opgate.toml (the runner's cwd) a folder without git would find above it
    repo = tutorial_repository(tmp_path_factory.mktemp("plain") / "ext", git_repo=False)
    run = opgate("init", "--repo", str(repo), "--kernels", "ops/csrc", "--domain", "moe")
    assert run.code == 0, run.stderr
    assert f"opgate: note: {repo} is not a git repository: opgate review compares two git revisions, so git init " in (
        run.stdout
    )
    assert 'manifests = ["ops/csrc/kernel.toml"]' in (repo / "opgate.toml").read_text()  # the folder is the kernel
    assert not (repo / "ops" / "csrc" / "cuda" / "kernel.toml").exists()  # its subfolder is part of it

    empty = tmp_path / "docs-only"
    (empty / "docs" / "guide").mkdir(parents=True)
    (empty / "docs" / "guide" / "index.md").write_text("# guide\n")
    git(empty, "init", "-q")
    run = opgate("init", "--repo", str(empty), "--kernels", "docs", "--domain", "moe")
    assert run.code == 2
    assert "no kernel source (.cu, .cpp, .cc) in docs or its subfolders: give --kernels the folder" in run.stderr
    assert sorted(p.name for p in empty.iterdir()) == [".git", "docs"]  # nothing written


def test_init_proposes_the_arguments_an_entry_returning_nothing_writes(opgate, tmp_path):
    """A pybind function defined `void` (non-const `Tensor&` written) and a TORCH_LIBRARY op `-> ()` (`Tensor(a!)`)."""
    repo = tmp_path / "mul"
    shutil.copytree(Path(__file__).parent / "fixtures" / "out_arg_repo", repo)
    (repo / "ops" / "axpy").mkdir()
    (repo / "ops" / "axpy" / "axpy.cpp").write_text(
        '#include <torch/library.h>\nTORCH_LIBRARY(axpy, m) { m.def("axpy_out(Tensor x, Tensor(a!) out, float alpha, '
        'Tensor(b!) scratch_space) -> ()"); }\n'
    )
    git(repo, "init", "-q", "-b", "main")
    run = opgate("init", "--repo", str(repo), "--kernels", "ops", "--domain", "moe")
    assert run.code == 0, run.stderr
    assert (
        "opgate: note: ops/mul: mul returns nothing and writes C (output), workspace (scratch): drafted as "
        "outputs/scratch; confirm their [buffers] shapes"
    ) in run.stdout
    kernels = discover(repo, load_config(repo))
    mul = kernels["mul"].manifest
    spec = mul.build["cpu"]
    assert (spec.entry, spec.arguments, spec.outputs, spec.scratch) == (
        "mul", ["A", "B", "C", "s", "workspace"], ["C"], ["workspace"]
    )  # fmt: skip
    assert spec.inputs() == ["A", "B", "s"] and set(mul.buffers) == {"C", "workspace"}
    reference = (repo / "ops" / "mul" / "reference.py").read_text()
    assert "return A.to(device), B.to(device), s.to(device)\n" in reference  # make_inputs: the inputs only
    assert "def reference(A: torch.Tensor, B: torch.Tensor, s: torch.Tensor) -> torch.Tensor:" in reference
    assert "mul(A, B, C, s, workspace) with C filled with NaN first" in reference
    axpy = kernels["axpy"].manifest.build["cpu"]
    assert (axpy.arguments, axpy.outputs, axpy.scratch, axpy.args) == (
        ["x", "out", "alpha", "scratch_space"], ["out"], ["scratch_space"], ["alpha"]
    )  # fmt: skip
    assert [c.params for c in kernels["axpy"].manifest.cases] == [{"alpha": 1.5}]


def test_init_at_a_root_layout_suggests_kernels_dot_then_writes_a_root_kernel_that_check_accepts(opgate, tmp_path):
    from tests.layout_repos import REFERENCE_PY, root_layout

    repo = root_layout(tmp_path / "flash")
    run = opgate("init", "--repo", str(repo), "--domain", "flash")
    assert run.code == 2
    assert (
        "no kernels/ folder here, and the repository root holds kernel sources (flash.cu, main.cpp): give --kernels . "
        "(the root is the kernel's folder; its globs name only its sources) or --kernels DIR"
    ) in run.stderr
    run = opgate("init", "--repo", str(repo), "--kernels", ".", "--domain", "flash", "--json")
    assert run.code == 0, run.stderr
    data = json.loads(run.stdout)
    assert {"kernel.toml", "reference.py", "tunables.json", "agent_task.json"} <= set(data["written"])
    assert (
        "the repository root: main.cpp binds the .cu files (it declares what they define): built in [build.cuda]"
        in (data["notes"])
    )
    assert 'manifests = ["kernel.toml"]' in (repo / "opgate.toml").read_text()
    manifest = (repo / "kernel.toml").read_text()
    assert "[launch.functions.forward_kernel]   # drafted from flash.cu:" in manifest
    assert "# no architecture found in setup.py, CMakeLists.txt or a cpp_extension.load script" in manifest
    kernel = discover(repo, load_config(repo))["flash"]
    assert kernel.path == "." and set(kernel.manifest.build) == {"cuda"}
    assert kernel.manifest.build["cuda"].sources == ["flash.cu", "main.cpp"]
    assert kernel.globs == ["*.cu", "*.cpp", "kernel.toml", "tunables.json", "agent_task.json", "reference.py"]
    fn = kernel.manifest.launch.functions["forward_kernel"]
    assert (fn.threads, fn.dynamic_smem) == (128, 49152)
    run = opgate("check", "--repo", str(repo))
    assert run.code == 1, run.stdout + run.stderr  # what init left raises: check runs the reference, even on a CPU
    assert "opgate check: flash (.)" in run.stdout and "ok  manifest ./kernel.toml: valid" in run.stdout
    assert "in reference (case smoke): NotImplementedError: reference.py of flash: write the torch reference" in (
        run.stdout
    )
    (repo / "reference.py").write_text(REFERENCE_PY)  # what the team writes after init
    run = opgate("check", "--repo", str(repo))
    assert run.code == 0, run.stdout + run.stderr


def test_init_drafts_architectures_and_include_folders_from_setup_py_and_names_the_missing_submodule(opgate, tmp_path):
    from tests.layout_repos import setup_py_layout

    repo = setup_py_layout(tmp_path / "matmul")
    run = opgate("init", "--repo", str(repo), "--kernels", "csrc", "--domain", "matmul")
    assert run.code == 1, run.stderr  # its own lint: the include folder is missing until the submodule is there
    assert (
        "csrc/kernel.toml:23: KERN005 [build.cuda] include_dirs: 'third_party/cutlass/include' lies in the git "
        "submodule third_party/cutlass, which is not checked out (git submodule update --init third_party/cutlass)"
    ) in run.stdout
    assert (
        "opgate: note: csrc: include folder third_party/cutlass/include (named in setup.py) lies in the git submodule "
        "third_party/cutlass, which is not checked out here: git submodule update --init third_party/cutlass"
    ) in run.stdout
    manifest = (repo / "csrc" / "kernel.toml").read_text()
    assert "# drafted by opgate init from setup.py (-gencode), setup.py (TORCH_CUDA_ARCH_LIST): confirm" in manifest
    assert 'include_dirs = ["csrc/common", "third_party/cutlass/include"]   # from the repository root' in manifest
    assert "[launch.functions.mul_kernel]   # drafted from matmul_kernel.cu:4: confirm\nthreads = 256\n" in manifest
    (repo / "third_party" / "cutlass" / "include").mkdir(parents=True)  # the submodule checked out
    kernel = discover(repo, load_config(repo))["quant_matmul"]  # csrc: named after the package, setup(name=…)
    spec = kernel.manifest.build["cuda"]
    assert kernel.manifest.constraints.architectures == ["sm_80", "sm_86", "sm_90a"]
    assert spec.sources == ["matmul_kernel.cu", "matmul.cpp"] and "cpu" not in kernel.manifest.build


def test_init_writes_a_header_only_library_as_a_resource_only_kernel_with_its_include_folder(opgate, tmp_path):
    from tests.layout_repos import header_only_layout

    repo = header_only_layout(tmp_path / "fp8lib")
    run = opgate("init", "--repo", str(repo), "--kernels", "opgate/instantiations", "--domain", "fp8")
    assert run.code == 0, run.stderr
    kernel = discover(repo, load_config(repo))["instantiations"]
    assert kernel.manifest.cases == [] and kernel.manifest.build["cuda"].include_dirs == ["include"]
    assert kernel.manifest.constraints.architectures == ["sm_90a", "sm_100a"]
    assert not (repo / "opgate" / "instantiations" / "reference.py").exists()
    headers_only = tmp_path / "headers"
    (headers_only / "lib").mkdir(parents=True)
    (headers_only / "lib" / "gemm.cuh").write_text("template <int N> __global__ void k() {}\n")
    git(headers_only, "init", "-q")
    run = opgate("init", "--repo", str(headers_only), "--kernels", "lib", "--domain", "fp8")
    assert run.code == 2 and "no kernel source (.cu, .cpp, .cc) in lib" in run.stderr


def test_init_drafts_the_architectures_the_installed_nvcc_builds_and_names_setup_pys_conditions_as_choices(
    opgate, tmp_path
):
    from bot.edges.machine import gpu_codes, nvcc_version
    from tests.layout_repos import conv1d_layout

    codes = gpu_codes()
    if codes is None or {"sm_62", "sm_70"} & set(codes) or not {"sm_80", "sm_90"} <= set(codes):
        pytest.skip(f"needs an nvcc that builds sm_80 and sm_90 but not sm_62 or sm_70 (CUDA 13); here: {codes}")
    repo = conv1d_layout(tmp_path / "clone")
    run = opgate("init", "--repo", str(repo), "--kernels", "csrc")
    assert run.code == 0, run.stdout + run.stderr
    manifest = (repo / "csrc" / "kernel.toml").read_text()
    nvcc = nvcc_version()
    assert (
        "# drafted by opgate init from setup.py (-gencode): confirm (the resource check compiles each)\n"
        f"# left out: sm_62, sm_70: nvcc {nvcc} here cannot build them; setup.py adds them only if bare_metal_version "
        "<= Version('12.9') (a choice: add them for a runner whose nvcc builds them)\n"
        "# a choice: sm_90: setup.py adds it only if bare_metal_version >= Version('11.8'); "
        f"nvcc {nvcc} here builds it\n"
        'architectures = ["sm_80", "sm_90"]\n'
    ) in manifest
    assert (
        "opgate: note: csrc: setup.py (-gencode) names sm_62, sm_70, which the installed nvcc cannot build: left out "
        "of [constraints] architectures (a choice, said in its kernel.toml)"
    ) in run.stdout


def test_init_drafts_the_nvcc_flags_setup_py_passes_less_its_targets_and_ptxas_v(opgate, tmp_path):
    from tests.layout_repos import conv1d_layout

    repo = conv1d_layout(tmp_path / "clone")
    run = opgate("init", "--repo", str(repo), "--kernels", "csrc", "--domain", "conv")
    assert run.code == 0, run.stdout + run.stderr
    manifest = (repo / "csrc" / "kernel.toml").read_text()
    assert (
        '# drafted by opgate init from setup.py extra_compile_args["nvcc"], as it passes them: confirm\n'
        "# left out: its target options (4, -gencode arch=compute_62,code=sm_62 …): the architectures are "
        "[constraints] architectures below (the resource check compiles each one with its own)\n"
        "# left out: -v of --ptxas-options=-v: ptxas's -v is the resource check's own (it reads every function's "
        "registers and spills from it); in a build it only prints them into the log\n"
        "# added: -std=c++17, as torch's BuildExtension adds it when the build names none\n"
    ) in manifest
    spec = next(iter(discover(repo, load_config(repo)).values())).manifest.build["cuda"]
    assert spec.cuda_cflags == [
        "-O3",
        "-U__CUDA_NO_HALF_OPERATORS__",
        "--expt-relaxed-constexpr",
        "--use_fast_math",
        "-lineinfo",
        "--threads",
        "4",
        "-std=c++17",
    ]  # fmt: skip  (the HIP branch's --offload-arch and -DBUILD_PYTHON_PACKAGE are AMD's build's)
    assert spec.cflags == ["-O3", "-std=c++17"]


def test_init_drafts_launches_through_a_local_function_pointer_under_the_kernel_functions_name(opgate, tmp_path):
    from tests.layout_repos import conv1d_layout

    repo = conv1d_layout(tmp_path / "clone")
    run = opgate("init", "--repo", str(repo), "--kernels", "csrc", "--domain", "conv")
    assert run.code == 0, run.stdout + run.stderr
    manifest = (repo / "csrc" / "kernel.toml").read_text()
    assert "[launch.functions.kernel]" not in manifest
    assert "[launch.functions.causal_conv1d_fwd_kernel]   # drafted from causal_conv1d_fwd.cu:17: confirm\n" in manifest
    assert (
        "[launch.functions.causal_conv1d_update_kernel]   # drafted from causal_conv1d_update.cu:18: confirm\n"
        "dynamic_smem = 0\n"
    ) in manifest


def test_init_names_the_kernel_and_its_domain_after_the_package_not_the_clones_folder(opgate, tmp_path):
    from tests.layout_repos import conv1d_layout

    repo = conv1d_layout(tmp_path / "clone")
    run = opgate("init", "--repo", str(repo), "--kernels", "csrc")
    assert run.code == 0, run.stdout + run.stderr
    config = load_config(repo)
    assert sorted(config.domains) == ["causal_conv1d"]  # setup(name=PACKAGE_NAME), PACKAGE_NAME = "causal_conv1d"
    kernel = discover(repo, config)["causal_conv1d"]
    assert kernel.manifest.domain == "causal_conv1d"


def test_init_routes_an_architectures_review_jobs_to_its_runner_labels(opgate, tmp_path):
    """`--arch-runner`: the caller passes opgate-review.yml's arch-runners (each architecture's family, as the plan's
    review matrix names it), so two kernels built for two GPU generations are reviewed on two runner labels."""
    repo = kernel_repository(tmp_path / "kernels-team")
    runner = ["--arch-runner", "sm_100a=self-hosted,linux,gpu,sm_100", "--arch-runner", "sm_90=self-hosted,h100"]
    run = opgate("init", "--repo", str(repo), "--kernels", "ops", "--domain", "moe", "--pin", SHA, *runner)
    assert run.code == 0, run.stderr
    text = (repo / ".github" / "workflows" / "opgate.yml").read_text()
    runners = {"sm_100": ["self-hosted", "linux", "gpu", "sm_100"], "sm_90": ["self-hosted", "h100"]}
    assert text == caller(UPSTREAM, SHA, arch_runners=runners)
    review = yaml.safe_load(text)["jobs"]["review"]
    assert json.loads(review["with"]["arch-runners"]) == runners
    assert "with" not in yaml.safe_load(caller(UPSTREAM, SHA))["jobs"]["review"]  # none given: gpu-runner for all

    for bad in ("sm_100", "gpu=self-hosted", "sm_100=self hosted", "sm_100=", "sm_90=a,,b"):
        refused = opgate("init", "--repo", str(tmp_path / "kernels-team"), "--arch-runner", bad)
        assert refused.code == 2 and "--arch-runner" in refused.stderr, (bad, refused.stderr)
    twice = opgate("init", "--repo", str(repo), "--arch-runner", "sm_90a=x", "--arch-runner", "sm_90=y")
    assert twice.code == 2 and "sm_90 is given twice" in twice.stderr
