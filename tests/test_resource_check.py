"""The review's compile-only resource step around the compiler: which files it reads, and its notes."""

from __future__ import annotations

from pathlib import Path

from bot.config.manifest import load_kernel
from bot.models.report import Resource, ResourceCheckReport
from bot.review.resource_check import resource_reads, unchanged_note, without_unchanged
from tests.flashmla_repo import KERNEL, make_flashmla_repo


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
