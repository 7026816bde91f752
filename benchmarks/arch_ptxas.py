"""The compile-only resource check of this repository's kernels for one architecture and for all they ship for.

Per kernel and round: `resource_checks` with an empty cache for the first architecture only, then for every
architecture in kernel.toml (head = base, so base is a cache hit, as in a review whose base was seen before);
the architectures compile side by side. Prints each wall time and the totals. Usage:

  .venv/bin/python benchmarks/arch_ptxas.py [--rounds 3]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bot.config.manifest import load_kernel  # noqa: E402
from bot.config.repo import load_config  # noqa: E402
from bot.review.resource_check import resource_checks  # noqa: E402
from bot.untrusted.sandbox import Sandbox  # noqa: E402

KERNELS = ("deepgemm_tile", "flashmla_decode", "v41_attention_splitk")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    if shutil.which("nvcc") is None:
        raise SystemExit("nvcc is not on the PATH")
    config, sandbox = load_config(ROOT), Sandbox.detect()
    totals = {"first": 0.0, "all": 0.0}
    for _ in range(args.rounds):
        for name in KERNELS:
            kernel = load_kernel(ROOT / "kernels" / name, config=config, path=f"kernels/{name}")
            shipped = kernel.manifest.constraints.architectures
            for label, arches in (("first", shipped[:1]), ("all", shipped)):
                with tempfile.TemporaryDirectory(prefix="opgate-ptxas-") as tmp:
                    started = time.perf_counter()
                    checks = resource_checks(kernel, kernel, arches, Path(tmp), sandbox)
                    seconds = time.perf_counter() - started
                totals[label] += seconds
                print(f"{name:22} {','.join(arches):16} {seconds:6.2f} s  {[c.status for c in checks]}", flush=True)
    first, every = totals["first"] / args.rounds, totals["all"] / args.rounds
    print(f"per round: first architecture {first:.1f} s, every architecture {every:.1f} s ({every / first:.2f}x)")


if __name__ == "__main__":
    main()
