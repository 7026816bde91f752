"""FlashMLA's kernels in `opgate lint` and the review: include_dirs, sizeof and C++ launch expressions (the flag
allow-list is in test_flags.py, resource-only manifests in test_resource_check.py)."""

from __future__ import annotations

import pytest

from bot.config.manifest import KernelManifest, load_kernel
from bot.errors import InputError
from tests.flashmla_repo import write_manifest


@pytest.mark.parametrize("bad", ["../outside", "/usr/include", "a/../../b", "has space", "./csrc"])
def test_an_include_dir_must_be_a_relative_path_inside_the_repository(bad):
    raw = {
        "name": "k",
        "domain": "d",
        "globs": ["k/**"],
        "build": {"cuda": {"sources": ["k.cu"], "include_dirs": [bad]}},
    }
    with pytest.raises(ValueError, match="is not a relative path inside the repository"):
        KernelManifest.model_validate(raw)


@pytest.mark.parametrize(
    "bad",
    ['sizeof(T); system("x")', "sizeof(T) // comment", "sizeof(T))", "sizeof(T) { }", "sizeof(\nT)"],
)
def test_a_cxx_launch_expression_cannot_add_a_statement(bad):
    raw = {
        "name": "k", "domain": "d", "globs": ["k/**"], "build": {"cuda": {"sources": ["k.cu"]}},
        "launch": {"functions": {"k": {"dynamic_smem": bad}}},
    }  # fmt: skip
    with pytest.raises(ValueError, match="a C\\+\\+ expression may hold names"):
        KernelManifest.model_validate(raw)


def test_a_case_needs_its_builds_entry_and_a_missing_config_needs_no_tunables(tmp_path):
    raw = {"name": "k", "domain": "d", "globs": ["k/**"], "build": {"cpu": {"sources": ["k.cpp"]}}}
    with pytest.raises(ValueError, match=r"build\.cpu\.entry: required when a case runs on cpu"):
        KernelManifest.model_validate({**raw, "cases": [{"name": "one"}]})
    path = write_manifest(tmp_path / "k", 'name = "k"\ndomain = "d"\nglobs = ["k/**"]\n[tunables]\nblock = [1]\n'
                  '[build.cpu]\nsources = ["k.cpp"]\n')  # fmt: skip
    with pytest.raises(InputError, match=r"tile_config\.json: cannot read"):
        load_kernel(path.parent)
