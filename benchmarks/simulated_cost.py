"""How deterministic and how costly the simulated cost is: the same builds counted under callgrind N times.

Builds deepgemm_tile's CPU GEMM as the benchmark variant (benchmarks/spin_gemm: base, and a head with a calibrated
extra-work loop), then runs `bot.untrusted.runner.cost.run_costs` — the trusted cost process, both sides under
`valgrind --tool=callgrind` in the sandbox — `--runs` times on the same builds and inputs seed. Prints per run
and case the instructions and estimated cycles per call of each side, their ratio and the wall time, then the
spread across runs (0 means every run counted exactly the same). Usage:

  .venv/bin/python benchmarks/simulated_cost.py [--runs 5] [--extra 400000] [--cases square_512,ragged_200x328x264]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from gate_power import KERNEL, _commit, compose_folder, variant

from bot.config.manifest import load_kernel
from bot.config.settings import load_settings
from bot.models.judging import JudgeJob, ReferenceSource
from bot.untrusted.build import verify
from bot.untrusted.runner.cost import run_costs, tool_version
from bot.untrusted.runner.spawn import new_secret


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="countings of the same builds (default 5)")
    parser.add_argument("--extra", type=int, default=400_000, help="head's extra-work iterations (default 400000)")
    parser.add_argument("--cases", default="square_512,ragged_200x328x264", help="cpu cases of deepgemm_tile")
    args = parser.parse_args()
    kernel = load_kernel(KERNEL)
    wanted = [n for n in args.cases.split(",") if n]
    cases = [c for c in kernel.manifest.cases if c.name in wanted]
    if len(cases) != len(wanted):
        raise SystemExit(f"simulated_cost: no such cpu case in {args.cases}")
    settings = load_settings()
    secret = new_secret()  # one seed for every run: the same inputs, so any difference would be the tool's
    print(
        f"# {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, commit {_commit()}, {platform.node()}, {os.cpu_count()} cores, "
        f"python {platform.python_version()}, {tool_version()}"
    )
    print("| run | case | base instructions | head instructions | base cycles | head cycles | ratio | wall s |")
    print("|---|---|---|---|---|---|---|---|")
    seen: dict[str, list[tuple[int, int, int, int]]] = {}
    with tempfile.TemporaryDirectory(prefix="opgate-simcost-") as tmp:
        folder = compose_folder(Path(tmp))
        base = variant(folder, settings.build_dir, 0)
        head = variant(folder, settings.build_dir, args.extra)
        job = JudgeJob(
            kernel="spin_gemm",
            reference=ReferenceSource(path=str(folder / "reference.py")),
            cases=[{**c.model_dump(), "tolerance": 1e-2, "max_regression_pct": 3.0} for c in cases],
            sides={"base": {"cpu": str(verify(base))}, "head": {"cpu": str(verify(head))}},
            module=head.module,
            entry="gemm",
            measure=settings.measure,
            timeout_s=600,
            secret=secret,
        )
        for run in range(1, args.runs + 1):
            started = time.perf_counter()
            costs = run_costs(job)
            wall = time.perf_counter() - started
            for c in cases:
                cost = costs[c.name]
                if cost.head is None or cost.base is None:
                    print(f"| {run} | {c.name} | {cost.error} | | | | | {wall:.1f} |", flush=True)
                    continue
                b, h = cost.base, cost.head
                seen.setdefault(c.name, []).append((b.instructions, h.instructions, b.cycles, h.cycles))
                print(
                    f"| {run} | {c.name} | {b.instructions:,} | {h.instructions:,} | {b.cycles:,} | {h.cycles:,} "
                    f"| {h.cycles / b.cycles:.4f} | {wall:.1f} |",
                    flush=True,
                )
    for name, counts in seen.items():
        spread = [max(col) - min(col) for col in zip(*counts, strict=True)]
        ratios = [h / b for _, _, b, h in counts]
        print(
            f"# {name}: {len(counts)} runs; max - min of base/head instructions {spread[0]}/{spread[1]}, of base/head "
            f"cycles {spread[2]}/{spread[3]}; ratio sd {statistics.pstdev(ratios):.2e}"
        )


if __name__ == "__main__":
    main()
