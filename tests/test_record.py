"""Main's record of a review (bot/mainline/record.py): one figure per measured case and per compiled function."""

from __future__ import annotations

import pytest

from bot.mainline.record import MainCommit, ResourceFigure, figures, occupancy_estimate, pr_from_subject
from tests.mainline_world import _report


@pytest.mark.parametrize(
    ("subject", "pr"),
    [
        ("deepgemm: tile_n 256 (#42)", 42),
        ("Merge pull request #7 from octo/branch", 7),
        ("fix #42 in the README", None),
        ("plain commit", None),
    ],
)
def test_the_pull_request_of_a_main_commit_comes_from_its_subject(subject, pr):
    assert pr_from_subject(subject) == pr


def test_occupancy_is_limited_by_registers_threads_or_shared_memory():
    assert occupancy_estimate(128, 256, 0) == 0.25  # 4096 regs per warp × 8 warps: 2 blocks, 16 of 64 warps
    assert occupancy_estimate(32, 256, 0) == 1.0
    assert occupancy_estimate(32, 256, 100_000) == 0.25  # 2 blocks of 101 KiB fit in 228 KiB
    assert occupancy_estimate(64, None, 0) is None
    assert occupancy_estimate(130, 256, 0) == 0.125  # 136 allocated per thread: 1 block of 8 warps, not 2


def test_occupancy_is_estimated_on_the_architecture_the_function_was_compiled_for():
    # 32 registers x 256 threads fill sm_90's 64 warps; an A10 (sm_86) holds 48, a T4 (sm_75) 32: both are full
    assert [occupancy_estimate(32, 256, 0, arch) for arch in ("sm_90a", "sm_86", "sm_75")] == [1.0, 1.0, 1.0]
    # 40 KiB of static shared memory: 5 blocks of 8 in sm_90's 228 KiB, 2 in an A10's 100 KiB, 1 in a T4's 64 KiB
    assert [occupancy_estimate(32, 256, 40_960, arch) for arch in ("sm_90a", "sm_86", "sm_75")] == [
        40 / 64,
        16 / 48,
        8 / 32,
    ]
    assert occupancy_estimate(32, 256, 0, "sm_110a") is None  # no table: no estimate, never sm_90's
    row = ResourceFigure(sha="a" * 40, kernel="k", function="f", arch="sm_86", registers=32, smem_bytes=40_960,
                         threads=256, committed_at="2025-01-01T00:00:00+00:00")  # fmt: skip
    assert row.occupancy == 16 / 48


def test_a_main_review_gives_one_figure_per_measured_case_and_one_per_compiled_function():
    main = MainCommit(sha="c" * 40, base_sha="b" * 40, committed_at="2026-03-02T09:00:00+00:00")
    cases, resources = figures(_report(), main)
    assert [(c.kernel, c.case_name, c.p50_ms, c.ci_low_pct, c.ci_high_pct) for c in cases] == [
        ("deepgemm_tile", "square_512", 1.1, 9.0, 11.0)
    ]
    assert resources == [
        ResourceFigure(
            sha="c" * 40, kernel="deepgemm_tile", function="k1", registers=96, smem_bytes=4096, threads=256,
            committed_at=main.committed_at,
        )
    ]  # fmt: skip
