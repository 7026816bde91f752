"""The comment and report.json name what no gate read: binary files, large files, files in no kernel."""

from __future__ import annotations

import random

from bot.models.diff import FileChange
from bot.review.coverage import LISTED_NAMES, coverage, not_judged_findings, not_read_findings
from bot.wording.messages import render

NOT_JUDGED = "not judged"


def not_judged(paths: list[str], folder: str, compiled: dict[str, set[str]], ran: list[str]) -> list[str]:
    """The changed sources no build that ran compiles, as the comment lists them."""
    return [render(f) for f in not_judged_findings(paths, folder, compiled, ran)]


def not_read(paths: list[str], read: set[str]) -> list[str]:
    """The changed files a resource check does not read, as the comment lists them."""
    return [render(f) for f in not_read_findings(paths, read)]


CONFIG = "kernels/deepgemm_tile/tile_config.json"


def test_a_large_binary_in_a_kernel_and_200_other_files_are_named_and_counted(opgate, kernel_repo):
    kernel_repo.edit(CONFIG, '"tile_m": 128', '"tile_m": 96')  # fails statically: the review builds nothing
    blob = kernel_repo.path / "kernels" / "deepgemm_tile" / "weights.bin"
    blob.write_bytes(random.Random(7).randbytes(10 * 1024 * 1024))
    for i in range(200):
        kernel_repo.write(f"docs/page-{i:03d}.md", f"page {i}\n")
    run = opgate("review", "--repo", str(kernel_repo.path), "--base", kernel_repo.base, "--head", kernel_repo.commit(),
                 "--offline")  # fmt: skip
    assert run.code == 1, run.stderr
    cov = run.report["coverage"]
    assert cov["files"] == 202
    assert cov["binary"] == {"total": 1, "names": ["kernels/deepgemm_tile/weights.bin"]}
    assert cov["large"] == {"total": 1, "names": ["kernels/deepgemm_tile/weights.bin"]}
    assert cov["unmatched"]["total"] == 200 and len(cov["unmatched"]["names"]) == LISTED_NAMES
    comment = run.comment
    assert "**Changed files no gate read** (of 202 changed; look at these yourself):" in comment
    assert "- binary (1): `kernels/deepgemm_tile/weights.bin`" in comment
    assert "- over 1 MiB (1): `kernels/deepgemm_tile/weights.bin`" in comment
    assert "- in no kernel (200): `docs/page-000.md`, " in comment and "`docs/page-009.md` and 190 more" in comment
    assert "docs/page-010.md" not in comment


def test_a_change_every_gate_read_has_no_footer(opgate, kernel_repo):
    kernel_repo.edit(CONFIG, '"tile_m": 128', '"tile_m": 96')
    run = opgate("review", "--repo", str(kernel_repo.path), "--base", kernel_repo.base, "--head", kernel_repo.commit(),
                 "--offline")  # fmt: skip
    assert run.report["coverage"] == {
        "files": 1,
        "size_limit_bytes": 1024 * 1024,
        "binary": {"total": 0, "names": []},
        "large": {"total": 0, "names": []},
        "unmatched": {"total": 0, "names": []},
        "kernel_sources": {"total": 0, "names": []},
    }
    assert "no gate read" not in run.comment


def test_a_renamed_file_counts_in_a_kernel_when_either_name_is():
    moved = FileChange(path="kernels/k/a.cu", old_path="old/a.cu")
    out = FileChange(path="elsewhere/a.cu", old_path="kernels/k/b.cu")
    away = FileChange(path="elsewhere/c.cu", old_path="old/c.cu")
    cov = coverage([moved, out, away], ["kernels/k/**"], {"elsewhere/c.cu": 5_000_000})
    assert cov.unmatched.names == ["elsewhere/c.cu"] and cov.large.names == ["elsewhere/c.cu"]


def test_a_changed_source_no_build_that_ran_compiles_is_named_not_judged():
    compiled = {"cpu": {"muladd.cpp"}, "cuda": {"cuda/muladd.cu", "muladd.cpp", "cuda/common.cuh"}}
    changed = [
        "ops/csrc/muladd.cpp",  # the CPU build ran and compiles it: judged
        "ops/csrc/cuda/muladd.cu",  # only the CUDA build compiles it, which a CPU machine does not run
        "ops/csrc/extra.cpp",  # claimed by the globs, listed in no build
        "ops/common/helpers.h",  # claimed by wider globs, outside the folder every build sees
        "ops/csrc/reference.py",  # not a source: the reference has its own note
    ]
    assert not_judged(changed, "ops/csrc", compiled, ["cpu"]) == [
        "ops/csrc/cuda/muladd.cu: changed, compiled by no build that ran here (only [build.cuda], which needs a "
        "CUDA GPU): not judged",
        "ops/csrc/extra.cpp: changed, compiled by no build: not judged",
        "ops/common/helpers.h: changed, compiled by no build: not judged",
    ]
    assert not_judged(changed[:2], "ops/csrc", compiled, ["cpu", "cuda"]) == []  # a GPU runner builds both


def test_a_resource_only_kernel_names_every_changed_file_its_resource_check_does_not_read():
    read = {"ops/k/kernel.toml", "ops/k/k.cu", "ops/k/k.cuh", "third_party/lib/include/lib.h"}
    changed = ["ops/k/k.cu", "ops/k/pybind.cpp", "ops/k/__init__.py", "ops/k/heuristics.h", "third_party/lib"]
    lines = not_read(changed, read)
    assert [line.split(": ")[0] for line in lines] == ["ops/k/pybind.cpp", "ops/k/__init__.py", "ops/k/heuristics.h"]
    assert all(line.endswith(f": {NOT_JUDGED}") and "resource check" in line for line in lines)
    assert not any("unchanged" in line for line in lines)  # a submodule bump (third_party/lib) is read, not listed


def test_a_kernel_at_the_repository_root_reads_paths_from_the_root():
    from bot.config.manifest import ROOT

    compiled = {"cuda": {"flash.cu", "main.cpp"}}
    changed = ["flash.cu", "csrc/extra.cu", "README.md"]
    assert not_judged(changed, ROOT, compiled, ["cpu"]) == [
        "flash.cu: changed, compiled by no build that ran here (only [build.cuda], which needs a CUDA GPU): not judged",
        "csrc/extra.cu: changed, compiled by no build: not judged",
    ]
    assert not_judged(changed, ROOT, compiled, ["cpu", "cuda"]) == [
        "csrc/extra.cu: changed, compiled by no build: not judged"
    ]
