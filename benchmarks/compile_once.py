"""A comment-only change's resource check against the hand compile of every unit (issue 54, 2).

Per kernel of this repository and round, for every architecture it ships for (sm_90a, sm_100a): each .cu compiled by
hand (the check's own nvcc line with `-Xptxas -v`, outside the sandbox, one after another); then `resource_checks` of
a head whose unit differs from base's by two comment lines (the changed file named, so a launch it holds is read
back) with an empty cache (cold), the same again (warm), and another comment on that warm cache. Prints each wall
time, the units compiled and read from the cache, and per round the totals. `--tree DIR` measures DIR's opgate (main,
for a before/after on the same machine). Usage:

  .venv/bin/python benchmarks/compile_once.py [--rounds 1] [--tree DIR]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--rounds", type=int, default=1)
parser.add_argument("--tree", type=Path, default=Path(__file__).resolve().parent.parent)
parser.add_argument("--kernels", nargs="*", default=["deepgemm_tile", "flashmla_decode", "v41_attention_splitk"])
parser.add_argument(
    "--synthetic", action="store_true", help="measure a generated kernel of two cub units (24 and 48 instantiations)"
)
ARGS = parser.parse_args()
ROOT = Path(__file__).resolve().parent.parent
TREE = ARGS.tree.resolve()
sys.path.insert(0, str(TREE))

from bot.config.manifest import load_kernel  # noqa: E402
from bot.config.repo import load_config  # noqa: E402
from bot.review.resource_check import compile_jobs, resource_checks  # noqa: E402
from bot.untrusted import resources  # noqa: E402
from bot.untrusted.sandbox import Sandbox  # noqa: E402
from bot.untrusted.toolchain import toolchain  # noqa: E402


def hand(kernel, arches: list[str], cache: Path) -> float:
    """Every unit compiled by hand for every architecture, one after another: the check's nvcc line, unsandboxed."""
    nvcc = resources.nvcc_path()
    assert nvcc is not None
    tc = toolchain("cuda", cache / "toolchain")
    total = 0.0
    for arch in arches:
        jobs, _ = compile_jobs(kernel, tc, arch)
        for job in jobs:
            with tempfile.TemporaryDirectory() as out:
                cmd = [
                    a.replace(resources.SRC, str(job.folder)).replace(resources.OUT, out)
                    for a in resources._command(nvcc, job, arch)
                ]
                started = time.perf_counter()
                subprocess.run(cmd, check=True, capture_output=True)
                total += time.perf_counter() - started
    return total


CUB_KERNEL = """\
#include <cub/block/block_load.cuh>
#include <cub/block/block_radix_sort.cuh>
#include <cub/block/block_scan.cuh>
#include <cub/block/block_store.cuh>

template <int THREADS, int ITEMS, typename T>
__global__ void __launch_bounds__(THREADS) scan_kernel(const T* x, T* y, int n) {
  using Load = cub::BlockLoad<T, THREADS, ITEMS, cub::BLOCK_LOAD_WARP_TRANSPOSE>;
  using Sort = cub::BlockRadixSort<T, THREADS, ITEMS>;
  using Scan = cub::BlockScan<T, THREADS>;
  using Store = cub::BlockStore<T, THREADS, ITEMS, cub::BLOCK_STORE_WARP_TRANSPOSE>;
  __shared__ union {
    typename Load::TempStorage load;
    typename Sort::TempStorage sort;
    typename Scan::TempStorage scan;
    typename Store::TempStorage store;
  } tmp;
  T items[ITEMS];
  int base = blockIdx.x * THREADS * ITEMS;
  Load(tmp.load).Load(x + base, items, n - base, T(0));
  __syncthreads();
  Sort(tmp.sort).Sort(items);
  __syncthreads();
  Scan(tmp.scan).InclusiveSum(items, items);
  __syncthreads();
  Store(tmp.store).Store(y + base, items, n - base);
}

template <int THREADS, int ITEMS, typename T>
void launch(const T* x, T* y, int n) {
  scan_kernel<THREADS, ITEMS, T><<<(n + THREADS * ITEMS - 1) / (THREADS * ITEMS), THREADS>>>(x, y, n);
}
"""


def synthetic(at: Path) -> Path:
    """kernels/cub_scan: fwd.cu (24 instantiations of a cub load, radix sort, scan and store) and bwd.cu (48)."""
    folder = at / "kernels" / "cub_scan"
    folder.mkdir(parents=True)
    (folder / "kernel.toml").write_text(
        'name = "cub_scan"\ndomain = "deepgemm"\nglobs = ["kernels/cub_scan/**"]\n\n[build.cuda]\n'
        'sources = ["fwd.cu", "bwd.cu"]\ncuda_cflags = ["-O3", "-std=c++17"]\n\n'
        '[constraints]\narchitectures = ["sm_90a", "sm_100a"]\n'
    )
    for unit, items, types in (
        ("fwd", (4, 8, 16), ("float", "double")),
        ("bwd", (4, 8, 16, 32), ("float", "double", "int")),
    ):
        lines = [
            f"template void launch<{t}, {i}, {ty}>(const {ty}*, {ty}*, int);"
            for t in (64, 128, 256, 512)
            for i in items
            for ty in types
        ]
        (folder / f"{unit}.cu").write_text(CUB_KERNEL + "\n" + "\n".join(lines) + "\n")
    return folder


def commented(base: Path, name: str, unit: str, text: str, at: Path) -> Path:
    """A copy of the kernel folder whose `unit` has `text` above its first line."""
    folder = at / "kernels" / name
    shutil.copytree(base, folder)
    (folder / unit).write_text(text + (folder / unit).read_text())
    return folder


def units(checks) -> str:
    found = [u for c in checks for u in getattr(c, "units", [])]
    if not found:
        return "(no unit record)"
    cached = sum(u.cached for u in found)
    return f"{len(found) - cached} compiled, {cached} cached"


def main() -> None:
    if shutil.which("nvcc") is None:
        raise SystemExit("nvcc is not on the PATH")
    config, sandbox = load_config(ROOT), Sandbox.detect()
    print(f"opgate at {TREE}")
    totals: dict[str, float] = {}
    made = tempfile.TemporaryDirectory(prefix="opgate-synthetic-")
    kernels = {name: ROOT / "kernels" / name for name in ARGS.kernels}
    if ARGS.synthetic:
        kernels = {"cub_scan": synthetic(Path(made.name))}
    for _ in range(ARGS.rounds):
        for name, folder in kernels.items():
            base = load_kernel(folder, config=config, path=f"kernels/{name}")
            arches = base.manifest.constraints.architectures
            unit = next(s for s in base.manifest.build["cuda"].sources if s.endswith(".cu"))
            changed = [f"kernels/{name}/{unit}"]
            with tempfile.TemporaryDirectory(prefix="opgate-once-") as tmp:
                cache = Path(tmp) / "build" / "resources"
                cache.mkdir(parents=True)
                row = {"hand": hand(base, arches, cache.parent)}
                one = commented(
                    folder, name, unit, "// A reworded note.\n// Two lines: every line moves.\n", Path(tmp) / "a"
                )
                head = load_kernel(one, config=config, path=f"kernels/{name}")
                for label, k in (("cold", head), ("warm", head)):
                    started = time.perf_counter()
                    checks = resource_checks(k, base, arches, cache, sandbox, changed)
                    row[label] = time.perf_counter() - started
                    print(f"  {name} {label}: {row[label]:.1f} s, {units(checks)}", flush=True)
                two = commented(folder, name, unit, "/* Another note. */\n", Path(tmp) / "b")
                started = time.perf_counter()
                checks = resource_checks(
                    load_kernel(two, config=config, path=f"kernels/{name}"), base, arches, cache, sandbox, changed
                )
                row["another comment, warm"] = time.perf_counter() - started
                print(f"  {name} another comment, warm: {row['another comment, warm']:.1f} s, {units(checks)}")
            print(
                f"{name:22} {','.join(arches):16} " + "  ".join(f"{k} {v:6.1f} s" for k, v in row.items()), flush=True
            )
            for k, v in row.items():
                totals[k] = totals.get(k, 0.0) + v / ARGS.rounds
    print("per round: " + ", ".join(f"{k} {v:.1f} s" for k, v in totals.items()))
    print(f"cold / hand: {totals['cold'] / totals['hand']:.2f}x")


if __name__ == "__main__":
    main()
