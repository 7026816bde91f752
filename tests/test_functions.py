"""The function locator (bot/agent/functions.py): C/C++/CUDA by braces past comments, strings and macros; Python."""

from __future__ import annotations

from pathlib import Path

from bot.agent.functions import Function, changed_lines, functions, touched

ROOT = Path(__file__).resolve().parent.parent

CUDA = """\
#include <cstdint>
#define OPEN_BLOCK {            /* a brace in a macro is no block */
#define TWO_LINES(x) do { \\
    (x); } while (0)

namespace outer {
// void commented_out() { }
struct Ops {
  static __device__ __forceinline__ int add(int a, int b) { return a + b; }
};

template <int TM, int TN>
__global__ void __launch_bounds__(256) tile_kernel(const float* __restrict__ a, int n) {
  const char* s = "}{ not a brace";
  char c = '}';
  if (n > 0) {
    for (int i = 0; i < n; ++i) { s += 0; }
  }
  auto f = [&](int x) { return x + 1; };
}

int table[] = {1, 2, 3};

extern "C" {
int plain(int x) {
  return x; /* } */
}
}
}  // namespace outer

int Matrix::rows() const noexcept { return r_; }
"""


def test_the_c_locator_finds_each_function_past_comments_strings_macros_and_initialisers():
    found = functions("k.cu", CUDA)
    assert [(f.name, f.start, f.end) for f in found] == [
        ("add", 9, 9),
        ("tile_kernel", 12, 20),
        ("plain", 25, 27),
        ("Matrix::rows", 31, 31),
    ]


def test_the_python_locator_includes_decorators_and_methods_and_survives_a_syntax_error():
    text = "import x\n\n@cache\ndef a():\n    return 1\n\n\nclass K:\n    def m(self):\n        pass\n"
    assert [(f.name, f.start, f.end) for f in functions("r.py", text)] == [("a", 3, 5), ("m", 9, 10)]
    broken = "def a(:\n    return 1\n\ndef b():\n    x = 1\n\nrest = 2\n"
    assert [(f.name, f.start, f.end) for f in functions("r.py", broken)] == [("a", 1, 2), ("b", 4, 5)]
    assert functions("notes.md", "def a(): pass") == []


def test_the_shipped_kernels_functions_are_found_with_their_bodies():
    gemm = (ROOT / "kernels/deepgemm_tile/gemm_cuda.cu").read_text()
    names = {f.name: f for f in functions("gemm_cuda.cu", gemm)}
    assert {"gemm_block", "gemm_bf16_kernel", "launch_gemm_bf16"} <= set(names)
    block = names["gemm_block"]
    lines = gemm.split("\n")
    assert lines[block.start - 1].startswith("template") and lines[block.end - 1].rstrip() == "}"
    decode = (ROOT / "kernels/flashmla_decode/decode_cuda.cu").read_text()
    assert "mla_decode_kernel" in {f.name for f in functions("decode_cuda.cu", decode)}


def test_changed_lines_follow_the_hunk_counts_on_each_side():
    diff = (
        "--- a/k.cu\n+++ b/k.cu\n"
        "@@ -10,4 +10,4 @@ ctx\n"
        " a\n-b\n+b2\n+b3\n c\n"
        "--- removed: a line that looks like a file header\n"
        "@@ -40,0 +42,2 @@\n+new1\n+new2\n"
    )
    base, head = changed_lines(diff)
    assert set(base.changed) == {11, 13} and set(head.changed) == {11, 12, 42, 43}
    assert (40, 41) in base.gaps  # head's two lines went in after base's line 40


def test_touched_takes_the_enclosing_function_of_a_hunk_on_each_side():
    base_text = "int f() {\n  return 1;\n}\nint g() {\n  return 2;\n}\n"
    head_text = "int f() {\n  return 1;\n}\nint g() {\n  int y = 3;\n  return 2;\n}\n"
    diff = "@@ -4,2 +4,3 @@\n int g() {\n+  int y = 3;\n   return 2;\n"
    base, head = changed_lines(diff)
    assert [f for f, _ in touched("k.cpp", head_text, head)] == [Function("g", 4, 7)]
    ((g_base, body),) = touched("k.cpp", base_text, base)  # an insertion inside g: base's g too
    assert g_base == Function("g", 4, 6) and body == "int g() {\n  return 2;\n}"
    assert touched("k.cpp", None, head) == []
