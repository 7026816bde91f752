"""Every planted slowdown and A/A fixture of tests/ and benchmarks/, measured outside opgate on this machine.

A test whose premise is "this change is N % slower" holds only where the compiler makes it so: adding a call site of
an inlined body changes how gcc compiles the shared body, and on some CPUs that made a planted "8 %" slowdown measure
-4 %. So each slowdown keeps the shared path's code unchanged (deepgemm_tile's `gemm_tiled` is `[[gnu::noinline]]`;
extra work lives in a function of its own), and its effect is measured here, outside opgate: the kernel's CPU body
(torch-free) is compiled for base and head with the build's own flags (-O3 -fPIC), linked to a small timing driver,
and the two run alternately in fresh processes; each pair gives a log-ratio of medians, and the mean over pairs has a
Student t 95 % interval. An A/A fixture is checked for what it promises instead: every function both objects define
compiles to the same bytes.

tests/ use `measure` to check a premise before asserting what opgate makes of it (tests/premise.py).

  .venv/bin/python benchmarks/planted.py [--pairs 8] [--only ID,...] [--source gemm_cpu.cpp]
"""

from __future__ import annotations

import argparse
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "benchmarks"), str(ROOT)]
from scratch import CALL, SLOWER  # noqa: E402

GEMM = ROOT / "kernels" / "deepgemm_tile" / "gemm_cpu.cpp"
TILES = ("-DTILE_M=128", "-DTILE_N=128", "-DTILE_K=64")  # kernels/deepgemm_tile/tile_config.json
FLAGS = ("-O3", "-fPIC", "-std=c++20")  # bot/untrusted/build.py: a CPU source's flags (-fPIC, -std, kernel.toml's -O3)
SHAPES = {"square_512": (512, 512, 512), "ragged_200x328x264": (200, 328, 264)}  # deepgemm_tile's CPU cases

# A timing driver for deepgemm_tile::gemm_f32: `reps` calls after one warm-up, then the median wall milliseconds
# and the process's CPU milliseconds per call (every thread: a body that hides work on a helper thread shows there).
DRIVER = r"""
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <vector>
#include "gemm_cpu.h"
static double cpu_ms() {
  timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}
int main(int argc, char** argv) {
  const long m = atol(argv[1]), n = atol(argv[2]), k = atol(argv[3]);
  const int reps = atoi(argv[4]);
  std::vector<float> a(m * k), b(k * n), c(m * n);
  srand(1);
  for (auto& x : a) x = rand() / float(RAND_MAX);
  for (auto& x : b) x = rand() / float(RAND_MAX);
  deepgemm_tile::gemm_f32(a.data(), b.data(), c.data(), m, n, k);
  std::vector<double> wall;
  const double cpu0 = cpu_ms();
  for (int r = 0; r < reps; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    deepgemm_tile::gemm_f32(a.data(), b.data(), c.data(), m, n, k);
    wall.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  const double cpu = (cpu_ms() - cpu0) / reps;
  std::nth_element(wall.begin(), wall.begin() + reps / 2, wall.end());
  printf("%.6f %.6f\n", wall[reps / 2], cpu);
}
"""


def twice(text: str, reps: str) -> str:
    """The body with its GEMM call in a loop of `reps` (a C++ condition on `rep`)."""
    return text.replace(CALL, f"  for (int rep = 0; {reps}; ++rep) {{\n  " + CALL + "  }\n")


def threads(text: str) -> str:
    from tests import redteam  # the red-team suite's own hostile body

    return redteam.body(text, replace=redteam.TWO_THREADS)


def slow5(text: str) -> str:
    from aa_reviews import head_source  # the benchmark's own change, at its default --slow-div

    return head_source(text, "slow5", 320)


@dataclass(frozen=True)
class Planted:
    """One planted change: where it lives, base's and head's body (functions of gemm_cpu.cpp's text), and what the
    test or benchmark built on it expects per case (None: an A/A, same behaviour)."""

    id: str
    where: str
    base: object  # Callable[[str], str]
    head: object
    expect: dict[str, str]


def _same(text: str) -> str:
    return text


# fmt: off
PLANTED = [
    Planted("bisect-2x", "benchmarks/scratch.py SLOWER['2x'] (tests/test_bisect_e2e.py, bisect16.py)", _same,
            lambda t: t.replace(CALL, SLOWER["2x"]), {"square_512": "+100 %", "ragged_200x328x264": "0"}),
    Planted("bisect-8pct", "benchmarks/scratch.py SLOWER['8pct'] (tests/test_bisect_e2e.py, bisect16.py)", _same,
            lambda t: t.replace(CALL, SLOWER["8pct"]), {"square_512": "+8.3 %", "ragged_200x328x264": "0"}),
    Planted("history-twice", "tests/test_history_e2e.py (PR #11: CALL + CALL)", _same,
            lambda t: t.replace(CALL, CALL + CALL), {"square_512": "+100 %", "ragged_200x328x264": "+100 %"}),
    Planted("tune-per-shape", "tests/test_tune_e2e.py (base twice; head once at m=512, three times at m=200)",
            lambda t: twice(t, "rep < 2"), lambda t: twice(t, "rep < (m == 200 ? 3 : 1)"),
            {"square_512": "-50 %", "ragged_200x328x264": "+50 %"}),
    Planted("tune-implausible", "tests/test_tune_e2e.py (base four times, head once)",
            lambda t: twice(t, "rep < 4"), lambda t: twice(t, "rep < 1"),
            {"square_512": "-75 %", "ragged_200x328x264": "-75 %"}),
    Planted("slow5", "benchmarks/aa_reviews.py --change slow5 (a noinline chain after the GEMM)", _same, slow5,
            {"square_512": "+5 %", "ragged_200x328x264": "+5 %"}),
    Planted("two-threads", "tests/redteam.py TWO_THREADS (tests/test_redteam.py: CPU time +25 %)", _same, threads,
            {"square_512": "CPU +25 %", "ragged_200x328x264": "CPU +25 %"}),
]

# A/A fixtures: an unused exported function appended to a kernel's CPU body. Promise: no function the two share
# compiles to other bytes.
AA = [
    ("aa-deepgemm", "tests/test_review_spine.py, benchmarks/aa_reviews.py --change noop", "deepgemm_tile",
     "gemm_cpu.cpp", TILES),
    ("aa-flashmla", "tests/test_kernels.py no-op [flashmla_decode]", "flashmla_decode", "decode_cpu.cpp",
     ("-DBLOCK_H=16", "-DBLOCK_N=64")),  # kernel_config.json
    ("aa-v41", "tests/test_kernels.py no-op [v41_attention_splitk]", "v41_attention_splitk", "attention_cpu.cpp",
     ("-DSPLIT_K=4", "-DBLOCK_N=64")),  # splitk_config.json
]
# fmt: on
UNUSED = '\nextern "C" int opgate_no_op_marker() { return 40; }\n'


def _compile(folder: Path, name: str, body: str, include: Path, defines: tuple[str, ...]) -> Path:
    src = folder / f"{name}.cpp"
    src.write_text(body)
    exe = folder / name
    driver = folder / "driver.cpp"
    if not driver.exists():
        driver.write_text(DRIVER)
    cmd = ["g++", *FLAGS, *defines, f"-I{include}", str(src), str(driver), "-o", str(exe), "-pthread"]
    subprocess.run(cmd, check=True, capture_output=True, text=True)
    return exe


def _t95(n: int) -> float:
    table = {1: 12.71, 2: 4.30, 3: 3.18, 4: 2.78, 5: 2.57, 6: 2.45, 7: 2.36, 8: 2.31, 9: 2.26, 10: 2.23}
    return table.get(n, 2.0 + 2.5 / max(n, 1))


@dataclass(frozen=True)
class Interval:
    """Head against base in %: the mean over pairs of the log-ratio, with its Student t 95 % interval."""

    pct: float
    lo: float
    hi: float

    @classmethod
    def of(cls, logs: list[float]) -> Interval:
        mean = statistics.fmean(logs)
        half = _t95(len(logs) - 1) * statistics.stdev(logs) / math.sqrt(len(logs)) if len(logs) > 1 else math.inf
        return cls(*((math.exp(x) - 1) * 100 for x in (mean, mean - half, mean + half)))

    def __str__(self) -> str:
        return f"{self.pct:+.1f} % [{self.lo:+.1f}, {self.hi:+.1f}]"


@dataclass(frozen=True)
class Effect:
    """Head against base: the median wall time of a call, and the process's CPU time per call (every thread; on a
    busy machine the steadier of the two for a single-threaded body)."""

    wall: Interval
    cpu: Interval

    def __str__(self) -> str:
        return f"wall {self.wall}, CPU {self.cpu}"


def measure(base_body: str, head_body: str, shape: tuple[int, int, int], *, pairs: int = 6, reps: int = 0,
            folder: Path | None = None) -> Effect:  # fmt: skip
    """Head's body against base's, each compiled with the build's flags into a timing driver, run alternately
    (A B, B A …) in fresh processes, `pairs` pairs of `reps` calls each (0: about 0.3 s of calls)."""
    with tempfile.TemporaryDirectory(prefix="opgate-planted-", dir=folder) as tmp:
        work = Path(tmp)
        include = GEMM.parent
        exe = {s: _compile(work, s, body, include, TILES) for s, body in (("base", base_body), ("head", head_body))}
        m, n, k = shape
        if not reps:
            once = float(_run(exe["base"], m, n, k, 3)[0])
            reps = max(3, min(200, int(300 / max(once, 1e-3))))
        walls, cpus = [], []
        for i in range(pairs):
            order = ("base", "head") if i % 2 == 0 else ("head", "base")
            got = {side: _run(exe[side], m, n, k, reps) for side in order}
            walls.append(math.log(got["head"][0] / got["base"][0]))
            cpus.append(math.log(got["head"][1] / got["base"][1]))
    return Effect(Interval.of(walls), Interval.of(cpus))


def _run(exe: Path, m: int, n: int, k: int, reps: int) -> tuple[float, float]:
    out = subprocess.run([str(exe), str(m), str(n), str(k), str(reps)], check=True, capture_output=True, text=True)
    wall, cpu = out.stdout.split()
    return float(wall), float(cpu)


def same_code(kernel: str, source: str, defines: tuple[str, ...]) -> tuple[int, list[str]]:
    """Compile the kernel's CPU body and the body with an unused function appended; return how many functions both
    define and the names of those whose bytes differ."""
    folder = ROOT / "kernels" / kernel
    with tempfile.TemporaryDirectory(prefix="opgate-aa-") as tmp:
        code = {}
        for side, body in (("base", (folder / source).read_text()), ("head", (folder / source).read_text() + UNUSED)):
            src = Path(tmp) / f"{side}.cpp"
            src.write_text(body)
            obj = Path(tmp) / f"{side}.o"
            cmd = ["g++", *FLAGS, *defines, f"-I{folder}", "-c", str(src), "-o", str(obj)]
            subprocess.run(cmd, check=True, capture_output=True)
            code[side] = _functions(obj)
    shared = sorted(set(code["base"]) & set(code["head"]))
    return len(shared), [f for f in shared if code["base"][f] != code["head"][f]]


def _functions(obj: Path) -> dict[str, str]:
    """Each function's instruction bytes in an object file (objdump), by symbol."""
    dump = subprocess.run(["objdump", "-d", "--no-show-raw-insn", "-r", str(obj)], check=True, capture_output=True,
                          text=True).stdout  # fmt: skip
    out: dict[str, list[str]] = {}
    current = None
    for line in dump.splitlines():
        if line.endswith(">:"):
            current = line.split("<", 1)[1][:-2]
            out[current] = []
        elif current and "\t" in line:
            instruction = re.sub(r" ?<[^>]*>", "", line.split("\t", 1)[1]).strip()  # a target's name varies
            if "nop" not in instruction and instruction != "xchg   %ax,%ax":  # padding before the next function
                out[current].append(instruction)
    return {name: "\n".join(lines) for name, lines in out.items()}


def cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return "unknown CPU"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pairs", type=int, default=8)
    p.add_argument("--only", default="", help="comma-separated ids")
    p.add_argument("--source", type=Path, default=GEMM, help="another gemm_cpu.cpp to plant into (e.g. an older one)")
    args = p.parse_args()
    only = set(filter(None, args.only.split(",")))
    text = args.source.read_text()
    print(f"# {cpu_model()}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}; g++ {' '.join(FLAGS)}; "
          f"{args.pairs} pairs a figure; body {args.source}")  # fmt: skip
    print("| id | where | case | expected | measured head vs base, 95 % interval |")
    print("|---|---|---|---|---|")
    for planted in PLANTED:
        if only and planted.id not in only:
            continue
        base, head = planted.base(text), planted.head(text)  # type: ignore[operator]
        for case, shape in SHAPES.items():
            effect = measure(base, head, shape, pairs=args.pairs)
            print(f"| {planted.id} | {planted.where} | {case} | {planted.expect[case]} | {effect} |", flush=True)
    for id_, where, kernel, source, defines in AA:
        if only and id_ not in only:
            continue
        shared, differ = same_code(kernel, source, defines)
        said = "every one the same bytes" if not differ else f"{len(differ)} differ: {', '.join(differ)}"
        print(f"| {id_} | {where} | all | A/A | {shared} functions both define: {said} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
