"""What the precompiled torch header saves: the example kernels' CPU extensions built cold with and without it.

Each round builds, in fresh build folders and alternating the order, (a) every example kernel's CPU extension on an
empty store (the first binding of a flag set: compiled without the header, as before it existed; it leaves the
header's `wanted` mark), (b) the same on a store holding only that mark (the header is compiled in the build: what
the second binding of a flag set pays), (c) the same with the header in the store (every later cold build: a new
binding, another kernel, the other side of a review whose headers changed). Prints each build's seconds, the
medians, the ratios to (a) and the load average; the kernels are built one after another, as a review builds them.
Usage:

  .venv/bin/python benchmarks/pch_build.py [--rounds 3] [--kernels deepgemm_tile,flashmla_decode]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bot.config.manifest import load_kernel  # noqa: E402
from bot.untrusted.build import build  # noqa: E402
from bot.untrusted.sandbox import Sandbox  # noqa: E402

KERNELS = ("deepgemm_tile", "flashmla_decode", "v41_attention_splitk")


def build_all(kernels: list[str], root: Path, sandbox: Sandbox) -> tuple[float, list[str]]:
    started = time.perf_counter()
    notes = []
    for name in kernels:
        k = load_kernel(ROOT / "kernels" / name, path=f"kernels/{name}")
        spec = k.manifest.build["cpu"]
        built = build(name, k.folder, spec, k.config, "cpu", root, sandbox)
        if not built.ok:
            raise SystemExit(f"{name}: the build failed:\n{built.log_tail}")
        notes += [line for line in built.log_tail.splitlines() if line.startswith("opgate: ")]
    return time.perf_counter() - started, notes


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--kernels", default=",".join(KERNELS))
    args = parser.parse_args()
    kernels = [k for k in args.kernels.split(",") if k]
    sandbox = Sandbox.detect()
    print(f"isolation {sandbox.isolation.mode}; kernels {', '.join(kernels)}; cores {os.cpu_count()}", flush=True)
    times: dict[str, list[float]] = {"a": [], "b": [], "c": []}
    with tempfile.TemporaryDirectory(prefix="opgate-pch-") as tmp:
        marks, headers = Path(tmp) / "marks", Path(tmp) / "headers"  # stores holding only the marks, the headers
        for r in range(args.rounds):
            order = ["a", "b", "c"] if r % 2 == 0 else ["c", "b", "a"]
            for variant in order:
                root = Path(tmp) / f"{variant}{r}"
                seed = {"a": None, "b": marks, "c": headers}[variant]
                if seed is not None:
                    if not seed.is_dir():  # only where round 1 did not leave it (--rounds 1 runs a, b, c in order)
                        raise SystemExit(f"no {seed.name} to seed ({variant}) from")
                    shutil.copytree(seed, root / "pch")
                load = os.getloadavg()[0]
                seconds, notes = build_all(kernels, root, sandbox)
                times[variant].append(seconds)
                after = os.getloadavg()[0]
                print(f"round {r + 1} ({variant}) {seconds:7.1f} s  load {load:.2f} → {after:.2f}", flush=True)
                for note in notes:
                    print(f"    {note}", flush=True)
                if variant == "a" and not marks.is_dir():
                    shutil.copytree(root / "pch", marks)
                if variant == "b" and not headers.is_dir():
                    shutil.copytree(root / "pch", headers)
                shutil.rmtree(root, ignore_errors=True)
    base = statistics.median(times["a"])
    labels = {"a": "empty store (no header)", "b": "header compiled in the build", "c": "header in the store"}
    for variant, label in labels.items():
        med = statistics.median(times[variant])
        runs = ", ".join(f"{t:.1f}" for t in times[variant])
        print(f"{label:30s} median {med:7.1f} s  ×{med / base:.2f}  ({runs})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
