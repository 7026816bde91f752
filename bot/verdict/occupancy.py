"""Theoretical occupancy on sm_90 (H100/H200) and sm_100 (B200): resident blocks and warps per SM (cuda_occupancy.h)."""

from __future__ import annotations

from dataclasses import dataclass

from bot.models.report import Occupancy

REGISTERS = "registers"
SHARED_MEMORY = "shared memory"
THREADS = "threads"
BLOCKS = "blocks"
BARRIERS = "barriers"


@dataclass(frozen=True)
class Arch:
    """What one SM offers (cudaDeviceProp of an H100/H200, and cuda_occupancy.h's tables for compute 9.x)."""

    name: str = "sm_90"
    compute: tuple[int, int] = (9, 0)
    warp_size: int = 32
    max_threads_per_block: int = 1024
    max_warps_per_sm: int = 64  # 2048 threads
    max_blocks_per_sm: int = 32
    registers_per_sm: int = 65_536
    registers_per_block: int = 65_536
    max_registers_per_thread: int = 256
    register_granularity: int = 256  # registers are allocated per warp, in units of 256
    sub_partitions: int = 4  # a warp's registers come from one of the SM's 4 quarters
    smem_per_sm: int = 233_472  # 228 KiB, the largest carveout (the default preference)
    smem_per_block: int = 49_152  # without opting in
    smem_per_block_optin: int = 232_448  # 227 KiB with cudaFuncAttributeMaxDynamicSharedMemorySize
    smem_reserved_per_block: int = 1_024  # the driver's reserve, counted against every block
    smem_granularity: int = 128
    barriers_per_sm: int = 64  # 2 per block slot


SM90 = Arch()
# Compute capability 10.0 (B200): the CUDA C++ Programming Guide's "Technical Specifications per Compute
# Capability" give it sm_90's per-SM limits (64 warps, 32 blocks, 64K registers, 228 KiB shared memory per SM,
# 227 KiB per block opted in, 1 KiB reserved per block), and cuda_occupancy.h treats compute 10.0 as 9.x in every
# table (granules, 2 barriers per block slot). Its one addition, 128 virtual resources per SM, limits nothing
# here: ptxas reports no virtual-resource count, and cudaFuncGetAttributes gives 0 for these kernels.
SM100 = Arch(name="sm_100", compute=(10, 0))
TABLES = {a.name: a for a in (SM90, SM100)}


def family(arch: str) -> str:
    """`sm_90` from `sm_90a` or `sm_90`; `sm_100` from `sm_100a`/`sm_100f` (the SM a target runs on)."""
    return arch.rstrip("af") if arch.startswith("sm_") else arch


def table(arch: str) -> Arch | None:
    """The occupancy table of a target architecture (`sm_90a`, `sm_100a` …), None for one opgate has none of."""
    return TABLES.get(family(arch))


def _round_up(x: int, unit: int) -> int:
    return -(-x // unit) * unit


def _register_limit(registers: int, warps: int, arch: Arch) -> tuple[int | None, int]:
    """Blocks per SM the register file allows, and the registers allocated per block."""
    per_warp = _round_up(registers * arch.warp_size, arch.register_granularity)
    per_block = per_warp * warps
    # The hardware check assumes a block's warps are spread over all sub-partitions at once.
    assumed = per_warp * _round_up(warps, arch.sub_partitions)
    if assumed > arch.registers_per_block or per_block > arch.registers_per_block:
        return 0, per_block
    if registers > arch.max_registers_per_thread:
        return 0, per_block
    if per_warp == 0:
        return None, per_block
    warps_per_quarter = (arch.registers_per_sm // arch.sub_partitions) // per_warp
    return warps_per_quarter * arch.sub_partitions // warps, per_block


def _smem_limit(static: int, dynamic: int, arch: Arch) -> tuple[int | None, int]:
    """Blocks per SM shared memory allows (the launcher opts in to exactly `dynamic`), and bytes allocated."""
    used = static + arch.smem_reserved_per_block + dynamic
    allocated = _round_up(used, arch.smem_granularity)
    per_block = arch.smem_per_block_optin if used > arch.smem_per_block else arch.smem_per_block
    if allocated > per_block + arch.smem_reserved_per_block:
        return 0, allocated
    return (arch.smem_per_sm // allocated if allocated else None), allocated


def occupancy(
    registers: int, threads: int, static_smem: int = 0, dynamic_smem: int = 0, barriers: int = 1, arch: Arch = SM90
) -> Occupancy:
    """Resident blocks and warps per SM for one launch, and which resource limits them.

    `registers` per thread (ptxas), `threads` per block, shared memory per block in bytes (static from
    ptxas, dynamic from the launch), named `barriers` (ptxas; 1 when unknown, as the CUDA runtime assumes).
    Each resource alone allows some number of blocks; the smallest wins and every resource at that
    number is named, as cudaOccMaxActiveBlocksPerMultiprocessor reports its limiting factors.
    """
    if threads <= 0 or registers < 0 or static_smem < 0 or dynamic_smem < 0 or barriers < 0:
        raise ValueError(f"occupancy of impossible inputs: {registers=} {threads=} {static_smem=} {dynamic_smem=}")
    warps = -(-threads // arch.warp_size)
    regs, regs_per_block = _register_limit(registers, warps, arch)
    smem, smem_per_block = _smem_limit(static_smem, dynamic_smem, arch)
    limits: dict[str, int | None] = {
        REGISTERS: regs,
        SHARED_MEMORY: smem,
        THREADS: 0 if threads > arch.max_threads_per_block else arch.max_warps_per_sm // warps,
        BLOCKS: arch.max_blocks_per_sm,
    }
    blocks = min(v for v in limits.values() if v is not None)
    if barriers > 0:  # checked after the others, as in cuda_occupancy.h (compute 9.x)
        limits[BARRIERS] = arch.barriers_per_sm // barriers
        blocks = min(blocks, arch.barriers_per_sm // barriers)
    return Occupancy(
        arch=arch.name,
        blocks_per_sm=blocks,
        warps_per_sm=blocks * warps,
        max_warps_per_sm=arch.max_warps_per_sm,
        occupancy_pct=round(100.0 * blocks * warps / arch.max_warps_per_sm, 2),
        limited_by=[name for name, limit in limits.items() if limit == blocks],
        limits=limits,
        registers_per_block=regs_per_block,
        smem_per_block=smem_per_block,
    )


def drop_pct(base: Occupancy, head: Occupancy) -> float:
    """How far head's resident warps fall below base's, in % of base (0 when head keeps as many or more)."""
    if base.warps_per_sm <= 0 or head.warps_per_sm >= base.warps_per_sm:
        return 0.0
    return round(100.0 * (base.warps_per_sm - head.warps_per_sm) / base.warps_per_sm, 2)
