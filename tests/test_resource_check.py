"""The review's compile-only resource step (bot/review/resource_check.py): resource-only manifests (FlashMLA's flags
and include dirs the review refuses), which files it reads, and its notes."""

from __future__ import annotations

import json
from pathlib import Path

from bot.config.manifest import load_kernel
from bot.lint import lint_paths
from bot.models.report import Resource, ResourceCheckReport
from bot.review.resource_check import flag_findings, resource_reads, unchanged_note, without_unchanged
from tests.conftest import git
from tests.flashmla_repo import FLASHMLA_NVCC, KERNEL, make_flashmla_repo, write_manifest

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
    check = ResourceCheckReport(
        status="ok", head=[Resource(function="k(int)", registers=8)], launch_notes=[unchanged_note(1), "other"]
    )
    without_unchanged(check)
    assert not any("unchanged from base" in n for n in check.launch_notes)
    assert check.launch_notes[0].startswith("resource check: the 1 compiled function(s) have base's registers")
    assert check.launch_notes[1] == "other"
