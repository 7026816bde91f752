"""Theoretical occupancy on every architecture opgate has a table for (sm_75 to sm_120): checked cell by cell
against NVIDIA's cuda_occupancy.h, and the gate."""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from bot.config.manifest_tables import Constraints
from bot.models.agent_report import AgentReport
from bot.models.report import Build, KernelReport, Machine, Report, Resource, ResourceCheckReport
from bot.present.render import render_comment
from bot.verdict.occupancy import (
    BARRIERS,
    BLOCKS,
    KIB,
    REGISTERS,
    SHARED_MEMORY,
    SM75,
    SM86,
    SM87,
    SM89,
    SM90,
    SM100,
    SM103,
    SM120,
    TABLES,
    THREADS,
    Arch,
    drop_pct,
    no_table,
    occupancy,
    table,
)
from tests.gate_lines import resource_reasons

GRID_SOURCE = Path(__file__).parent / "data" / "occupancy" / "grid.cpp"

# registers: every count ptxas can report (0..255) and the 256 cuda_occupancy.h still accepts
REGISTER_COUNTS = range(257)
SOME_REGISTERS = (0, 1, 8, 32, 40, 64, 65, 72, 96, 128, 130, 168, 255, 256)
THREAD_COUNTS = [
    1, 31, 32, 33, 64, 96, 100, 128, 160, 192, 224, 256, 288, 320, 384, 416, 512, 544, 640, 768, 1024, 1025,
]  # fmt: skip
# (static, dynamic) shared memory per block: around the 128 B granularity, the 48 KiB default, static and dynamic
# adding up; each architecture adds its own steps (`smem_cells`)
SMEM = [
    (0, 0), (0, 1), (1, 127), (0, 128), (0, 255), (0, 256), (4224, 0), (34816, 0), (49152, 0), (0, 48128),
    (0, 49152), (1024, 48127), (0, 57344), (0, 65536), (0, 76800), (0, 97792), (0, 98304), (0, 115712),
    (0, 115713), (34816, 80896), (0, 131072), (0, 196608), (0, 231424), (0, 232448), (1, 232448), (0, 232449),
    (0, 240000),
]  # fmt: skip
BARRIER_COUNTS = [0, 1, 2, 3, 5, 16]  # named barriers limit blocks from compute 9.x on (64 or 24 per SM)
CARVEOUTS = [0, 10, 25, 50, 75]  # % of the largest shared-memory configuration a function may prefer
FACTOR_BITS = {THREADS: 0x01, REGISTERS: 0x02, SHARED_MEMORY: 0x04, BLOCKS: 0x08, BARRIERS: 0x10}
Cell = tuple[int, int, int, int, int]


def smem_cells(arch: Arch) -> list[tuple[int, int]]:
    """SMEM and the steps of `arch`: its opt-in limit, the per-SM splits into 2 to 7 blocks with the reserve,
    and each carve-out's edge."""
    reserve, optin = arch.smem_reserved_per_block, arch.smem_per_block_optin
    cells = [*SMEM, (0, optin - 1), (0, optin), (1, optin), (0, optin + 1), (0, 48 * KIB - reserve + 1)]
    for k in range(2, 8):
        cells += [(0, arch.smem_per_sm // k - reserve), (0, arch.smem_per_sm // k - reserve + 1)]
    for kib in arch.carveouts_kib:
        cells += [(0, max(kib * KIB - reserve, 0)), (0, max(kib * KIB - reserve + 1, 0))]
    return sorted(set(cells))


def grid(arch: Arch) -> list[Cell]:
    """Every register count at a few shared-memory sizes, and every shared-memory step at a few register counts."""
    smem = smem_cells(arch)
    cells = [
        (r, t, s, d, 1) for r, t, (s, d) in itertools.product(REGISTER_COUNTS, THREAD_COUNTS, smem[:: len(smem) // 4])
    ]
    cells += [(r, t, s, d, 1) for r, t, (s, d) in itertools.product(SOME_REGISTERS, THREAD_COUNTS, smem)]
    cells += [(r, t, 0, d, b) for r, t, d, b in itertools.product((32, 168), (32, 256), (0, 65536), BARRIER_COUNTS)]
    return sorted(set(cells))


def carveout_grid(arch: Arch) -> list[Cell]:
    return [(r, t, s, d, 1) for r, t, (s, d) in itertools.product((32, 128), (32, 128, 256, 1024), smem_cells(arch))]


def occupancy_header() -> Path | None:
    """cuda_occupancy.h of the installed CUDA toolkit: $CUDA_HOME, $CUDA_PATH, beside nvcc, /usr/local/cuda."""
    homes = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH")]
    if nvcc := shutil.which("nvcc"):
        homes.append(str(Path(os.path.realpath(nvcc)).parent.parent))
    homes.append("/usr/local/cuda")
    for home in filter(None, homes):
        if (header := Path(home) / "include" / "cuda_occupancy.h").is_file():
            return header
    return None


@pytest.fixture(scope="module")
def grid_exe(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """tests/data/occupancy/grid.cpp built with g++ against the toolkit's cuda_occupancy.h (host code, no GPU)."""
    header = occupancy_header()
    if header is None:
        pytest.skip("no CUDA toolkit's include/cuda_occupancy.h ($CUDA_HOME, $CUDA_PATH, nvcc's, /usr/local/cuda)")
    compiler = shutil.which("g++")
    if compiler is None:
        pytest.skip("g++ is not on the PATH: cannot build the cuda_occupancy.h grid")
    exe = tmp_path_factory.mktemp("occupancy") / "grid"
    argv = [compiler, "-O2", "-I", str(header.parent), str(GRID_SOURCE), "-o", str(exe)]
    subprocess.run(argv, check=True, timeout=300)
    return exe


def nvidia(exe: Path, arch: Arch, cells: list[Cell], carveout: int = -1) -> list[str]:
    """cuda_occupancy.h's answer for every cell on `arch`'s compute capability."""
    major, minor = arch.compute
    argv = [str(exe), str(major), str(minor), str(carveout)]
    lines = "".join(f"{r} {t} {s} {d} {b}\n" for r, t, s, d, b in cells)
    return subprocess.run(argv, input=lines, capture_output=True, text=True, check=True).stdout.splitlines()


def mismatches(exe: Path, arch: Arch, cells: list[Cell], carveout: int | None = None) -> list[str]:
    answers = nvidia(exe, arch, cells, -1 if carveout is None else carveout)
    assert len(answers) == len(cells)
    out = []
    for (r, t, s, d, b), line in zip(cells, answers, strict=True):
        blocks, flags, regs, smem, warps, limit, bars, alloc_regs, alloc_smem = (int(x) for x in line.split())
        ours = occupancy(r, t, s, d, b, arch=arch, carveout_pct=carveout)
        limits = {k: (-1 if v is None else v) for k, v in ours.limits.items()}
        theirs = {REGISTERS: regs, SHARED_MEMORY: smem, THREADS: warps, BLOCKS: limit, BARRIERS: bars}
        if b == 0 or arch.barriers_per_sm is None:
            theirs.pop(BARRIERS)
            assert bars == -1
        # The header flags the first four factors before it applies the barrier limit: keep only those
        # whose own limit is the final block count (our `limited_by`).
        named = {f for f, bit in FACTOR_BITS.items() if flags & bit and theirs.get(f) == blocks}
        got = (ours.blocks_per_sm, limits, set(ours.limited_by), ours.registers_per_block, ours.smem_per_block)
        want = (blocks, theirs, named, alloc_regs, alloc_smem)
        if got != want:
            out.append(f"regs {r} threads {t} smem {s}+{d} barriers {b}: ours {got} != cuda_occupancy.h {want}")
    return out


@pytest.mark.parametrize("arch", list(TABLES.values()), ids=lambda a: a.name)
def test_the_calculator_matches_cuda_occupancy_h_in_every_cell(grid_exe: Path, arch: Arch) -> None:
    cells = grid(arch)
    assert len(cells) > 15_000
    wrong = mismatches(grid_exe, arch, cells)
    assert not wrong, f"{len(wrong)} of {len(cells)} cells differ on {arch.name}, e.g.\n" + "\n".join(wrong[:10])


@pytest.mark.parametrize("arch", list(TABLES.values()), ids=lambda a: a.name)
def test_every_preferred_carve_out_matches_cuda_occupancy_h(grid_exe: Path, arch: Arch) -> None:
    cells = carveout_grid(arch)
    wrong = [f"carve-out {pct}%: {m}" for pct in CARVEOUTS for m in mismatches(grid_exe, arch, cells, pct)]
    assert not wrong, f"{len(wrong)} cells differ on {arch.name}, e.g.\n" + "\n".join(wrong[:10])


def test_a_smaller_preferred_carve_out_costs_blocks_only_where_it_binds() -> None:
    # 40 KiB blocks on an A10 (sm_86): 2 in the 100 KiB configuration, 1 when the function prefers 50 % (64 KiB)
    assert occupancy(32, 128, 0, 40 * KIB, arch=SM86).blocks_per_sm == 2
    assert occupancy(32, 128, 0, 40 * KIB, arch=SM86, carveout_pct=50).blocks_per_sm == 1
    # a block larger than the preferred configuration gets the smallest one that holds it
    assert occupancy(32, 128, 0, 90 * KIB, arch=SM86, carveout_pct=0).blocks_per_sm == 1
    with pytest.raises(ValueError, match="0 to 100"):
        occupancy(32, 128, arch=SM86, carveout_pct=101)


def test_each_target_architecture_finds_its_sm_table() -> None:
    assert table("sm_90a") is SM90 and table("sm_90") is SM90
    assert table("sm_100a") is SM100 and table("sm_100f") is SM100 and SM100.compute == (10, 0)
    assert table("sm_103a") is SM103 and table("sm_120a") is SM120 and table("sm_87") is SM87
    assert table("sm_75") is SM75 and table("sm_89") is SM89
    assert occupancy(168, 256, arch=SM100).arch == "sm_100"
    assert no_table("sm_86") is None
    assert table("sm_110a") is None  # no table: occupancy is not computed, and the review says so
    assert no_table("sm_110a") == (
        "occupancy not computed for sm_110a: no table "
        "(opgate has sm_75, sm_80, sm_86, sm_87, sm_89, sm_90, sm_100, sm_103, sm_120)"
    )


def test_the_architectures_differ_where_the_hardware_does() -> None:
    # 64 registers x 256 threads: 4 blocks of 8 warps fill sm_90's 64 warps, but sm_86/sm_89/sm_120 hold 48
    assert [occupancy(64, 256, arch=a).warps_per_sm for a in (SM90, SM86, SM89, SM120, SM75)] == [32, 32, 32, 32, 32]
    assert [occupancy(32, 256, arch=a).warps_per_sm for a in (SM90, SM86, SM89, SM120, SM75)] == [64, 48, 48, 48, 32]
    # small blocks: 32 blocks on sm_90, 24 on sm_89 and sm_120, 16 on sm_86 and sm_75
    assert [occupancy(16, 32, arch=a).blocks_per_sm for a in (SM90, SM89, SM120, SM86, SM75)] == [32, 24, 24, 16, 16]
    # 99 KiB opted in: fits an A10 once; one byte more does not; 163 KiB on an Orin, 64 KiB on a T4 (no reserve)
    assert occupancy(32, 128, 0, 99 * KIB, arch=SM86).blocks_per_sm == 1
    assert occupancy(32, 128, 0, 99 * KIB + 1, arch=SM86).blocks_per_sm == 0
    assert occupancy(32, 128, 0, 163 * KIB, arch=SM87).blocks_per_sm == 1
    assert occupancy(32, 128, 0, 32 * KIB, arch=SM75).smem_per_block == 32 * KIB
    # sm_120 has one named barrier per block slot (24 per SM), sm_90 two; before 9.x barriers limit nothing
    assert occupancy(16, 32, barriers=16, arch=SM120).blocks_per_sm == 1
    assert occupancy(16, 32, barriers=16, arch=SM89).blocks_per_sm == 24


def test_registers_are_allocated_per_warp_in_units_of_256() -> None:
    assert [SM90.allocated_registers(r) for r in (0, 1, 8, 130, 136, 255)] == [0, 8, 8, 136, 136, 256]
    assert occupancy(130, 256).registers_per_block == 136 * 256 == 34_816


# -- the steps a kernel author meets ------------------------------------------------------------------------


def test_168_registers_halve_the_resident_blocks_of_a_256_thread_kernel_without_any_spill() -> None:
    before, after = occupancy(128, 256), occupancy(168, 256)
    assert (before.blocks_per_sm, before.warps_per_sm, before.occupancy_pct) == (2, 16, 25.0)
    assert (after.blocks_per_sm, after.warps_per_sm, after.occupancy_pct) == (1, 8, 12.5)
    assert after.limited_by == [REGISTERS] and after.registers_per_block == 168 * 32 * 8
    assert drop_pct(before, after) == 50.0 and drop_pct(after, before) == 0.0


def test_shared_memory_counts_the_1_kib_reserve_and_128_byte_granules() -> None:
    two = occupancy(32, 128, 0, 115_712)  # 2 x (115,712 + 1,024) = 233,472 B: exactly the SM
    assert two.blocks_per_sm == 2 and two.limited_by == [SHARED_MEMORY] and two.smem_per_block == 116_736
    assert occupancy(32, 128, 0, 115_713).blocks_per_sm == 1  # one byte more rounds up a whole granule
    assert occupancy(32, 128, 4096, 111_616).blocks_per_sm == 2  # static and dynamic add up


def test_the_227_kib_opt_in_limit_per_block() -> None:
    assert occupancy(32, 128, 0, SM90.smem_per_block_optin).blocks_per_sm == 1
    over = occupancy(32, 128, 0, SM90.smem_per_block_optin + 1)
    assert over.blocks_per_sm == 0 and over.limited_by == [SHARED_MEMORY]


def test_small_blocks_hit_the_32_block_limit_and_big_ones_the_thread_limit() -> None:
    assert occupancy(16, 32).limited_by == [BLOCKS] and occupancy(16, 32).occupancy_pct == 50.0
    big = occupancy(16, 1024)
    assert big.blocks_per_sm == 2 and big.limited_by == [THREADS] and big.occupancy_pct == 100.0
    assert occupancy(32, 1025).blocks_per_sm == 0


def test_many_named_barriers_limit_blocks() -> None:
    assert occupancy(16, 32, barriers=16).blocks_per_sm == 4
    assert occupancy(16, 32, barriers=16).limited_by == [BARRIERS]


# -- the gate ---------------------------------------------------------------------------------------------


def _fn(registers: int, threads: int = 256, dynamic: int = 0, static: int = 0) -> Resource:
    return Resource(
        function="k<1>(int)",
        registers=registers,
        smem_bytes=static,
        threads=threads,
        dynamic_smem_bytes=dynamic,
        occupancy=occupancy(registers, threads, static, dynamic),
    )


def test_registers_past_an_occupancy_step_fail_naming_registers() -> None:
    failures, notes = resource_reasons([_fn(168)], [_fn(128)], Constraints())
    assert failures == [
        "resource: k<1>(int): occupancy 25% -> 12.5% (2 -> 1 blocks/SM, 16 -> 8 warps/SM), limited by registers: "
        "168 registers x 256 threads = 43,008 allocated per block: 50% fewer resident warps than base > "
        "max_occupancy_drop_pct 0%"
    ]
    assert notes == ["k<1>(int): registers 128 -> 168"]


def test_the_register_arithmetic_adds_up_after_the_allocation_granularity() -> None:
    failures, _ = resource_reasons([_fn(130)], [_fn(120)], Constraints())
    assert failures == [
        "resource: k<1>(int): occupancy 25% -> 12.5% (2 -> 1 blocks/SM, 16 -> 8 warps/SM), limited by registers: "
        "130 -> 136 registers allocated per thread x 256 threads = 34,816 allocated per block: 50% fewer resident "
        "warps than base > max_occupancy_drop_pct 0%"
    ]
    hog = Resource(function="k<1>(int)", registers=250, threads=100)  # 4 warps: 128 thread slots of 256 registers
    failures, _ = resource_reasons([hog], [], Constraints(min_warps_per_sm=16))
    assert failures == [
        "resource: k<1>(int) keeps 8 warps per SM < min_warps_per_sm 16, limited by registers: 250 -> 256 registers "
        "allocated per thread x 128 threads (100 rounded up to 4 warps) = 32,768 allocated per block"
    ]


def test_shared_memory_names_the_reserve_only_where_the_architecture_has_one() -> None:
    big = Resource(function="k<1>(int)", registers=32, threads=128, dynamic_smem_bytes=40_000)
    floor = Constraints(min_warps_per_sm=8)
    assert resource_reasons([big], [], floor, arch="sm_75")[0] == [  # 1 of 40,192 B in a T4's 64 KiB
        "resource: k<1>(int) keeps 4 warps per SM < min_warps_per_sm 8, limited by shared memory: "
        "40,192 B shared memory per block (static + dynamic)"
    ]
    assert resource_reasons([big], [], Constraints(min_warps_per_sm=12), arch="sm_86")[0] == [  # 2 in 100 KiB
        "resource: k<1>(int) keeps 8 warps per SM < min_warps_per_sm 12, limited by shared memory: "
        "41,088 B shared memory per block (static + dynamic + 1 KiB reserve)"
    ]


def test_an_allowed_occupancy_drop_is_noted_not_failed() -> None:
    failures, notes = resource_reasons([_fn(168)], [_fn(128)], Constraints(max_occupancy_drop_pct=50))
    assert failures == []
    assert any(n.endswith("50% fewer resident warps than base, within max_occupancy_drop_pct 50%") for n in notes)


def test_registers_within_the_same_step_change_nothing() -> None:
    failures, notes = resource_reasons([_fn(120)], [_fn(100)], Constraints())
    assert failures == [] and notes == ["k<1>(int): registers 100 -> 120"]  # 2 blocks either way


def test_an_occupancy_gain_is_noted() -> None:
    failures, notes = resource_reasons([_fn(64)], [_fn(128)], Constraints())
    assert failures == []
    assert notes == ["k<1>(int): occupancy 25% -> 50% (2 -> 4 blocks/SM, 16 -> 32 warps/SM), limited by registers: "
                     "64 registers x 256 threads = 16,384 allocated per block"]  # fmt: skip


def test_doubled_dynamic_shared_memory_shows_and_fails_when_it_costs_blocks() -> None:
    failures, notes = resource_reasons([_fn(96, 128, 196_608)], [_fn(96, 128, 98_304)], Constraints())
    assert "k<1>(int): dynamic_smem_bytes 98304 -> 196608" in notes
    [failure] = failures
    assert "occupancy 12.5% -> 6.25% (2 -> 1 blocks/SM, 8 -> 4 warps/SM), limited by shared memory: " in failure
    assert "197,632 B shared memory per block (static + dynamic + 1 KiB reserve)" in failure


def test_static_plus_dynamic_shared_memory_over_227_kib_fails() -> None:
    failures, _ = resource_reasons([_fn(96, 128, 200_000, static=34_816)], [], Constraints())
    assert failures == [
        "resource: k<1>(int) uses 34,816 + 200,000 B shared memory per block (static + dynamic) > 232,448"
    ]


def test_min_warps_per_sm_is_a_floor_for_every_function() -> None:
    failures, _ = resource_reasons([_fn(168)], [], Constraints(min_warps_per_sm=16))
    assert failures == [
        "resource: k<1>(int) keeps 8 warps per SM < min_warps_per_sm 16, limited by registers: "
        "168 registers x 256 threads = 43,008 allocated per block"
    ]


def test_a_launch_that_fits_no_sm_fails_with_every_reason() -> None:
    hog = Resource(function="_Z3hogPKfPfi", registers=32)
    failures, _ = resource_reasons([hog], [], Constraints(), {"_Z3hogPKfPfi": 4096})
    assert failures == [
        "resource: _Z3hogPKfPfi cannot be resident on an SM: 32 registers x 4096 threads = 131,072 allocated "
        "per block; 4096 threads per block"
    ]


# -- the comment's resources table ------------------------------------------------------------------------


def _report(head: list[Resource], base: list[Resource]) -> Report:
    kernel = KernelReport(
        name="flashmla_decode",
        domain="flashmla",
        changed=True,
        verdict="fail",
        build=Build(ok=True, seconds=1.0, cached=False, device="cpu", resources=head),
        base_build=Build(ok=True, seconds=1.0, cached=False, device="cpu", resources=base),
        resource_check=ResourceCheckReport(status="ok", head=head, base=base),
    )
    return Report(
        base_sha="a" * 40,
        head_sha="b" * 40,
        verdict="fail",
        kernels=[kernel],
        agent=AgentReport(status="offline"),
        environment=Machine(device="cpu", python="3.11"),
        created_at="2025-01-01T00:00:00+00:00",
        opgate_version="0.1.0",
    )


def test_the_comment_shows_smem_blocks_occupancy_and_the_limiting_factor_base_to_head() -> None:
    base, head = _fn(96, 256, 97_792), _fn(168, 256, 97_792)
    table = [line for line in render_comment(_report([head], [base])).splitlines() if line.startswith("| `k<1>")]
    assert table == [  # the table names the function without its parameter list when that is unambiguous
        "| `k<1>` | 96 → 168 | 0 → 0 | 0 + 97,792 → 0 + 97,792 | 256 → 256 | 2 → **1** | 25% → **12.5%** | "
        "registers, shared memory → registers | 0 → 0 |"
    ]
    doubled = render_comment(_report([_fn(96, 128, 196_608)], [_fn(96, 128, 98_304)]))
    assert "| 0 + 98,304 → 0 + 196,608 | 128 → 128 | 2 → **1** | 12.5% → **6.25%** | shared memory |" in doubled


def test_the_comment_marks_dynamic_memory_nobody_sized() -> None:
    unsized = Resource(function="k<1>(int)", registers=40, extern_smem=True, threads=128)
    [row] = [line for line in render_comment(_report([unsized], [])).splitlines() if line.startswith("| `k<1>")]
    assert row == "| `k<1>` | 40 | 0 | 0 + ? | 128 | — | — | — | 0 |"
