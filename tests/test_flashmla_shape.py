"""`opgate review` on a repository built like FlashMLA, on a CPU runner: include_dirs, a real git submodule,
FlashMLA's own nvcc flags, a resource-only kernel (no reference, no case), launch figures from the code."""

from __future__ import annotations

import shutil

import pytest

from tests.comment_checks import text_of
from tests.conftest import git
from tests.flashmla_repo import KERNEL, SUBMODULE, bump_dependency, make_flashmla_repo
from tests.hostile import html

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on the PATH")
TRAITS = f"{KERNEL}/traits.h"
RESOURCES_ONLY = "resources checked; no case ran (needs a CUDA GPU)"  # a manifest without cases, its resources passed


def review(opgate, repo, head, *extra):
    return opgate("review", "--repo", str(repo.path), "--base", repo.base, "--head", head, "--offline", *extra)


def _row(check: dict, side: str = "head") -> dict:
    [row] = check[side]
    assert row["function"].startswith("void mla_kernel<Traits<minicute::bfloat16_t>"), row["function"]
    return row


@pytest.mark.slow
@pytest.mark.untimed
@needs_nvcc
def test_a_comment_only_change_keeps_the_resources_and_says_no_case_ran(opgate, tmp_path):
    repo, _ = make_flashmla_repo(tmp_path)
    repo.edit(f"{KERNEL}/kernel.cuh", "// Dense decode,", "// Dense decode (reworded),")
    run = review(opgate, repo, repo.commit("a comment"))
    assert run.code == 0, run.stdout + run.stderr
    kernel = run.kernel("dense")
    assert kernel["verdict"] == "undecided" and kernel["undecided"] == [RESOURCES_ONLY]
    check = kernel["resource_check"]
    assert (check["status"], check["base_status"], check["launch_errors"]) == ("ok", "ok", [])
    head, base = _row(check), _row(check, "base")
    assert {k: head[k] for k in ("registers", "spill_bytes", "threads")} == {
        k: base[k] for k in ("registers", "spill_bytes", "threads")
    }
    # the .cu in instantiations/ found ../kernel.cuh, csrc/params.h and the submodule's header; dynamic smem is
    # sizeof(Traits<minicute::bfloat16_t>::SharedMemoryPlan) = 64 x 64 x 2 B + 256 x 4 B, as the compiler said
    assert head["spill_bytes"] == 0 and head["dynamic_smem_bytes"] == 64 * 64 * 2 + 256 * 4
    assert head["threads"] == 256 and head["occupancy"]["occupancy_pct"] == 12.5
    assert any(n.startswith("resource check: unchanged from base") for n in kernel["notes"])
    headline = run.comment.split("### ")[0]
    assert "undecided" in headline and RESOURCES_ONLY in headline and "pass" not in headline.lower()
    assert "mla_kernel<Traits<minicute::bfloat16_t> >" in text_of(html(run.comment))  # <…> shown as written


@pytest.mark.slow
@pytest.mark.untimed
@needs_nvcc
def test_a_thread_count_change_takes_the_codes_threads_and_names_the_stale_manifest_value(opgate, tmp_path):
    repo, _ = make_flashmla_repo(tmp_path)
    repo.edit(TRAITS, "NUM_THREADS = 256", "NUM_THREADS = 384")  # kernel.toml still says threads = 256
    run = review(opgate, repo, repo.commit("384 threads"))
    assert run.code == 1, run.stdout + run.stderr
    kernel = run.kernel("dense")
    head, base = _row(kernel["resource_check"]), _row(kernel["resource_check"], "base")
    assert (base["threads"], head["threads"]) == (256, 384)
    assert (base["occupancy"]["occupancy_pct"], head["occupancy"]["occupancy_pct"]) == (12.5, 18.75)
    [stale] = [r for r in kernel["reasons"] if "threads = 256" in r]
    assert stale.startswith(f"resource: {KERNEL}/kernel.toml: launch.functions.mla_kernel.threads = 256 but the code")
    assert "says 384 threads per block" in stale and "the occupancy uses the code's 384" in stale
    assert "12.5% → 18.75%" in run.comment


@pytest.mark.slow
@pytest.mark.untimed
@needs_nvcc
def test_a_resource_only_kernel_names_each_changed_file_no_gate_read_not_judged_never_unchanged(opgate, tmp_path):
    repo, _ = make_flashmla_repo(tmp_path)
    for name, text in (("pybind.cpp", '#include "heuristics.h"\n'), ("heuristics.h", "int splits(int n);\n")):
        repo.write(f"{KERNEL}/{name}", text)
    repo.write(f"{KERNEL}/__init__.py", "")
    repo.edit(f"{KERNEL}/kernel.cuh", "// Dense decode,", "// Dense decode (reworded),")  # read: no line for it
    run = review(opgate, repo, repo.commit("the host side"))
    assert run.code == 0, run.stdout + run.stderr
    kernel = run.kernel("dense")
    assert kernel["verdict"] == "undecided"
    unread = [line.split(": ")[0] for line in kernel["undecided"] if line.endswith(": not judged")]
    assert sorted(unread) == [f"{KERNEL}/{n}" for n in ("__init__.py", "heuristics.h", "pybind.cpp")]
    assert not any("unchanged from base" in n for n in kernel["notes"]), kernel["notes"]
    assert "unchanged from base" not in run.comment


@pytest.mark.slow
@pytest.mark.untimed
@needs_nvcc
def test_a_change_that_spills_fails(opgate, tmp_path):
    repo, _ = make_flashmla_repo(tmp_path)
    repo.edit(TRAITS, "MIN_BLOCKS_PER_SM = 1", "MIN_BLOCKS_PER_SM = 4")  # 64 registers a thread: 96 live values spill
    run = review(opgate, repo, repo.commit("four blocks per SM"))
    assert run.code == 1
    kernel = run.kernel("dense")
    head = _row(kernel["resource_check"])
    assert kernel["verdict"] == "fail" and head["registers"] <= 64 and head["spill_bytes"] > 0
    assert any(r.startswith("resource: ") and f"spills {head['spill_bytes']} bytes" in r for r in kernel["reasons"])
    assert RESOURCES_ONLY not in kernel["undecided"]


@pytest.mark.slow
@pytest.mark.untimed
@needs_nvcc
def test_a_submodule_bump_is_planned_and_each_side_compiles_its_own_pinned_commit(opgate, tmp_path):
    repo, dep = make_flashmla_repo(tmp_path)
    head = bump_dependency(repo, dep, "kTileRows = 64", "kTileRows = 128")
    plan = opgate("review", "--plan", "--repo", str(repo.path), "--base", repo.base, "--head", head)
    assert plan.code == 0 and '"kernel":"dense"' in plan.stdout, plan.stdout + plan.stderr
    run = review(opgate, repo, head)
    kernel = run.kernel("dense")
    head_row, base_row = _row(kernel["resource_check"]), _row(kernel["resource_check"], "base")
    assert base_row["dynamic_smem_bytes"] == 64 * 64 * 2 + 256 * 4  # base's minicute
    assert head_row["dynamic_smem_bytes"] == 128 * 64 * 2 + 256 * 4  # head's minicute
    assert kernel["notes"][0].startswith(
        "change size: 1 file(s) of this kernel changed"
    )  # the gitlink is the one changed path
    assert not (repo.path / ".git" / "worktrees").exists() or not list((repo.path / ".git" / "worktrees").iterdir())


def test_a_submodule_missing_from_the_checkout_is_a_clear_error(opgate, tmp_path):
    repo, _ = make_flashmla_repo(tmp_path)
    repo.edit(f"{KERNEL}/kernel.cuh", "// Dense decode,", "// Dense decode (reworded),")
    head = repo.commit("a comment")
    clone = tmp_path / "clone"  # checked out as CI does without `submodules: true`
    git(tmp_path, "clone", "-q", str(repo.path), str(clone))
    assert not any((clone / SUBMODULE).iterdir())
    run = opgate("review", "--repo", str(clone), "--base", repo.base, "--head", head, "--offline")
    assert run.code == 2, run.stdout + run.stderr
    [line] = [x for x in run.stderr.splitlines() if x.startswith("opgate: error:")]
    assert f"{KERNEL}: submodule {SUBMODULE} of head" in line and "which the checkout does not hold" in line
    assert "git submodule update --init --recursive" in line
