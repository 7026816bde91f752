"""Compile a kernel's .cu into a tiny host program that prints what its launcher uses (nothing launches).

Each kernel's launcher computes its block size and dynamic shared memory from constants of its own
(`TileCfg<…>::kSmemBytes`, `kSmemBytes`, `kThreads`). The launcher program `#include`s the .cu, so these C++
expressions read exactly the constants the launcher passes to `cudaFuncSetAttribute` and `<<<…>>>`.
The same compile runs ptxas -v, so one nvcc call gives the launcher's numbers and the resources.
"""

from __future__ import annotations

import itertools
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from bot.config.manifest import Kernel
from bot.models.report import Resource
from bot.untrusted import resources
from bot.untrusted.build import defines

ARCH = "sm_90a"


@dataclass(frozen=True)
class Launcher:
    """What one kernel function's launcher passes, as C++ expressions over the .cu's own constants."""

    threads: str
    dynamic_smem: str | None  # None: launched with 0 and no `extern __shared__` array
    kernels: tuple[str, ...]  # the __global__ functions (template instantiations) this launcher starts


@dataclass(frozen=True)
class LauncherSource:
    source: str
    functions: dict[str, Launcher]


_GEMM = "deepgemm_tile::TileCfg<TILE_M, TILE_N, TILE_K>"
LAUNCHERS = {
    "deepgemm_tile": LauncherSource(
        "gemm_cuda.cu",
        {
            "gemm_bf16_kernel": Launcher(
                f"{_GEMM}::kThreads",
                f"{_GEMM}::kSmemBytes",
                tuple(f"deepgemm_tile::gemm_bf16_kernel<TILE_M, TILE_N, TILE_K, {v}>" for v in ("true", "false")),
            )
        },
    ),
    "flashmla_decode": LauncherSource(
        "decode_cuda.cu",
        {
            "mla_decode_kernel": Launcher(
                "flashmla_decode::kThreads", "flashmla_decode::kSmemBytes", ("flashmla_decode::mla_decode_kernel",)
            )
        },
    ),
    "v41_attention_splitk": LauncherSource(
        "attention_cuda.cu",
        {
            name: Launcher("v41_attention::kThreads", None, (f"v41_attention::{name}",))
            for name in ("splitk_partial_kernel", "splitk_merge_kernel")
        },
    ),
}


def configs(kernel: Kernel) -> list[dict[str, int | str]]:
    """Every allowed tunable config of a kernel (the product of its [tunables])."""
    keys = list(kernel.manifest.tunables)
    return [dict(zip(keys, combo, strict=True)) for combo in itertools.product(*kernel.manifest.tunables.values())]


def host_main(kernel: Kernel) -> str:
    """A main() printing `function threads dynamic_smem` for every launcher of the kernel."""
    launchers = LAUNCHERS[kernel.name]
    lines = [f'#include "{launchers.source}"', "#include <cstdio>", "int main() {"]
    for name, launcher in launchers.functions.items():
        smem = launcher.dynamic_smem or "0"
        lines.append(
            f'  std::printf("{name} %lld %lld\\n", static_cast<long long>({launcher.threads}), '
            f"static_cast<long long>({smem}));"
        )
    return "\n".join([*lines, "  return 0;", "}", ""])


def runtime_main(kernel: Kernel) -> str:
    """A main() asking the CUDA runtime (needs a GPU) for each kernel's attributes and resident blocks.

    Prints `props major minor max_threads_per_block max_threads_per_sm smem_per_block smem_per_sm
    smem_optin smem_reserved regs_per_sm max_blocks_per_sm`, then per kernel `fn name num_regs static_smem
    max_threads threads dynamic_smem blocks_per_sm error` after opting in to the launcher's dynamic smem.
    """
    launchers = LAUNCHERS[kernel.name]
    lines = [
        f'#include "{launchers.source}"',
        "#include <cstdio>",
        "template <class K>",
        "static void report(const char* name, K* kernel, long long threads, long long smem) {",
        "  cudaFuncAttributes a{};",
        "  cudaError_t e = cudaFuncGetAttributes(&a, kernel);",
        "  if (e == cudaSuccess && smem > 48 * 1024)",
        "    e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));",
        "  int blocks = -1;",
        "  if (e == cudaSuccess)",
        "    e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel, static_cast<int>(threads),",
        "                                                      static_cast<size_t>(smem));",
        '  std::printf("fn %s %d %zu %d %lld %lld %d %d\\n", name, a.numRegs, a.sharedSizeBytes, a.maxThreadsPerBlock,',
        "              threads, smem, blocks, static_cast<int>(e));",
        "}",
        "int main() {",
        "  cudaDeviceProp p{};",
        "  if (cudaGetDeviceProperties(&p, 0) != cudaSuccess) return 3;",
        '  std::printf("props %d %d %d %d %zu %zu %zu %zu %d %d\\n", p.major, p.minor, p.maxThreadsPerBlock,',
        "              p.maxThreadsPerMultiProcessor, p.sharedMemPerBlock, p.sharedMemPerMultiprocessor,",
        "              p.sharedMemPerBlockOptin, p.reservedSharedMemPerBlock, p.regsPerMultiprocessor,",
        "              p.maxBlocksPerMultiProcessor);",
    ]
    for name, launcher in launchers.functions.items():
        for i, symbol in enumerate(launcher.kernels):
            lines.append(f'  report("{name}#{i}", &{symbol}, {launcher.threads}, {launcher.dynamic_smem or "0"});')
    return "\n".join([*lines, "  return 0;", "}", ""])


@dataclass
class LauncherFigures:
    config: dict[str, int | str]
    launcher: dict[str, tuple[int, int]] = field(default_factory=dict)  # function -> (threads, dynamic smem)
    resources: list[Resource] = field(default_factory=list)
    threads: dict[str, int] = field(default_factory=dict)  # __launch_bounds__
    stdout: str = ""
    error: str = ""


def read_launchers(
    kernel: Kernel, config: dict[str, int | str], workdir: Path, source: str | None = None
) -> LauncherFigures:
    """Compile `source` (default: host_main) against the kernel's .cu for sm_90a with ptxas -v, run it."""
    nvcc = shutil.which("nvcc")
    assert nvcc is not None
    workdir.mkdir(parents=True, exist_ok=True)
    main = workdir / "launchers.cu"
    main.write_text(source or host_main(kernel))
    spec = kernel.manifest.build["cuda"]
    flags = [f for f in spec.cuda_cflags if not f.startswith(("-gencode", "-arch"))]
    cmd = [
        *(nvcc, "-std=c++17", "-O3", f"-arch={ARCH}", "-Xptxas", "-v", "-keep", "-keep-dir", str(workdir)),
        f"-I{kernel.folder.resolve()}",
        *flags,
        *defines(config),
        *(str(main), "-o", str(workdir / "launchers")),
    ]
    out = LauncherFigures(config=config)
    built = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    if built.returncode != 0:
        out.error = f"nvcc failed for {config}:\n{built.stdout}{built.stderr}"
        return out
    ptx = "\n".join(p.read_text() for p in sorted(workdir.glob("*.ptx")))
    found = resources.parse_ptxas(built.stdout + built.stderr, ARCH)
    bounds = resources.parse_ptx_threads(ptx)
    extern = resources.parse_ptx_extern_smem(ptx)
    names = resources.demangle(sorted({r.function for r in found} | set(bounds)), resources.demangler(nvcc))
    out.resources = [
        r.model_copy(update={"function": names[r.function], "extern_smem": r.function in extern}) for r in found
    ]
    out.threads = {names[k]: v for k, v in bounds.items()}
    ran = subprocess.run([str(workdir / "launchers")], capture_output=True, text=True, timeout=120)
    if ran.returncode != 0:
        out.error = f"the launcher program exited {ran.returncode} for {config}: {ran.stdout}{ran.stderr}"
        return out
    out.stdout = ran.stdout
    for line in ran.stdout.splitlines():
        name, *numbers = line.split() or [""]
        if len(numbers) == 2 and all(n.lstrip("-").isdigit() for n in numbers):
            out.launcher[name] = (int(numbers[0]), int(numbers[1]))
    return out
