"""`opgate review` on scratch repositories: occupancy and dynamic shared memory seen without a GPU (ptxas only)."""

from __future__ import annotations

import shutil

import pytest

from tests.conftest import make_repo

pytestmark = pytest.mark.slow
needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on the PATH")


def review(opgate, repo):
    head = repo.commit()
    return opgate("review", "--repo", str(repo.path), "--base", repo.base, "--head", head, "--offline")


def _merge(rows: list[dict]) -> dict:
    [row] = [r for r in rows if "splitk_merge_kernel" in r["function"]]
    return row


@pytest.mark.untimed  # resource figures; the CPU build is base's
@needs_nvcc
def test_merging_split_k_partials_in_fp64_costs_a_quarter_of_the_resident_warps_and_fails_naming_registers(
    opgate, tmp_path
):
    name = "v41_attention_splitk"
    repo = make_repo(tmp_path / "repo", [name])
    repo.edit(
        f"kernels/{name}/attention_cuda.cu",
        "  float total = 0.0f;\n  float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);",
        "  double total = 0.0;\n  double4 acc = make_double4(0.0, 0.0, 0.0, 0.0);",
    )
    run = review(opgate, repo)
    assert run.code == 1, run.stdout + run.stderr
    kernel = run.kernel(name)
    check = kernel["resource_check"]
    head, base = _merge(check["head"]), _merge(check["base"])
    assert head["spill_bytes"] == 0 and head["registers"] > 32 >= base["registers"]  # past the 32-register step
    assert (base["occupancy"]["blocks_per_sm"], base["occupancy"]["occupancy_pct"]) == (16, 100.0)
    assert head["occupancy"]["blocks_per_sm"] < 16 and head["occupancy"]["limited_by"] == ["registers"]
    [reason] = [r for r in kernel["reasons"] if "occupancy" in r and r.endswith(" on sm_90a")]  # and on sm_100a
    assert reason.startswith(f"resource: {head['function']}: occupancy 100% -> ")
    regs, allocated = head["registers"], -(-head["registers"] // 8) * 8  # per warp in units of 256: 8 per thread
    held = f"{regs} registers" if regs == allocated else f"{regs} -> {allocated} registers allocated per thread"
    assert f"limited by registers: {held} x 128 threads = {allocated * 128:,} allocated per block" in reason
    assert "fewer resident warps than base > max_occupancy_drop_pct 0%" in reason
    assert all(c["verdict"] == "pass" for c in kernel["cases"] if c["device"] == "cpu")  # the CPU twin is untouched
    assert "| 100% → **" in run.comment and "| registers, threads → registers |" in run.comment


@pytest.mark.untimed  # resource figures, no latency asserted
@needs_nvcc
def test_tile_n_128_to_256_doubles_the_dynamic_shared_memory_and_the_comment_shows_it(opgate, tmp_path):
    name = "deepgemm_tile"
    repo = make_repo(tmp_path / "repo", [name])
    repo.edit(f"kernels/{name}/tile_config.json", '"tile_n": 128', '"tile_n": 256')
    run = review(opgate, repo)
    check = run.kernel(name)["resource_check"]
    assert check["status"] == "ok" and check["launch_errors"] == []
    assert sorted(r["dynamic_smem_bytes"] for r in check["base"]) == [98_304, 98_304]
    assert sorted(r["dynamic_smem_bytes"] for r in check["head"]) == [196_608, 196_608]
    assert all(r["threads"] == 256 and r["occupancy"]["blocks_per_sm"] == 1 for r in check["head"])
    assert "| 0 + 98,304 → 0 + 196,608 | 128 → 256 |" in run.comment
    assert any(n.endswith("dynamic_smem_bytes 98304 -> 196608 on sm_90a") for n in run.kernel(name)["notes"])


@pytest.mark.untimed  # bad input, nothing built
def test_a_launch_expression_outside_the_language_fails_the_kernel_naming_manifest_and_expression(opgate, tmp_path):
    name = "flashmla_decode"
    repo = make_repo(tmp_path / "repo", [name])
    repo.edit(
        f"kernels/{name}/kernel.toml",
        'dynamic_smem = "4 * ((block_n + block_h) * 292 + block_h * block_n + 4 * block_h)"',
        "dynamic_smem = \"__import__('os').getpid()\"",
    )
    run = review(opgate, repo)
    assert run.code == 2  # a manifest that does not load is bad input: exit 2 with the message, the report says fail
    assert run.stderr.strip().splitlines()[-1].startswith(f"opgate: error: invalid kernel definition: kernels/{name}/")
    kernel = run.kernel(name)
    assert kernel["verdict"] == "fail" and kernel["build"] is None  # nothing was built or run
    assert kernel["reasons"] == [
        f"invalid kernel definition: kernels/{name}/kernel.toml: launch: "
        "launch.functions.mla_decode_kernel.dynamic_smem = \"__import__('os').getpid()\": a call of anything "
        "but min() or max() with two or more arguments is not allowed (only integers, names, + - * / //, min, max)"
    ]
