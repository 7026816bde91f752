"""bot/review/resource_check.py through `opgate review`: a compile failure base shares is undecided and names the
header and the #include that asked for it; one only head has fails naming it; a manifest mistake is named as one;
a header-only kernel with sm_90a's wgmma compiles as it ships (tests/fixtures/compile_repo)."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from bot.edges.publish import acceptance_status
from bot.models.report import Report
from bot.verdict.gate import RESOURCES_ONLY
from tests.compile_repo import make_compile_repo, prepend, review

NVCC = shutil.which("nvcc")
needs_nvcc = pytest.mark.skipif(NVCC is None, reason="nvcc is not on the PATH")
SPARSE = "ops/sparse_gather/sparse_gather.cu"
WGMMA = "ops/wgmma_tile/wgmma_tile.cuh"


def _has_cusparse() -> bool:
    if NVCC is None:
        return False
    source = "#include <cusparse.h>\n"
    return subprocess.run([NVCC, "-E", "-x", "cu", "-"], input=source, capture_output=True, text=True).returncode == 0


def _headline(comment: str) -> str:
    return comment.split("### ")[0]


@pytest.mark.slow
@pytest.mark.untimed
@needs_nvcc
@pytest.mark.skipif(_has_cusparse(), reason="this runner's CUDA toolkit has cusparse.h: nothing fails to compile")
def test_a_header_neither_side_finds_leaves_the_architecture_undecided_naming_it(opgate, tmp_path):
    repo = make_compile_repo(tmp_path / "repo")
    prepend(repo, SPARSE, "// Reworded: rows gathered through the CSR row pointers.\n")
    run = review(opgate, repo, repo.commit("a comment"))
    assert run.code == 0, run.stdout + run.stderr
    kernel = run.kernel("sparse_gather")
    check = kernel["resource_check"]
    assert (check["status"], check["base_status"]) == ("compile_fail", "compile_fail")
    assert (check["errors"][0]["path"], check["errors"][0]["line"], check["base_errors"][0]["line"]) == (SPARSE, 3, 2)
    assert kernel["verdict"] == "undecided" and kernel["reasons"] == []
    [why] = kernel["undecided"]  # one line: no "the manifest has no case" beside it
    assert why.startswith(
        "resource: CUDA sources for sm_90a: not decided, base fails alike (the runner or the manifest, not the "
        f"change): {SPARSE}:3: #include of cusparse.h, which the compiler cannot find; cusparse.h ships with the "
        "CUDA toolkit (cuSPARSE): install that toolkit component on the runner"
    )
    assert "/opgate/" not in why
    headline = _headline(run.comment)
    assert "undecided" in headline and "cusparse.h" in headline
    assert "pass" not in headline.lower() and "unchanged" not in headline
    state, description = acceptance_status(Report.model_validate(run.report))
    assert state == "success" and description.startswith("undecided, not blocking: sparse_gather")


@pytest.mark.slow
@pytest.mark.untimed
@needs_nvcc
def test_a_header_only_head_lacks_fails_naming_it_and_its_include_line(opgate, tmp_path):
    repo = make_compile_repo(tmp_path / "repo")
    repo.edit(WGMMA, "#pragma once\n", '#pragma once\n#include "tile_policy.h"\n')
    run = review(opgate, repo, repo.commit("a tile policy"))
    assert run.code == 1, run.stdout + run.stderr
    kernel = run.kernel("wgmma_tile")
    assert kernel["verdict"] == "fail"
    assert kernel["resource_check"]["base_status"] == "ok"  # base compiles: the error is head's
    [reason] = kernel["reasons"]
    assert reason.startswith(
        f"resource: CUDA sources for sm_90a: head does not compile: {WGMMA}:3: #include of tile_policy.h, which "
        "the compiler cannot find; if tile_policy.h is a header of the repository, add the folder that holds it to "
        "include_dirs in kernel.toml"
    )
    assert "see the head log" not in reason and "/opgate/" not in reason
    assert "tile_policy.h" in _headline(run.comment)


@pytest.mark.slow
@pytest.mark.untimed
@needs_nvcc
def test_a_header_only_kernel_whose_instantiation_uses_wgmma_compiles_for_sm_90a(opgate, tmp_path):
    repo = make_compile_repo(tmp_path / "repo")
    prepend(repo, WGMMA, "// Reworded.\n")
    run = review(opgate, repo, repo.commit("a comment"))
    assert run.code == 0, run.stdout + run.stderr
    kernel = run.kernel("wgmma_tile")
    check = kernel["resource_check"]
    assert (check["status"], check["base_status"], check["errors"]) == ("ok", "ok", []), check["log_tail"]
    [row] = check["head"]
    assert row["function"] == "void wgmma_tile_kernel<128>(float const*, float*, int)" and row["threads"] == 128
    assert kernel["verdict"] == "undecided" and kernel["undecided"] == [RESOURCES_ONLY]


@pytest.mark.slow
@pytest.mark.untimed
def test_a_source_outside_the_kernel_folder_is_named_as_a_manifest_mistake(opgate, tmp_path):
    repo = make_compile_repo(tmp_path / "repo")
    repo.edit("ops/wgmma_tile/kernel.toml", '"instantiations/tile_128.cu"', '"../sparse_gather/sparse_gather.cu"')
    run = review(opgate, repo, repo.commit("a source from another kernel"))
    assert run.code == 1, run.stdout + run.stderr
    kernel = run.kernel("wgmma_tile")
    assert kernel["verdict"] == "fail"
    text = " ".join(kernel["reasons"])
    assert "kernel.toml" in text and "not a file inside the kernel folder" in text
    assert "does not compile" not in text
