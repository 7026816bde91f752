"""Theoretical occupancy on every architecture opgate has a table for, sm_75 to sm_120: resident blocks and warps
per SM (as cuda_occupancy.h computes them)."""

from __future__ import annotations

from dataclasses import dataclass

from bot.models.finding import Phrase
from bot.models.report import Occupancy
from bot.wording.messages import phrase

REGISTERS = "registers"
SHARED_MEMORY = "shared memory"
THREADS = "threads"
BLOCKS = "blocks"
BARRIERS = "barriers"

KIB = 1024


@dataclass(frozen=True)
class Arch:
    """What one SM offers, from two sources (tests/test_occupancy.py checks every table against the first):

    - the CUDA toolkit's `include/cuda_occupancy.h`, whose tables are per compute capability: register allocation
      granularity (256 per warp) and maximum per thread (256), 4 sub-partitions, blocks per SM, the shared-memory
      allocation granularity, the carve-outs (the shared-memory sizes an SM can be configured to) and block
      barriers per block slot;
    - the CUDA C++ Programming Guide's "Technical Specifications per Compute Capability" table, which is what
      cudaGetDeviceProperties reports and cuda_occupancy.h takes as input (cudaOccDeviceProp): resident warps per
      SM, registers per SM and per block, shared memory per SM, per block by default and opted in, and the
      driver's reserve per block.
    """

    name: str
    compute: tuple[int, int]
    parts: str  # the GPUs of this compute capability (for the reader)
    max_warps_per_sm: int
    max_blocks_per_sm: int
    smem_per_sm: int  # the largest carve-out (the default preference: cudaDevAttrMaxSharedMemoryPerMultiprocessor)
    smem_per_block_optin: int  # with cudaFuncAttributeMaxDynamicSharedMemorySize
    smem_reserved_per_block: int  # the driver's reserve, counted against every block (0 before sm_80)
    carveouts_kib: tuple[int, ...]  # the shared-memory configurations of an SM, smallest first
    smem_granularity: int = 128  # bytes; 256 before sm_80
    barrier_slots_per_block: int | None = None  # named barriers per block slot; None: no barrier limit (before 9.x)
    warp_size: int = 32
    max_threads_per_block: int = 1024
    registers_per_sm: int = 65_536
    registers_per_block: int = 65_536
    max_registers_per_thread: int = 256  # cuda_occupancy.h's limit; ptxas allocates at most 255
    register_granularity: int = 256  # registers are allocated per warp, in units of 256
    sub_partitions: int = 4  # a warp's registers come from one of the SM's 4 quarters
    smem_per_block: int = 48 * KIB  # without opting in

    @property
    def barriers_per_sm(self) -> int | None:
        """Named block barriers per SM (cuda_occupancy.h: 1 or 2 per block slot, from compute 9.x); None: no limit."""
        if self.barrier_slots_per_block is None:
            return None
        return self.barrier_slots_per_block * self.max_blocks_per_sm

    def carveout(self, nbytes: int) -> int | None:
        """The smallest shared-memory configuration holding `nbytes` per SM, in bytes; None when none does."""
        return next((kib * KIB for kib in self.carveouts_kib if kib * KIB >= nbytes), None)

    def allocated_registers(self, registers: int) -> int:
        """Registers a thread holds after the per-warp allocation granularity (130 -> 136 on every table here)."""
        return _round_up(registers * self.warp_size, self.register_granularity) // self.warp_size


_VOLTA_AMPERE_CARVEOUTS = (0, 8, 16, 32, 64, 100)  # KiB, cuda_occupancy.h's list for compute 8.6, 8.9 and 12.x
_A100_CARVEOUTS = (*_VOLTA_AMPERE_CARVEOUTS, 132, 164)  # compute 8.0 and 8.7
_HOPPER_CARVEOUTS = (*_A100_CARVEOUTS, 196, 228)  # compute 9.0, 10.0 and 10.3

SM75 = Arch(
    name="sm_75", compute=(7, 5), parts="T4, RTX 20xx, Quadro RTX", max_warps_per_sm=32, max_blocks_per_sm=16,
    smem_per_sm=64 * KIB, smem_per_block_optin=64 * KIB, smem_reserved_per_block=0, carveouts_kib=(32, 64),
    smem_granularity=256,
)  # fmt: skip
SM80 = Arch(
    name="sm_80", compute=(8, 0), parts="A100, A30", max_warps_per_sm=64, max_blocks_per_sm=32,
    smem_per_sm=164 * KIB, smem_per_block_optin=163 * KIB, smem_reserved_per_block=KIB, carveouts_kib=_A100_CARVEOUTS,
)  # fmt: skip
SM86 = Arch(
    name="sm_86", compute=(8, 6), parts="A10, A40, RTX 3090, RTX A6000", max_warps_per_sm=48, max_blocks_per_sm=16,
    smem_per_sm=100 * KIB, smem_per_block_optin=99 * KIB, smem_reserved_per_block=KIB,
    carveouts_kib=_VOLTA_AMPERE_CARVEOUTS,
)  # fmt: skip
SM87 = Arch(
    name="sm_87", compute=(8, 7), parts="Jetson AGX Orin, Orin NX", max_warps_per_sm=48, max_blocks_per_sm=16,
    smem_per_sm=164 * KIB, smem_per_block_optin=163 * KIB, smem_reserved_per_block=KIB, carveouts_kib=_A100_CARVEOUTS,
)  # fmt: skip
SM89 = Arch(
    name="sm_89", compute=(8, 9), parts="L4, L40S, RTX 4090, RTX 6000 Ada", max_warps_per_sm=48, max_blocks_per_sm=24,
    smem_per_sm=100 * KIB, smem_per_block_optin=99 * KIB, smem_reserved_per_block=KIB,
    carveouts_kib=_VOLTA_AMPERE_CARVEOUTS,
)  # fmt: skip
SM90 = Arch(
    name="sm_90", compute=(9, 0), parts="H100, H200, GH200", max_warps_per_sm=64, max_blocks_per_sm=32,
    smem_per_sm=228 * KIB, smem_per_block_optin=227 * KIB, smem_reserved_per_block=KIB,
    carveouts_kib=_HOPPER_CARVEOUTS, barrier_slots_per_block=2,
)  # fmt: skip
# Compute capability 10.x gets sm_90's per-SM limits and cuda_occupancy.h treats 10.0 and 10.3 as 9.x in every
# table. Its one addition, 128 virtual resources per SM, limits nothing here: ptxas reports no virtual-resource
# count, and cudaFuncGetAttributes gives 0 for these kernels.
SM100 = Arch(
    name="sm_100", compute=(10, 0), parts="B200, GB200", max_warps_per_sm=64, max_blocks_per_sm=32,
    smem_per_sm=228 * KIB, smem_per_block_optin=227 * KIB, smem_reserved_per_block=KIB,
    carveouts_kib=_HOPPER_CARVEOUTS, barrier_slots_per_block=2,
)  # fmt: skip
SM103 = Arch(
    name="sm_103", compute=(10, 3), parts="B300, GB300", max_warps_per_sm=64, max_blocks_per_sm=32,
    smem_per_sm=228 * KIB, smem_per_block_optin=227 * KIB, smem_reserved_per_block=KIB,
    carveouts_kib=_HOPPER_CARVEOUTS, barrier_slots_per_block=2,
)  # fmt: skip
SM120 = Arch(
    name="sm_120", compute=(12, 0), parts="RTX 5090, RTX PRO 6000 Blackwell", max_warps_per_sm=48,
    max_blocks_per_sm=24, smem_per_sm=100 * KIB, smem_per_block_optin=99 * KIB, smem_reserved_per_block=KIB,
    carveouts_kib=_VOLTA_AMPERE_CARVEOUTS, barrier_slots_per_block=1,
)  # fmt: skip
TABLES = {a.name: a for a in (SM75, SM80, SM86, SM87, SM89, SM90, SM100, SM103, SM120)}


def family(arch: str) -> str:
    """`sm_90` from `sm_90a` or `sm_90`; `sm_100` from `sm_100a`/`sm_100f` (the SM a target runs on)."""
    return arch.rstrip("af") if arch.startswith("sm_") else arch


def table(arch: str) -> Arch | None:
    """The occupancy table of a target architecture (`sm_90a`, `sm_100a`, `sm_86` …), None for one opgate has none
    of (`no_table` says so in words)."""
    return TABLES.get(family(arch))


def no_table(arch: str) -> str | None:
    """What a review, lint and check say for an architecture without a table; None when it has one."""
    found = no_table_phrase(arch)
    return phrase(found) if found is not None else None


def no_table_phrase(arch: str) -> Phrase | None:
    """`no_table` as the catalog's phrase (a review's note renders it in the team's language)."""
    if table(arch) is not None:
        return None
    return Phrase(key="launch.no_table", params={"arch": arch, "tables": ", ".join(TABLES)})


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


def _smem_limit(static: int, dynamic: int, arch: Arch, carveout_pct: int | None) -> tuple[int | None, int]:
    """Blocks per SM shared memory allows (the launcher opts in to exactly `dynamic`), and bytes allocated.

    The SM is configured to the carve-out the function prefers (`carveout_pct` of the largest; None: no preference,
    the largest), or to the smallest that holds one block when the preferred one is too small."""
    used = static + arch.smem_reserved_per_block + dynamic
    allocated = _round_up(used, arch.smem_granularity)
    per_block = arch.smem_per_block_optin if used > arch.smem_per_block else arch.smem_per_block
    if allocated > per_block + arch.smem_reserved_per_block:
        return 0, allocated
    preferred = arch.smem_per_sm if carveout_pct is None else carveout_pct * arch.smem_per_sm // 100
    per_sm = arch.carveout(preferred)
    if per_sm is None or per_sm < allocated:  # the largest carve-out holds any block that fits the per-block limit
        per_sm = arch.carveout(allocated) or arch.smem_per_sm
    return (per_sm // allocated if allocated else None), allocated


def occupancy(
    registers: int,
    threads: int,
    static_smem: int = 0,
    dynamic_smem: int = 0,
    barriers: int = 1,
    arch: Arch = SM90,
    carveout_pct: int | None = None,
) -> Occupancy:
    """Resident blocks and warps per SM for one launch, and which resource limits them.

    `registers` per thread (ptxas), `threads` per block, shared memory per block in bytes (static from
    ptxas, dynamic from the launch), named `barriers` (ptxas; 1 when unknown, as the CUDA runtime assumes).
    Each resource alone allows some number of blocks; the smallest wins and every resource at that
    number is named, as cudaOccMaxActiveBlocksPerMultiprocessor reports its limiting factors. `carveout_pct`:
    the function's cudaFuncAttributePreferredSharedMemoryCarveout (0 to 100), None for none (the default).
    """
    if threads <= 0 or registers < 0 or static_smem < 0 or dynamic_smem < 0 or barriers < 0:
        raise ValueError(f"occupancy of impossible inputs: {registers=} {threads=} {static_smem=} {dynamic_smem=}")
    if carveout_pct is not None and not 0 <= carveout_pct <= 100:
        raise ValueError(f"a shared-memory carve-out is 0 to 100 %, not {carveout_pct}")
    warps = -(-threads // arch.warp_size)
    regs, regs_per_block = _register_limit(registers, warps, arch)
    smem, smem_per_block = _smem_limit(static_smem, dynamic_smem, arch, carveout_pct)
    limits: dict[str, int | None] = {
        REGISTERS: regs,
        SHARED_MEMORY: smem,
        THREADS: 0 if threads > arch.max_threads_per_block else arch.max_warps_per_sm // warps,
        BLOCKS: arch.max_blocks_per_sm,
    }
    blocks = min(v for v in limits.values() if v is not None)
    if barriers > 0 and arch.barriers_per_sm is not None:  # checked after the others (compute 9.x and later)
        bars = limits[BARRIERS] = arch.barriers_per_sm // barriers
        blocks = min(blocks, bars)
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


def register_phrase(registers: int, threads: int, occ: Occupancy) -> Phrase:
    """The registers a block is allocated, in numbers that add up: each thread's count after the per-warp granularity
    ("130 -> 136 registers allocated per thread") times the threads of its whole warps."""
    arch = table(occ.arch) or SM90
    allocated = arch.allocated_registers(registers)
    per_thread = (
        Phrase(key="occupancy.per_thread", params={"registers": registers})
        if allocated == registers
        else Phrase(key="occupancy.per_thread_rounded", params={"registers": registers, "allocated": allocated})
    )
    warps = -(-threads // arch.warp_size)
    slots = (
        Phrase(key="occupancy.threads", params={"threads": threads})
        if threads == warps * arch.warp_size
        else Phrase(
            key="occupancy.threads_rounded",
            params={"slots": warps * arch.warp_size, "threads": threads, "warps": warps},
        )
    )
    return Phrase(
        key="occupancy.registers",
        params={"per_block": f"{occ.registers_per_block:,}"},
        phrases={"per_thread": [per_thread], "slots": [slots]},
    )


def smem_phrase(occ: Occupancy) -> Phrase:
    """The shared memory a block is allocated, naming the driver's reserve where the architecture has one."""
    reserve = (table(occ.arch) or SM90).smem_reserved_per_block
    smem = f"{occ.smem_per_block:,}"
    if reserve:
        return Phrase(key="occupancy.smem_reserve", params={"smem": smem, "reserve": reserve // KIB})
    return Phrase(key="occupancy.smem", params={"smem": smem})


def drop_pct(base: Occupancy, head: Occupancy) -> float:
    """How far head's resident warps fall below base's, in % of base (0 when head keeps as many or more)."""
    if base.warps_per_sm <= 0 or head.warps_per_sm >= base.warps_per_sm:
        return 0.0
    return round(100.0 * (base.warps_per_sm - head.warps_per_sm) / base.warps_per_sm, 2)
