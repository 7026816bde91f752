"""How often the latency gate cries wolf, and how often it catches a real slowdown.

Runs the real pipeline minus git: `bot.build.build` (ninja in the sandbox), the trusted judge
(`bot.untrusted.runner.launch.run_cases`: base and head in separate sandboxed worker processes, several fresh process
pairs per comparison, hierarchical bootstrap CI) and `bot.verdict.gate.case_verdict`; an inconclusive comparison is
measured once more in fresh processes, as `opgate review` does.

  A/A: two builds of the same GEMM that differ only in an unused define (identical code, two processes).
  A/B: the head does the same GEMM plus a calibrated extra-work loop worth 3/5/10/20 % of it.

Many comparisons share one judge process (each with its own fresh workers), so the judge's start-up is
paid once per scenario batch. Prints one table row per scenario: false-alarm or detection rate,
inconclusive rate, median processes and seconds per comparison. Usage:

  .venv/bin/python benchmarks/gate_power.py [--aa 100] [--ab 40] [--case square_512] [--slowdowns 3,5,10,20]
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

from bot.config.manifest import BuildSpec, Case, Constraints, load_kernel
from bot.config.settings import load_settings
from bot.models.judging import CaseRun, JudgeJob, MeasureSettings, ReferenceSource
from bot.models.report import CaseReport
from bot.untrusted.build import Built, build, verify
from bot.untrusted.runner.launch import new_secret, run_cases
from bot.untrusted.sandbox import Sandbox
from bot.verdict.gate import case_verdict

ROOT = Path(__file__).resolve().parent.parent
KERNEL = ROOT / "kernels" / "deepgemm_tile"
BATCH = 10  # comparisons per judge process


def compose_folder(tmp: Path) -> Path:
    """A kernel folder: deepgemm_tile's CPU body and header, the benchmark's spin body and binding."""
    folder = tmp / "spin_gemm"
    folder.mkdir()
    for name in ("gemm_cpu.cpp", "gemm_cpu.h", "reference.py"):
        shutil.copy(KERNEL / name, folder / name)
    for name in ("binding.cpp", "spin.cpp", "spin.h"):
        shutil.copy(ROOT / "benchmarks" / "spin_gemm" / name, folder / name)
    return folder


def variant(folder: Path, build_root: Path, extra_iters: int, tag: int = 0) -> Built:
    spec = BuildSpec(sources=["gemm_cpu.cpp", "spin.cpp", "binding.cpp"], cflags=["-O3"], entry="gemm")
    config = {"tile_m": 128, "tile_n": 128, "tile_k": 64, "extra_iters": extra_iters, "variant": tag}
    built = build("spin_gemm", folder, spec, config, "cpu", build_root, Sandbox.detect())
    if not built.ok:
        raise SystemExit(f"build failed:\n{built.log_tail}")
    return built


def comparisons(
    folder: Path, case: Case, base: Built, head: Built, measure: MeasureSettings, n: int, limit: float = 3.0
) -> list[CaseReport]:
    """`n` comparisons of head against base, each judged like a review case (re-measured once if inconclusive)."""
    job = JudgeJob(
        kernel="spin_gemm",
        reference=ReferenceSource(path=str(folder / "reference.py")),
        cases=[
            {**case.model_dump(), "name": f"c{i}", "tolerance": 1e-2, "max_regression_pct": limit} for i in range(n)
        ],
        sides={"base": {"cpu": str(verify(base))}, "head": {"cpu": str(verify(head))}},
        module=head.module,
        entry="gemm",
        measure=measure,
        timeout_s=300,
        noise_limit_cores=load_settings().noise_limit_cores,
        secret=new_secret(),
    )
    constraints = Constraints(max_regression_pct=limit)
    runs: dict[str, CaseRun] = run_cases(job)
    reports = {name: case_verdict(case, constraints, runs.get(name)) for name in (c["name"] for c in job.cases)}
    again = [c for c in job.cases if reports[c["name"]].verdict == "inconclusive"]
    if again:
        reruns = run_cases(job.model_copy(update={"cases": again, "secret": new_secret()}))
        for c in again:
            reports[c["name"]] = case_verdict(case, constraints, reruns.get(c["name"]))
            reports[c["name"]].attempts = 2
    return list(reports.values())


def calibrate(folder: Path, case: Case, base: Built, build_root: Path) -> tuple[float, float]:
    """(GEMM p50 ms, ms per million extra iterations) from a long comparison with a known amount of work."""
    probe = variant(folder, build_root, 2_000_000)
    long = MeasureSettings(max_seconds=20, min_processes=4, max_processes=6, target_pct=0.2)
    [result] = comparisons(folder, case, base, probe, long, 1, limit=1000.0)
    assert result.p50_ms and result.base_p50_ms, result.reasons
    return result.base_p50_ms, (result.p50_ms - result.base_p50_ms) / 2.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--aa", type=int, default=100, help="A/A comparisons (default 100)")
    parser.add_argument("--ab", type=int, default=40, help="A/B comparisons per slowdown (default 40)")
    parser.add_argument("--case", default="square_512", help="a cpu case of deepgemm_tile")
    parser.add_argument("--slowdowns", default="3,5,10,20", help="injected slowdowns in %% (default 3,5,10,20)")
    args = parser.parse_args()

    kernel = load_kernel(KERNEL)
    case = next(c for c in kernel.manifest.cases if c.name == args.case)
    settings = load_settings()
    measure = settings.measure
    build_root = settings.build_dir
    with tempfile.TemporaryDirectory(prefix="opgate-gate-power-") as tmp:
        folder = compose_folder(Path(tmp))
        base = variant(folder, build_root, 0, tag=0)
        twin = variant(folder, build_root, 0, tag=1)
        gemm_ms, ms_per_miter = calibrate(folder, case, base, build_root)
        print(f"# case {case.name}: GEMM p50 {gemm_ms:.3f} ms; extra work {ms_per_miter:.3f} ms per 1e6 iterations")
        scenarios: list[tuple[str, Built, float]] = [("A/A (identical code, two processes)", twin, 0.0)]
        for pct in (float(p) for p in args.slowdowns.split(",") if p):
            iters = int(gemm_ms * pct / 100.0 / ms_per_miter * 1e6)
            scenarios.append((f"A/B +{pct:g}%", variant(folder, build_root, iters), pct))
        print(
            f"# {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, commit {_commit()}, {platform.node()}, "
            f"{os.cpu_count()} cores, python {platform.python_version()}, "
            f"isolation {Sandbox.detect().isolation.mode}"
        )
        print(f"# measure: {measure.model_dump()}; threshold 3%; inconclusive re-measured once in fresh processes")
        columns = ["scenario", "runs", "fail (false alarm / detected)", "pass", "inconclusive", "median processes"]
        print("| " + " | ".join([*columns, "s/comparison"]) + " |")
        print("|---|---|---|---|---|---|---|")
        for name, head, pct in scenarios:
            runs = args.aa if pct == 0 else args.ab
            results: list[CaseReport] = []
            started = time.perf_counter()
            while len(results) < runs:
                results += comparisons(folder, case, base, head, measure, min(BATCH, runs - len(results)))
            per = (time.perf_counter() - started) / runs
            share = {v: sum(r.verdict == v for r in results) / runs * 100 for v in ("fail", "pass", "inconclusive")}
            noisy = sum(any("noisy runner" in x for x in r.reasons) for r in results)
            print(
                f"| {name} | {runs} | {share['fail']:.1f}% | {share['pass']:.1f}% | {share['inconclusive']:.1f}%"
                f"{f' ({noisy} noisy)' if noisy else ''} | {statistics.median(r.processes for r in results):.0f} "
                f"| {per:.1f} |",
                flush=True,
            )


def _commit() -> str:
    out = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return out.stdout.strip() or "unknown"


if __name__ == "__main__":
    main()
