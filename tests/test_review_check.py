"""bot/review/check.py, `opgate check`'s flow: it names each architecture the kernel ships for that has no occupancy
table, before it builds."""

from __future__ import annotations

from pathlib import Path

from bot.config.manifest import load_kernel
from bot.config.settings import Settings
from bot.review.check import Checker
from tests.conftest import KERNELS


def test_check_says_occupancy_is_not_computed_for_an_architecture_without_a_table(tmp_path: Path) -> None:
    kernel = load_kernel(KERNELS / "deepgemm_tile")
    manifest = kernel.manifest
    shipped = manifest.constraints.model_copy(update={"architectures": ["sm_86", "sm_110a"]})
    # only the CUDA build, on a runner that builds none: the check stops at the first cpu case, before any build
    cuda_only = manifest.model_copy(update={"constraints": shipped, "build": {"cuda": manifest.build["cuda"]}})
    checker = Checker(Settings(build_dir=tmp_path))
    checker.env = checker.env.model_copy(update={"device": "cpu"})
    result = checker.check(kernel.model_copy(update={"manifest": cuda_only}))
    assert result.steps[0].endswith("kernel.toml: valid; tunables and flags allowed")
    assert result.skipped[0] == (
        "occupancy not computed for sm_110a: no table "
        "(opgate has sm_75, sm_80, sm_86, sm_87, sm_89, sm_90, sm_100, sm_103, sm_120)"
    )
    assert [line for line in result.skipped if line.startswith("occupancy")] == result.skipped[:1]  # sm_86 has one
