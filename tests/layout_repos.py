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


# A causal-conv1d-like setup.py: -gencode pairs appended to cc_flag, some only for an older or a newer CUDA, nvcc flags
# of its own passed through a helper that adds --threads, a HIP branch with flags for AMD's compiler, and the package
# named by a variable (the clone's folder says nothing of it).
CONV_SETUP_PY = """\
import os
from setuptools import setup, find_packages
from torch.utils.cpp_extension import BuildExtension, CUDAExtension, CUDA_HOME

PACKAGE_NAME = "causal_conv1d"
HIP_BUILD = bool(os.getenv("HIP"))


def append_nvcc_threads(nvcc_extra_args):
    return nvcc_extra_args + ["--threads", "4"]


cc_flag = []
if HIP_BUILD:
    cc_flag.append("-DBUILD_PYTHON_PACKAGE")
else:
    bare_metal_version = get_cuda_bare_metal_version(CUDA_HOME)
    if bare_metal_version <= Version("12.9"):
        cc_flag.append("-gencode")
        cc_flag.append("arch=compute_62,code=sm_62")
        cc_flag.append("-gencode")
        cc_flag.append("arch=compute_70,code=sm_70")
    cc_flag.append("-gencode")
    cc_flag.append("arch=compute_80,code=sm_80")
    if bare_metal_version >= Version("11.8"):
        cc_flag.append("-gencode")
        cc_flag.append("arch=compute_90,code=sm_90")

if HIP_BUILD:
    extra_compile_args = {
        "cxx": ["-O3", "-std=c++17"],
        "nvcc": ["-O3", f"--offload-arch={os.getenv('HIP_ARCHITECTURES', 'native')}"] + cc_flag,
    }
else:
    extra_compile_args = {
        "cxx": ["-O3"],
        "nvcc": append_nvcc_threads(
            [
                "-O3",
                "-U__CUDA_NO_HALF_OPERATORS__",
                "--expt-relaxed-constexpr",
                "--use_fast_math",
                "--ptxas-options=-v",
                "-lineinfo",
            ]
            + cc_flag
        ),
    }

setup(
    name=PACKAGE_NAME,
    packages=find_packages(exclude=("csrc", "tests")),
    ext_modules=[
        CUDAExtension(
            name="causal_conv1d_cuda",
            sources=["csrc/causal_conv1d.cpp", "csrc/causal_conv1d_fwd.cu", "csrc/causal_conv1d_update.cu"],
            extra_compile_args=extra_compile_args,
        )
    ],
    cmdclass={"build_ext": BuildExtension},
)
"""

CONV_FWD_CU = """\
#include "causal_conv1d.h"

template <int kNThreads_>
struct Fwd_traits {
    static constexpr int kNThreads = kNThreads_;
};

template <typename Ktraits>
__global__ __launch_bounds__(Ktraits::kNThreads)
void causal_conv1d_fwd_kernel(ConvParams params) {}

template <int kNThreads>
void causal_conv1d_fwd_launch(ConvParams &params, cudaStream_t stream) {
    using Ktraits = Fwd_traits<kNThreads>;
    dim3 grid(params.batch, params.dim);
    auto kernel = &causal_conv1d_fwd_kernel<Ktraits>;
    kernel<<<grid, Ktraits::kNThreads, 0, stream>>>(params);
}

void causal_conv1d_fwd_cuda(ConvParams &params, cudaStream_t stream) { causal_conv1d_fwd_launch<128>(params, stream); }
"""

CONV_UPDATE_CU = """\
#include "causal_conv1d.h"

template <int kNThreads_>
struct Update_traits {
    static constexpr int kNThreads = kNThreads_;
};

template <typename Ktraits, bool kIsCircularBuffer>
__global__ __launch_bounds__(Ktraits::kNThreads)
void causal_conv1d_update_kernel(ConvParams params) {}

void causal_conv1d_update_cuda(ConvParams &params, cudaStream_t stream) {
    using Ktraits = Update_traits<64>;
    dim3 grid(params.batch, params.dim);
    auto kernel = params.cache_seqlens == nullptr
        ? &causal_conv1d_update_kernel<Ktraits, false>
        : &causal_conv1d_update_kernel<Ktraits, true>;
    kernel<<<grid, Ktraits::kNThreads, 0, stream>>>(params);
}
"""


def conv1d_layout(root: Path) -> Path:
    """A causal depthwise conv1d extension as its team lays it out: setup.py (CONV_SETUP_PY) at the root, the
    package folder causal_conv1d/, the sources in csrc/ launched through a local function pointer `kernel`."""
    root.mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    return write(
        root,
        {
            "setup.py": CONV_SETUP_PY,
            "causal_conv1d/__init__.py": '__version__ = "1.0.0"\n',
            "causal_conv1d/causal_conv1d_interface.py": "import causal_conv1d_cuda\n",
            "csrc/causal_conv1d.h": "#pragma once\n#include <cuda_runtime.h>\n"
            "struct ConvParams { int batch, dim; void *cache_seqlens; };\n",
            "csrc/causal_conv1d.cpp": '#include <torch/extension.h>\n#include "causal_conv1d.h"\n\n'
            "void causal_conv1d_fwd_cuda(ConvParams &params, cudaStream_t stream);\n\n"
            "void causal_conv1d_fwd(const at::Tensor &x, at::Tensor &out, bool silu_activation) {\n"
            "    ConvParams params{};\n    causal_conv1d_fwd_cuda(params, nullptr);\n}\n\n"
            'PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("causal_conv1d_fwd", &causal_conv1d_fwd); }\n',
            "csrc/causal_conv1d_fwd.cu": CONV_FWD_CU,
            "csrc/causal_conv1d_update.cu": CONV_UPDATE_CU,
        },
    )
