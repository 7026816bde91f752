"""On a GPU runner: the CUDA runtime's occupancy (cudaOccupancyMaxActiveBlocksPerMultiprocessor) agrees with
bot/verdict/occupancy.py for every allowed config of every kernel, and the device's properties are those of the
calculator's table for its compute capability (sm_90 on an H100/H200, sm_80 on an A100, sm_89 on an L4 …)."""

from __future__ import annotations

import os
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from bot.config.manifest import load_kernel
from bot.verdict.occupancy import SM90, Arch, occupancy, table
from tests.conftest import KERNELS
from tests.cuda_launcher import LAUNCHERS, configs, read_launchers, runtime_main

torch = pytest.importorskip("torch")

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.slow,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU and a CUDA build of torch"),
    pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on the PATH"),
]


def props(arch: Arch) -> list[int]:
    """What cudaGetDeviceProperties reports on a GPU of `arch`, in tests/cuda_probe.py's `props` order."""
    return [
        *arch.compute, arch.max_threads_per_block, arch.max_warps_per_sm * arch.warp_size, arch.smem_per_block,
        arch.smem_per_sm, arch.smem_per_block_optin, arch.smem_reserved_per_block, arch.registers_per_sm,
        arch.max_blocks_per_sm,
    ]  # fmt: skip


def _check(kernel, config, workdir: Path) -> list[str]:
    found = read_launchers(kernel, config, workdir, runtime_main(kernel))
    if found.error:
        return [found.error]
    problems = []
    ptxas = sorted((r.registers, r.smem_bytes) for r in found.resources)
    runtime = []
    sm: Arch = SM90
    for line in found.stdout.splitlines():
        kind, *fields = line.split()
        if kind == "props":
            arch = table(f"sm_{fields[0]}{fields[1]}")
            if arch is None:
                problems.append(f"compute capability {fields[0]}.{fields[1]}: the calculator has no table for it")
                continue
            sm = arch
            if [int(x) for x in fields] != props(arch):
                problems.append(f"device properties {fields} differ from the calculator's {arch.name} {props(arch)}")
        if kind != "fn":
            continue
        name = fields[0]
        regs, static, _, threads, dynamic, blocks, error = (int(x) for x in fields[1:])
        runtime.append((regs, static))
        ours = occupancy(regs, threads, static, dynamic, arch=sm)
        if error or ours.blocks_per_sm != blocks:
            problems.append(
                f"{config} {name}: runtime {blocks} blocks/SM (error {error}), bot/verdict/occupancy.py "
                f"{ours.blocks_per_sm} on {sm.name} ({regs} registers, {threads} threads, {static} + {dynamic} B smem)"
            )
    if sorted(runtime) != ptxas:
        problems.append(f"{config}: ptxas (registers, static smem) {ptxas} != the runtime's {sorted(runtime)}")
    return problems


@pytest.mark.parametrize("name", sorted(LAUNCHERS))
def test_the_runtime_agrees_with_the_calculator_for_every_allowed_config(name, tmp_path):
    kernel = load_kernel(KERNELS / name)
    jobs = list(enumerate(configs(kernel)))
    with ThreadPoolExecutor(max_workers=max(1, min(8, os.cpu_count() or 1))) as pool:
        results = pool.map(lambda job: _check(kernel, job[1], tmp_path / str(job[0])), jobs)
    problems = [p for r in results for p in r]
    assert not problems, "\n".join(problems)
