"""The review's compile-only resource step (bot/review/resource_check.py): resource-only manifests (FlashMLA's flags
and include dirs the review refuses), which files it reads, and its notes; through `opgate review`: a compile failure
base shares is undecided and names the header and the #include that asked for it; one only head has fails naming it;
a manifest mistake is named as one; a header-only kernel with sm_90a's wgmma compiles as it ships
(tests/fixtures/compile_repo)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from bot.config.manifest import load_kernel
from bot.config.manifest_tables import Constraints
from bot.lint import lint_paths
from bot.models.finding import Phrase
from bot.models.report import KernelReport, Report, Resource, ResourceCheckReport
from bot.present.status import acceptance_status
from bot.review.resource_check import flag_findings, resource_reads, without_unchanged
from bot.text.i18n import english_runs, is_chinese, speaking
from bot.verdict.gate import Policy, kernel_verdict
from bot.verdict.written import written_kernel
from bot.wording import spoken
from tests.compile_repo import make_compile_repo, prepend, review
from tests.conftest import git
from tests.flashmla_repo import FLASHMLA_NVCC, KERNEL, make_flashmla_repo, write_manifest

RESOURCES_ONLY = "resources checked; no case ran (needs a CUDA GPU)"  # a manifest without cases, its resources passed
RESOURCE_ONLY = """\
    name = "dense"
    domain = "flashmla"
    globs = ["csrc/dense/**"]

    [build.cuda]
    sources = ["instantiations/bf16.cu"]
    include_dirs = ["csrc", "third_party/dep/include"]
    cuda_cflags = {flags}

    [launch]
    headers = ["traits.h"]

    [launch.functions.mla_kernel]
    dynamic_smem = "sizeof(Traits<cutlass::bfloat16_t>::SharedMemoryPlan)"
    """


def judged_kernel(*args: Any, **kw: Any) -> KernelReport:
    """`kernel_verdict`'s report as report.json states it (its findings' lines written)."""
    return written_kernel(kernel_verdict(*args, **kw))


def test_a_resource_only_manifest_with_flashmla_flags_and_a_sizeof_loads_and_lints(tmp_path):
    git(tmp_path, "init", "-q")
    (tmp_path / "third_party" / "dep" / "include").mkdir(parents=True)
    (tmp_path / "third_party" / "dep" / "include" / "dep.h").write_text("#pragma once\n")
    path = write_manifest(tmp_path / "csrc" / "dense", RESOURCE_ONLY.format(flags=json.dumps(FLASHMLA_NVCC)))
    (path.parent / "instantiations").mkdir()
    (path.parent / "instantiations" / "bf16.cu").write_text('#include "../kernel.cuh"\n')  # what lint checks exists
    kernel = load_kernel(path.parent, path="csrc/dense")  # no tile_config.json: no tunables declared
    assert kernel.manifest.cases == [] and kernel.config == {}
    assert kernel.manifest.launch.cxx_expressions() == ["sizeof(Traits<cutlass::bfloat16_t>::SharedMemoryPlan)"]
    assert flag_findings(kernel) == []
    assert [f for f in lint_paths([path]) if f.severity == "error"] == []


def test_lint_reports_the_flags_and_include_dirs_the_review_refuses(tmp_path):
    git(tmp_path, "init", "-q")
    (tmp_path / "csrc").mkdir()
    (tmp_path / "third_party" / "dep").mkdir(parents=True)  # a submodule that was not checked out: empty
    manifest = RESOURCE_ONLY.format(flags=json.dumps(["-O3", "-ccbin", "./evil.sh"])).replace(
        '"csrc", "third_party/dep/include"', '"csrc", "third_party/dep", "no/such/dir"'
    )
    path = write_manifest(tmp_path / "csrc" / "dense", manifest)
    findings = lint_paths([path])
    flags = [f for f in findings if f.rule == "KERN004"]
    assert [f.line for f in flags] == [8, 8] and "'-ccbin' is not allowed" in flags[0].message
    dirs = sorted(f.message for f in findings if f.rule == "KERN005")
    assert dirs == [
        "[build.cuda] include_dirs: 'no/such/dir' is not a folder of the repository",
        "[build.cuda] include_dirs: 'third_party/dep' is empty: a submodule not checked out? "
        "(git submodule update --init --recursive)",
    ]
    kernel = load_kernel(path.parent, path="csrc/dense")
    review = flag_findings(kernel)  # the same flags fail the review, and the missing folder too
    assert any("'-ccbin' is not allowed" in f for f in review)
    assert any("'no/such/dir' is not a folder in the repository" in f for f in review)


def test_an_include_dir_that_is_a_symlink_out_of_the_repository_is_refused(tmp_path):
    (tmp_path / "escape").symlink_to("/usr/include")
    path = write_manifest(
        tmp_path / "dense", RESOURCE_ONLY.format(flags="[]").replace('"csrc", "third_party/dep/include"', '"escape"')
    )
    kernel = load_kernel(path.parent, path="dense")
    assert flag_findings(kernel) == [
        "dense/kernel.toml [build.cuda] include_dirs: 'escape' leads out of the repository (a symlink?)"
    ]


def test_the_files_a_resource_check_reads_are_its_units_and_what_they_include_transitively(tmp_path: Path):
    repo, _ = make_flashmla_repo(tmp_path)
    (repo.path / KERNEL / "pybind.cpp").write_text('#include "heuristics.h"\n')
    (repo.path / KERNEL / "heuristics.h").write_text("inline int pick(int n) { return n > 4 ? 2 : 1; }\n")
    kernel = load_kernel(repo.path / KERNEL, path=KERNEL)
    assert resource_reads(kernel) == {
        f"{KERNEL}/kernel.toml",
        f"{KERNEL}/tile_config.json",  # the tunable config kernel.toml names (its default name here)
        f"{KERNEL}/instantiations/bf16.cu",
        f"{KERNEL}/kernel.cuh",  # "../kernel.cuh", beside the including file
        f"{KERNEL}/traits.h",
        f"{KERNEL}/config.h",
        "csrc/params.h",  # through include_dirs
        "csrc/minicute/include/minicute/numeric.hpp",  # <minicute/numeric.hpp>, the submodule's
    }


def test_the_unchanged_note_gives_way_where_changed_files_went_unread():
    """The check records the fact (every function as in base); the gate says it, in the reader's language, and says
    what it compared, never "unchanged from base", where changed files went unread."""
    check = ResourceCheckReport(
        status="ok",
        head=[Resource(function="k(int)", registers=8)],
        launch_notes=[Phrase.as_written("other")],
        unchanged="same",
    )
    kernel = judged_kernel(_kernel(check), [], [], Constraints(), Policy())
    assert kernel.notes[:2] == [
        "other",
        "resource check: unchanged from base: 1 function(s) with the same registers, spills, stack, shared memory and "
        "occupancy",
    ]
    without_unchanged(check)
    kernel = judged_kernel(_kernel(check), [], [], Constraints(), Policy())
    assert not any("unchanged from base" in n for n in kernel.notes)
    assert kernel.notes[1].startswith("resource check: the 1 compiled function(s) have base's registers")
    with speaking("zh-CN"):
        [zh] = [spoken.render(f) for f in kernel.findings if f.key.startswith("resources.unchanged")]
    assert is_chinese(zh) and english_runs(zh) == [] and "1" in zh, zh


def _kernel(check: ResourceCheckReport) -> KernelReport:
    return KernelReport(name="k", domain="deepgemm", changed=True, verdict="pass", resource_check=check)


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
