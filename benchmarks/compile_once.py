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
    for _ in range(ARGS.rounds):
        for name in ARGS.kernels:
            folder = ROOT / "kernels" / name
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
