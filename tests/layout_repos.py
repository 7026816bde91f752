"""Kernel repositories as real teams lay them out, written here (no third-party code): sources at the repository root
loaded with cpp_extension.load, a setup.py CUDAExtension with -gencode flags, a CMake project, a header-only library
adopted through instantiation files."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import git

# A pybind binding at the root: it includes torch/extension.h and declares the launcher flash.cu defines (the .cu holds
# no torch header, as in many extensions: it compiles in seconds).
MAIN_CPP = """\
#include <torch/extension.h>

void forward_cuda(const float *q, const float *k, const float *v, float *o, int n);

torch::Tensor forward(torch::Tensor q, torch::Tensor k, torch::Tensor v) {
    auto o = torch::empty_like(q);
    forward_cuda(q.data_ptr<float>(), k.data_ptr<float>(), v.data_ptr<float>(), o.data_ptr<float>(), q.numel());
    return o;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.def("forward", &forward, "forward");
}
"""

FLASH_CU = """\
#include <cuda_runtime.h>

#define THREADS 128
constexpr int SHARED_MEM = 48 * 1024;

__global__ void forward_kernel(const float *q, const float *k, const float *v, float *o, int n) {
    extern __shared__ float sram[];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        sram[threadIdx.x] = q[i] + k[i];
        o[i] = sram[threadIdx.x] * v[i];
    }
}

void forward_cuda(const float *q, const float *k, const float *v, float *o, int n) {
    cudaFuncSetAttribute(forward_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, SHARED_MEM);
    forward_kernel<<<(n + THREADS - 1) / THREADS, THREADS, SHARED_MEM>>>(q, k, v, o, n);
}
"""

REFERENCE_PY = """\
import torch


def make_inputs(case: dict, device: str, seed: int) -> tuple[torch.Tensor, ...]:
    gen = torch.Generator(device="cpu").manual_seed(seed)
    return tuple(torch.randn(case["shape"]["n"], generator=gen).to(device) for _ in range(3))


def reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return (q + k) * v
"""

BENCH_PY = """\
from torch.utils.cpp_extension import load

minimal_attn = load(name="minimal_attn", sources=["main.cpp", "flash.cu"], extra_cuda_cflags=["-O2"])
"""


def write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


def commit(root: Path, message: str = "initial") -> None:
    git(root, "add", "-A")
    git(root, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", message)


def root_layout(root: Path) -> Path:
    """A minimal flash-attention repository: main.cpp and flash.cu at the root, loaded by bench.py, with a CI
    workflow, tests and docs beside them."""
    root.mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    return write(
        root,
        {
            "main.cpp": MAIN_CPP,
            "flash.cu": FLASH_CU,
            "bench.py": BENCH_PY,
            "README.md": "# minimal flash attention\n",
            ".github/workflows/ci.yml": "on: push\njobs: {}\n",
            "tests/test_attn.py": "def test_nothing():\n    pass\n",
            "docs/index.md": "# docs\n",
        },
    )


SETUP_PY = """\
import os
from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CUDAExtension

here = os.path.dirname(os.path.abspath(__file__))
os.environ["TORCH_CUDA_ARCH_LIST"] = "8.0 8.6+PTX"
cc_flag = []
cc_flag.append("-gencode")
cc_flag.append("arch=compute_90a,code=sm_90a")

setup(
    name="quant_matmul",
    ext_modules=[
        CUDAExtension(
            "quant_matmul",
            ["csrc/matmul.cpp", "csrc/matmul_kernel.cu"],
            include_dirs=[
                os.path.join(here, "csrc", "common"),
                os.path.join(here, "third_party", "cutlass", "include"),
            ],
            extra_compile_args={"cxx": ["-O3"], "nvcc": ["-O3", *cc_flag]},
        )
    ],
    cmdclass={"build_ext": BuildExtension},
)
"""


def setup_py_layout(root: Path, *, submodule: bool = True) -> Path:
    """An FP16xINT4 matmul-like extension: setup.py with TORCH_CUDA_ARCH_LIST and a -gencode pair, its sources in
    csrc/ (a pybind file declaring what the .cu defines), include folders csrc/common and the cutlass submodule
    (listed in .gitmodules, not checked out: an empty folder)."""
    root.mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    files = {
        "setup.py": SETUP_PY,
        "csrc/matmul.cpp": "#include <torch/extension.h>\n\nint mul(const void *A, void *C, int m);\n\n"
        'PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("mul", &mul, "mul"); }\n',
        "csrc/matmul_kernel.cu": '#include "common/tile.h"\n\n__global__ void mul_kernel(const void *A, void *C) {}\n'
        "int mul(const void *A, void *C, int m) { mul_kernel<<<m, TILE_THREADS>>>(A, C); return 0; }\n",
        "csrc/common/tile.h": "#define TILE_THREADS 256\n",
    }
    if submodule:
        files[".gitmodules"] = '[submodule "cutlass"]\n\tpath = third_party/cutlass\n\turl = https://example.com/c\n'
        (root / "third_party" / "cutlass").mkdir(parents=True)
    return write(root, files)


def header_only_layout(root: Path) -> Path:
    """A header-only GEMM library (include/fp8lib/impls/*.cuh, CMake with CUDA_ARCHITECTURES) adopted through a
    hand-written instantiation .cu in opgate/instantiations/."""
    root.mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    return write(
        root,
        {
            "CMakeLists.txt": "project(fp8lib LANGUAGES CXX CUDA)\n"
            'set(CMAKE_CUDA_ARCHITECTURES "90a;100a")\n'
            "include_directories(${CMAKE_CURRENT_SOURCE_DIR}/include)\n",
            "include/fp8lib/impls/gemm.cuh": '#pragma once\n#include "../common/utils.cuh"\n'
            "template <int BLOCK_M>\n__global__ void fp8_gemm_kernel(float *out) {\n"
            '    asm volatile("wgmma.fence.sync.aligned;\\n" ::: "memory");\n    out[0] = BLOCK_M;\n}\n',
            "include/fp8lib/common/utils.cuh": "#pragma once\n#define FP8LIB 1\n",
            "opgate/instantiations/gemm_128.cu": "#include <fp8lib/impls/gemm.cuh>\n"
            "template __global__ void fp8_gemm_kernel<128>(float *);\n",
        },
    )
