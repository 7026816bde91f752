"""bot/verdict/flags.py: the target options one architecture is compiled with, as the manifest ships them."""

from __future__ import annotations

import pytest

from bot.verdict.flags import default_target, for_arch

BOTH = ["-O3", "-gencode", "arch=compute_90a,code=sm_90a", "-gencode=arch=compute_100a,code=sm_100a", "-lineinfo"]


def test_the_default_target_adds_no_ptx_of_another_architecture():
    assert default_target("sm_90a") == ["-gencode", "arch=compute_90a,code=sm_90a"]
    assert default_target("sm_100a") == ["-gencode", "arch=compute_100a,code=sm_100a"]
    assert default_target("sm_80") == ["-gencode", "arch=compute_80,code=sm_80"]


@pytest.mark.parametrize(
    ("flags", "arch", "expected"),
    [
        (BOTH, "sm_90a", ["-O3", "-lineinfo", "-gencode", "arch=compute_90a,code=sm_90a"]),
        (BOTH, "sm_100a", ["-O3", "-lineinfo", "-gencode=arch=compute_100a,code=sm_100a"]),
        (["-O3"], "sm_90a", ["-O3", "-gencode", "arch=compute_90a,code=sm_90a"]),  # only `architectures`
        (["-arch=sm_90a"], "sm_90a", ["-arch=sm_90a"]),  # as written, with the compute_90 PTX it ships
        (["-arch=sm_90a"], "sm_100a", ["-gencode", "arch=compute_100a,code=sm_100a"]),
        (["-arch", "compute_90a", "-code", "sm_90a"], "sm_90a", ["-arch", "compute_90a", "-code", "sm_90a"]),
        (
            ["--generate-code=arch=compute_90a,code=[sm_90a,compute_90a]"],
            "sm_90a",
            ["--generate-code=arch=compute_90a,code=[sm_90a,compute_90a]"],
        ),
        (["-gencode", "arch=compute_80,code=sm_80"], "sm_90a", ["-gencode", "arch=compute_90a,code=sm_90a"]),
    ],
)
def test_each_architecture_keeps_the_manifests_own_target_options(flags, arch, expected):
    assert for_arch(flags, arch) == expected
