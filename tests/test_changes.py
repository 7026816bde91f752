"""The diff a review reads (bot/review/changes.py): renames, line counts, and which globs a change touches."""

from __future__ import annotations

import pytest

from bot.review.changes import matches, parse_diff, touching

DIFF = """\
diff --git a/kernels/deepgemm_tile/tile_config.json b/kernels/deepgemm_tile/tile_config.json
index 1111111..2222222 100644
--- a/kernels/deepgemm_tile/tile_config.json
+++ b/kernels/deepgemm_tile/tile_config.json
@@ -1 +1 @@
-{"tile_m": 128, "tile_n": 128, "tile_k": 64}
+{"tile_m": 96, "tile_n": 128, "tile_k": 64}
diff --git a/old/place.cu b/kernels/flashmla_decode/place.cu
similarity index 90%
rename from old/place.cu
rename to kernels/flashmla_decode/place.cu
index 3333333..4444444 100644
--- a/old/place.cu
+++ b/kernels/flashmla_decode/place.cu
@@ -1,2 +1,3 @@
 int a;
+int b;
 int c;
"""


def test_diff_parsing_keeps_renames_and_line_counts():
    changes = parse_diff(DIFF)
    assert [c.path for c in changes] == ["kernels/deepgemm_tile/tile_config.json", "kernels/flashmla_decode/place.cu"]
    assert (changes[0].added, changes[0].removed) == (1, 1)
    assert changes[1].old_path == "old/place.cu" and changes[1].paths == (
        "kernels/flashmla_decode/place.cu",
        "old/place.cu",
    )
    # a rename out of an unrelated folder touches the kernel it lands in, and the old place's globs too
    assert touching(changes, ["old/**"]) == [changes[1]]


@pytest.mark.parametrize(
    ("path", "glob", "hit"),
    [
        ("kernels/deepgemm_tile/gemm_cpu.cpp", "kernels/deepgemm_tile/**", True),
        ("kernels/deepgemm_tile/sub/x.h", "kernels/deepgemm_tile/**", True),
        ("kernels/deepgemm_tile_v2/x.h", "kernels/deepgemm_tile/**", False),
        ("kernels/deepgemm_tile/sub/x.h", "kernels/deepgemm_tile/*.h", False),
        ("kernels/deepgemm_tile/x.h", "kernels/deepgemm_tile/*.h", True),
        ("common/include/mma.cuh", "**/*.cuh", True),
        ("mma.cuh", "**/*.cuh", True),
    ],
)
def test_globs_match_like_a_repository_glob(path, glob, hit):
    assert matches(path, [glob]) is hit
