"""How often the latency gate cries wolf, and how often it catches a real slowdown.

Runs the real pipeline minus git: `bot.build.build` (ninja), `bot.runner.run_case` (a child process
per comparison, base and head interleaved in it) and `bot.gate.judge_case` (bootstrap CI of the
ratio of medians, re-measured once in a fresh process when inconclusive, as `opgate review` does).

  A/A: two builds of the same GEMM that differ only in an unused define (identical code).
  A/B: the head does the same GEMM plus a calibrated extra-work loop worth 3/5/10/20 % of it.

Prints one table row per scenario: false-alarm or detection rate, inconclusive rate, median
samples per side and seconds per comparison. Usage:

  .venv/bin/python benchmarks/gate_power.py [--aa 100] [--ab 40] [--case square_512]
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import subprocess
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from bot.build import Built, build
from bot.gate import judge_case
from bot.manifest import BuildSpec, Case, Constraints, load_kernel
from bot.runner import run_case
from bot.settings import MeasureSettings

ROOT = Path(__file__).resolve().parent.parent
KERNEL = ROOT / "kernels" / "deepgemm_tile"
SLOWDOWNS = (3, 5, 10, 20)


def compose_folder(tmp: Path) -> Path:
    """A kernel folder: deepgemm_tile's CPU body and header, the benchmark binding."""
    folder = tmp / "spin_gemm"
    folder.mkdir()
    for name in ("gemm_cpu.cpp", "gemm_cpu.h", "reference.py"):
        shutil.copy(KERNEL / name, folder / name)
    shutil.copy(ROOT / "benchmarks" / "spin_gemm" / "binding.cpp", folder / "binding.cpp")
    return folder


def variant(folder: Path, build_root: Path, extra_iters: int, tag: int = 0) -> Built:
    spec = BuildSpec(sources=["gemm_cpu.cpp", "binding.cpp"], cflags=["-O3", f"-DVARIANT={tag}"], entry="gemm")
    config = {"tile_m": 128, "tile_n": 128, "tile_k": 64, "extra_iters": extra_iters}
    built = build("spin_gemm", folder, spec, config, "cpu", build_root)
    if not built.ok:
        raise SystemExit(f"build failed:\n{built.log_tail}")
    return built


def job(folder: Path, case: Case, base: Built, head: Built, measure: MeasureSettings, time_it: bool = True) -> dict:
    return {
        "kernel": "spin_gemm",
        "case": case.model_dump(),
        "tolerance": 1e-2,
        "reference": {"path": str(folder / "reference.py"), "inputs": "make_inputs", "function": "reference"},
        "builds": [
            {"label": "base", "module": base.module, "so_path": base.so_path, "entry": "gemm"},
            {"label": "head", "module": head.module, "so_path": head.so_path, "entry": "gemm"},
        ],
        "measure": measure.model_dump(),
        "time": time_it,
    }


def compare(folder: Path, case: Case, base: Built, head: Built, measure: MeasureSettings) -> tuple[str, int, float]:
    """One comparison as `opgate review` makes it: (verdict, samples per side, seconds)."""
    started = time.perf_counter()
    spec = job(folder, case, base, head, measure)
    result = judge_case(case, Constraints(), run_case(spec, 120))
    if result.verdict == "inconclusive":
        result = judge_case(case, Constraints(), run_case(spec, 120))
    return result.verdict, min(result.samples, result.base_samples), time.perf_counter() - started


def calibrate(folder: Path, case: Case, base: Built, build_root: Path, measure: MeasureSettings) -> tuple[float, float]:
    """(GEMM p50 ms, ms per million extra iterations) from long interleaved measurements."""
    probe = variant(folder, build_root, 2_000_000)
    long = MeasureSettings(max_seconds=6, min_blocks=10, max_samples=400, target_pct=0.2)
    result = judge_case(case, Constraints(max_regression_pct=1000), run_case(job(folder, case, base, probe, long), 300))
    assert result.p50_ms and result.base_p50_ms
    return result.base_p50_ms, (result.p50_ms - result.base_p50_ms) / 2.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--aa", type=int, default=100, help="A/A comparisons (default 100)")
    parser.add_argument("--ab", type=int, default=40, help="A/B comparisons per slowdown (default 40)")
    parser.add_argument("--case", default="square_512", help="a cpu case of deepgemm_tile")
    args = parser.parse_args()

    kernel = load_kernel(KERNEL)
    case = next(c for c in kernel.manifest.cases if c.name == args.case)
    measure = MeasureSettings()
    build_root = Path(os.environ.get("OPGATE_BUILD_DIR", "~/.cache/opgate/build")).expanduser()
    with tempfile.TemporaryDirectory(prefix="opgate-gate-power-") as tmp:
        folder = compose_folder(Path(tmp))
        base = variant(folder, build_root, 0, tag=0)
        twin = variant(folder, build_root, 0, tag=1)
        gemm_ms, ms_per_miter = calibrate(folder, case, base, build_root, measure)
        print(f"# case {case.name}: GEMM p50 {gemm_ms:.3f} ms; extra work {ms_per_miter:.3f} ms per 1e6 iterations")
        scenarios: list[tuple[str, Built, float]] = [("A/A (identical code)", twin, 0.0)]
        for pct in SLOWDOWNS:
            iters = int(gemm_ms * pct / 100.0 / ms_per_miter * 1e6)
            scenarios.append((f"A/B +{pct}%", variant(folder, build_root, iters), pct))

        print(
            f"# {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, commit {_commit()}, {platform.node()}, "
            f"{os.cpu_count()} cores, python {platform.python_version()}"
        )
        print(f"# measure: {measure.model_dump()}; threshold 3%; inconclusive re-measured once")
        header = (
            "| scenario | runs | fail (false alarm / detected) | pass | inconclusive | median samples | s/comparison |"
        )
        print(header)
        print("|---|---|---|---|---|---|---|")
        for name, head, pct in scenarios:
            runs = args.aa if pct == 0 else args.ab
            verdicts, samples, seconds = [], [], []
            for _ in range(runs):
                verdict, n, secs = compare(folder, case, base, head, measure)
                verdicts.append(verdict)
                samples.append(n)
                seconds.append(secs)
            share = {v: verdicts.count(v) / runs * 100 for v in ("fail", "pass", "inconclusive")}
            print(
                f"| {name} | {runs} | {share['fail']:.1f}% | {share['pass']:.1f}% | {share['inconclusive']:.1f}% "
                f"| {statistics.median(samples):.0f} | {statistics.median(seconds):.1f} |",
                flush=True,
            )


def _commit() -> str:
    out = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return out.stdout.strip() or "unknown"


if __name__ == "__main__":
    main()
