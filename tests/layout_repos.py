"""Kernel repositories as real teams lay them out, written here (no third-party code): sources at the repository root
loaded with cpp_extension.load, a setup.py CUDAExtension with -gencode flags, a CMake project, a header-only library
adopted through instantiation files."""

from __future__ import annotations

from pathlib import Path

from tests.conftest import git

# A pybind binding at the root: it includes torch/extension.h and declares the function flash.cu defines.
MAIN_CPP = """\
#include <torch/extension.h>

torch::Tensor forward(torch::Tensor q, torch::Tensor k, torch::Tensor v);

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.def("forward", torch::wrap_pybind_function(forward), "forward");
}
"""

FLASH_CU = """\
#include <torch/types.h>
#include <cuda.h>
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

torch::Tensor forward(torch::Tensor q, torch::Tensor k, torch::Tensor v) {
    auto o = torch::zeros_like(q);
    int n = q.numel();
    cudaFuncSetAttribute(forward_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, SHARED_MEM);
    forward_kernel<<<(n + THREADS - 1) / THREADS, THREADS, SHARED_MEM>>>(
        q.data_ptr<float>(), k.data_ptr<float>(), v.data_ptr<float>(), o.data_ptr<float>(), n);
    return o;
}
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
