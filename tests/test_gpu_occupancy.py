"""On a GPU runner: the CUDA runtime's occupancy (cudaOccupancyMaxActiveBlocksPerMultiprocessor) agrees with
bot/occupancy.py for every allowed config of every kernel, and the device is the sm_90 the calculator assumes."""

from __future__ import annotations

import os
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from bot.config.manifest import load_kernel
from bot.verdict.occupancy import SM90, occupancy
from tests.conftest import KERNELS
from tests.cuda_launcher import LAUNCHERS, configs, read_launchers, runtime_main

torch = pytest.importorskip("torch")

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.slow,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU and a CUDA build of torch"),
    pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on the PATH"),
]

SM90_PROPS = [
    9, 0, SM90.max_threads_per_block, SM90.max_warps_per_sm * SM90.warp_size, SM90.smem_per_block, SM90.smem_per_sm,
    SM90.smem_per_block_optin, SM90.smem_reserved_per_block, SM90.registers_per_sm, SM90.max_blocks_per_sm,
]  # fmt: skip


def _check(kernel, config, workdir: Path) -> list[str]:
    found = read_launchers(kernel, config, workdir, runtime_main(kernel))
    if found.error:
        return [found.error]
    problems = []
    ptxas = sorted((r.registers, r.smem_bytes) for r in found.resources)
    runtime = []
    for line in found.stdout.splitlines():
        kind, *fields = line.split()
        if kind == "props" and [int(x) for x in fields] != SM90_PROPS:
            problems.append(f"device properties {fields} differ from the calculator's sm_90 {SM90_PROPS}")
        if kind != "fn":
            continue
        name = fields[0]
        regs, static, _, threads, dynamic, blocks, error = (int(x) for x in fields[1:])
        runtime.append((regs, static))
        ours = occupancy(regs, threads, static, dynamic)
        if error or ours.blocks_per_sm != blocks:
            problems.append(
                f"{config} {name}: runtime {blocks} blocks/SM (error {error}), bot/occupancy.py {ours.blocks_per_sm} "
                f"({regs} registers, {threads} threads, {static} + {dynamic} B smem)"
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
