"""Theoretical occupancy on sm_90 and sm_100: checked cell by cell against NVIDIA's cuda_occupancy.h, and the gate."""

from __future__ import annotations

import itertools
import shutil
import subprocess
from pathlib import Path

import pytest

from bot.config.manifest import Constraints
from bot.models.report import AgentReport, Build, KernelReport, Machine, Report, Resource, ResourceCheckReport
from bot.present.render import render_comment
from bot.verdict.gate import resource_reasons
from bot.verdict.occupancy import (
    BARRIERS,
    BLOCKS,
    REGISTERS,
    SHARED_MEMORY,
    SM90,
    SM100,
    THREADS,
    Arch,
    drop_pct,
    occupancy,
    table,
)

GRID_SOURCE = Path(__file__).parent / "data" / "occupancy" / "grid.cpp"
NVCC = shutil.which("nvcc")

# registers: every count ptxas can report (0..255) and the 256 cuda_occupancy.h still accepts
REGISTER_COUNTS = range(257)
THREAD_COUNTS = [
    1,
    31,
    32,
    33,
    64,
    96,
    100,
    128,
    160,
    192,
    224,
    256,
    288,
    320,
    384,
    416,
    512,
    544,
    640,
    768,
    1024,
    1025,
]
# (static, dynamic) shared memory per block: around the 128 B granularity, the 48 KiB default, the per-SM
# steps of two to seven blocks with the 1 KiB reserve, and the 227 KiB opt-in limit
SMEM = [
    (0, 0), (0, 1), (1, 127), (0, 128), (4224, 0), (34816, 0), (49152, 0), (0, 48128), (0, 49152), (1024, 48127),
    (0, 57344), (0, 65536), (0, 76800), (0, 97792), (0, 98304), (0, 115712), (0, 115713), (34816, 80896),
    (0, 131072), (0, 196608), (0, 231424), (0, 232448), (1, 232448), (0, 232449), (0, 240000),
]  # fmt: skip
BARRIER_COUNTS = [0, 1, 2, 3, 5, 16]  # named barriers only matter past 2 on sm_90 (64 per SM)
FACTOR_BITS = {THREADS: 0x01, REGISTERS: 0x02, SHARED_MEMORY: 0x04, BLOCKS: 0x08, BARRIERS: 0x10}


def grid() -> list[tuple[int, int, int, int, int]]:
    cells = [(r, t, s, d, 1) for r, t, (s, d) in itertools.product(REGISTER_COUNTS, THREAD_COUNTS, SMEM)]
    cells += [(r, t, 0, d, b) for r, t, d, b in itertools.product((32, 168), (32, 256), (0, 98304), BARRIER_COUNTS)]
    return cells


@pytest.fixture(scope="module")
def grid_exe(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """tests/data/occupancy/grid.cpp built against the cuda_occupancy.h nvcc ships (host code, no GPU)."""
    if NVCC is None:
        pytest.skip("nvcc is not on the PATH: cuda_occupancy.h is not available")
    exe = tmp_path_factory.mktemp("occupancy") / "grid"
    subprocess.run([NVCC, "-x", "c++", "-O2", str(GRID_SOURCE), "-o", str(exe)], check=True, timeout=300)
    return exe


def nvidia(exe: Path, arch: Arch) -> list[str]:
    """cuda_occupancy.h's answer for every grid cell on `arch`'s compute capability."""
    cells = "".join(f"{r} {t} {s} {d} {b}\n" for r, t, s, d, b in grid())
    major, minor = arch.compute
    argv = [str(exe), str(major), str(minor)]
    return subprocess.run(argv, input=cells, capture_output=True, text=True, check=True).stdout.splitlines()


@pytest.mark.parametrize("arch", [SM90, SM100], ids=lambda a: a.name)
def test_the_calculator_matches_cuda_occupancy_h_in_every_cell(grid_exe: Path, arch: Arch) -> None:
    cells = grid()
    answers = nvidia(grid_exe, arch)
    assert len(answers) == len(cells) > 100_000
    mismatches = []
    for (r, t, s, d, b), line in zip(cells, answers, strict=True):
        blocks, flags, regs, smem, warps, limit, bars, alloc_regs, alloc_smem = (int(x) for x in line.split())
        ours = occupancy(r, t, s, d, b, arch=arch)
        limits = {k: (-1 if v is None else v) for k, v in ours.limits.items()}
        theirs = {REGISTERS: regs, SHARED_MEMORY: smem, THREADS: warps, BLOCKS: limit, BARRIERS: bars}
        if b == 0:
            theirs.pop(BARRIERS)
            assert bars == -1
        # The header flags the first four factors before it applies the barrier limit: keep only those
        # whose own limit is the final block count (our `limited_by`).
        named = {f for f, bit in FACTOR_BITS.items() if flags & bit and theirs.get(f) == blocks}
        got = (ours.blocks_per_sm, limits, set(ours.limited_by), ours.registers_per_block, ours.smem_per_block)
        want = (blocks, theirs, named, alloc_regs, alloc_smem)
        if got != want:
            mismatches.append(f"regs {r} threads {t} smem {s}+{d} barriers {b}: ours {got} != cuda_occupancy.h {want}")
    assert not mismatches, f"{len(mismatches)} cells differ on {arch.name}, e.g.\n" + "\n".join(mismatches[:10])


def test_each_target_architecture_finds_its_sm_table() -> None:
    assert table("sm_90a") is SM90 and table("sm_90") is SM90
    assert table("sm_100a") is SM100 and table("sm_100f") is SM100 and SM100.compute == (10, 0)
    assert table("sm_120a") is None  # no table: occupancy is not computed (and the review says so)
    assert occupancy(168, 256, arch=SM100).arch == "sm_100"


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
