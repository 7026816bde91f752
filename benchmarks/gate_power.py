"""How often the latency gate cries wolf, how often it catches a real slowdown, and whether its interval is honest.

Runs the real pipeline minus git: `bot.untrusted.build.build` (ninja in the sandbox), the trusted judge
(`bot.untrusted.runner.spawn.run_cases`: base and head in separate sandboxed worker processes, fresh process pairs,
the sequential stop rule) and `bot.verdict.gate.case_verdict`. From the same samples it also judges every comparison
with the statistic the gate used before issue 25 (`benchmarks/bootstrap.py` `hierarchical_ratio_ci`: geometric mean
of per-pair median ratios, hierarchical bootstrap), so the two columns differ only by the statistic (the stop rule
that decided how long to measure is the new one; the old rule stopped on its own interval, which this cannot
replay).

  A/A: two builds of the same GEMM that differ only in an unused define (identical code, two processes).
  A/B: the head does the same GEMM plus a calibrated extra-work loop worth +5 / +10 % (and 2x) of it.

Each load runs every scenario: `idle` as the machine is, `busy` with one core kept busy by a bounded spinning
process this script starts and stops (it also ends by itself after --busy-max-s). Per load and statistic it prints
the issue's table: A/A false fails, slowdowns caught, undecided over all scenarios, and the 95 % interval's coverage
(A/A: of 0; A/B: of the scenario's median estimate, since the injected work is known only approximately). Usage:

  .venv/bin/python benchmarks/gate_power.py [--aa 100] [--ab 40] [--big 10] [--loads idle,busy] [--save FILE]

`--rules before,after` runs every scenario under the sampler's early stop before issue 40's CPU-time stop
(`benchmarks/judge_before.py`) and the judge's own, alternating small batches in the same run; the table then has
a column group per load and rule, with the process pairs per comparison and the share stopped on CPU time. A rule
`blocksN` is the judge's own with N timing blocks per worker process (`OPGATE_MEASURE_MIN_BLOCKS`, default 5): fewer
seconds per process pair, so more pairs within the same time cap (`--rules after,blocks3`). The rule `tree` is the
judge of another checkout (`--tree DIR`: its `bot` package on the judge's PYTHONPATH, this checkout's builds and
gate): a change to the judge before and after in one run (`--tree /tmp/old --rules tree,after`).
`--shape m=64,n=64,k=64` sets the case's shape (a call of well under a millisecond fills a block with many calls).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from bot.config.manifest import load_kernel
from bot.config.manifest_tables import BuildSpec, Case, Constraints
from bot.config.settings import load_settings
from bot.models.judging import CaseRun, JudgeJob, MeasureSettings, ReferenceSource
from bot.untrusted.build import Built, build, verify
from bot.untrusted.runner.spawn import new_secret, run_cases
from bot.untrusted.sandbox import Sandbox

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.bootstrap import hierarchical_ratio_ci  # noqa: E402
from bot.verdict.gate import case_verdict  # noqa: E402
from bot.verdict.stats import latency_verdict  # noqa: E402

KERNEL = ROOT / "kernels" / "deepgemm_tile"
BATCH = 10  # comparisons per judge process
ALTERNATE = 2  # comparisons per judge process where --rules alternates two stop rules
RUNNERS = {"after": "bot.untrusted.runner.judge", "before": "benchmarks.judge_before"}
TREE: Path | None = None  # the checkout whose judge the rule `tree` runs (--tree)
LIMIT = 3.0
STATISTICS = ("wall", "cpu", "either", "new")  # the table's columns per load (`old`: the pre-issue-25 statistic)


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


def job_for(
    folder: Path, case: Case, base: Built, head: Built, measure: MeasureSettings, n: int, limit: float
) -> JudgeJob:
    return JudgeJob(
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


@dataclass
class Comparison:
    """One comparison judged both ways from the same samples: (verdict, ratio, low, high) per statistic."""

    new: tuple[str, float, float, float]
    old: tuple[str, float, float, float] | None
    # Issue 40, 2: the paired interval on wall time alone, on CPU time alone (every thread of each side's sandbox,
    # the kernel's accounting) and `either`: wall time where it clears the limit, else CPU time where that does.
    wall: tuple[str, float, float, float] | None
    cpu: tuple[str, float, float, float] | None
    either: tuple[str, float, float, float] | None
    pairs: int
    seconds: float
    other_cores: float | None
    head: list[list[float]] = field(repr=False)
    base: list[list[float]] = field(repr=False)
    stop: str | None = None


def judge_both(case: Case, run: CaseRun, seconds: float) -> Comparison:
    report = case_verdict(case, Constraints(max_regression_pct=LIMIT), run)
    head = run.timings["head"].processes if "head" in run.timings else []
    base = run.timings["base"].processes if "base" in run.timings else []
    if report.regression_pct is None or not report.ci95_pct:
        error = ("error", math.nan, math.nan, math.nan)
        return Comparison(error, None, None, None, None, 0, seconds, run.other_cores, head, base, run.stop_reason)
    low, high = (1 + x / 100 for x in report.ci95_pct)
    new = (report.verdict, 1 + report.regression_pct / 100, low, high)
    wall = (latency_verdict(low, high, LIMIT), new[1], low, high)
    cpu = None
    if report.cpu_regression_pct is not None and report.cpu_ci95_pct:
        c_low, c_high = (1 + x / 100 for x in report.cpu_ci95_pct)
        cpu = (latency_verdict(c_low, c_high, LIMIT), 1 + report.cpu_regression_pct / 100, c_low, c_high)
    either = cpu if wall[0] == "inconclusive" and cpu is not None and cpu[0] != "inconclusive" else wall
    pairs = [(h, b) for h, b in zip(head, base, strict=False) if len(h) >= 2 and len(b) >= 2]
    old = None
    if len(pairs) >= 2:
        ratio, lo, hi = hierarchical_ratio_ci([h for h, _ in pairs], [b for _, b in pairs])
        old = (latency_verdict(lo, hi, LIMIT), ratio, lo, hi)
    pairs = report.processes
    return Comparison(new, old, wall, cpu, either, pairs, seconds, run.other_cores, head, base, run.stop_reason)


def comparisons(
    folder: Path, case: Case, base: Built, head: Built, measure: MeasureSettings, n: int, rules: list[str]
) -> dict[str, list[Comparison]]:
    """`n` comparisons per stop rule of `rules`, in alternating batches (one rule: batches of BATCH)."""
    out: dict[str, list[Comparison]] = {rule: [] for rule in rules}
    batch = BATCH if len(rules) == 1 else ALTERNATE
    while any(len(rs) < n for rs in out.values()):
        for rule in rules:
            k = min(batch, n - len(out[rule]))
            if k <= 0:
                continue
            started = time.perf_counter()
            runner, settings = _arm(rule, measure)
            with _judge_path(TREE if rule == "tree" else None):
                runs = run_cases(job_for(folder, case, base, head, settings, k, LIMIT), runner=runner)
            per = (time.perf_counter() - started) / k
            out[rule] += [judge_both(case, runs[f"c{i}"], per) for i in range(k) if f"c{i}" in runs]
    return out


@contextmanager
def _judge_path(tree: Path | None) -> Iterator[None]:
    """With `tree`: the judge's process imports `bot` from that checkout (its PYTHONPATH; `-P` keeps the cwd out)."""
    if tree is None:
        yield
        return
    before = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = str(tree)
    try:
        yield
    finally:
        if before is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = before


def _arm(rule: str, measure: MeasureSettings) -> tuple[str, MeasureSettings]:
    """The judge module and measure settings of a rule: `before`, `after`, `tree` (the judge of `--tree`), or
    `blocksN` (after, N blocks a process)."""
    if rule == "tree":
        return RUNNERS["after"], measure
    if rule.startswith("blocks"):
        return RUNNERS["after"], measure.model_copy(update={"min_blocks": int(rule.removeprefix("blocks"))})
    return RUNNERS[rule], measure


def calibrate(folder: Path, case: Case, base: Built, build_root: Path) -> tuple[float, float]:
    """(GEMM p50 ms, ms per million extra iterations) from a long comparison with a known amount of work."""
    probe = variant(folder, build_root, 2_000_000)
    long = MeasureSettings(max_seconds=20, min_processes=4, max_processes=6, target_pct=0.2)
    run = run_cases(job_for(folder, case, base, probe, long, 1, 1000.0))["c0"]
    result = case_verdict(case, Constraints(max_regression_pct=1000.0), run)
    assert result.p50_ms and result.base_p50_ms, result.reasons
    return result.base_p50_ms, (result.p50_ms - result.base_p50_ms) / 2.0


@contextmanager
def load(kind: str, max_s: float) -> Iterator[None]:
    """`busy`: one process spinning on one core for the duration (and never longer than `max_s`)."""
    if kind == "idle":
        yield
        return
    spin = f"import time\nend = time.monotonic() + {max_s}\nwhile time.monotonic() < end: pass\n"
    proc = subprocess.Popen([sys.executable, "-c", spin])
    try:
        yield
    finally:
        proc.kill()
        proc.wait()


def _share(results: list[Comparison], statistic: str, verdict: str) -> str:
    judged = [getattr(r, statistic) for r in results if getattr(r, statistic) is not None]
    if not judged:
        return "—"
    hits = sum(j[0] == verdict for j in judged)
    return f"{hits / len(judged) * 100:.0f}% ({hits}/{len(judged)})"


def _coverage(results: list[Comparison], statistic: str, truth: float | None) -> tuple[int, int]:
    judged = [getattr(r, statistic) for r in results if getattr(r, statistic) is not None]
    judged = [j for j in judged if not math.isnan(j[1])]
    if not judged:
        return 0, 0
    centre = truth if truth is not None else statistics.median(j[1] for j in judged)
    return sum(j[2] <= centre <= j[3] for j in judged), len(judged)


def table(by_scenario: dict[str, list[Comparison]], loads: list[str], of: tuple[str, ...] = STATISTICS) -> list[str]:
    """The issue's table: rows of scenarios, a column per load and statistic (of `of`)."""
    columns = [(ld, st) for ld in loads for st in of]
    title = {"new": "gate", "old": "hierarchical", "wall": "wall", "cpu": "CPU time", "either": "wall, else CPU"}
    lines = ["| scenario | " + " | ".join(f"{ld}: {title[st]}" for ld, st in columns) + " |"]
    lines.append("|---" * (len(columns) + 1) + "|")
    rows = [("A/A false fail", "A/A", "fail"), ("+5% caught", "+5%", "fail"), ("+10% caught", "+10%", "fail"),
            ("2x caught", "2x", "fail")]  # fmt: skip
    for label, scenario, verdict in rows:
        cells = [_share(by_scenario.get(f"{ld} {scenario}", []), st, verdict) for ld, st in columns]
        if any(c != "—" for c in cells):
            lines.append(f"| {label} | " + " | ".join(cells) + " |")
    undecided, coverage = [], []
    for ld, st in columns:
        every = [r for key, rs in by_scenario.items() if key.startswith(f"{ld} ") for r in rs]
        judged = [getattr(r, st) for r in every if getattr(r, st) is not None]
        n = sum(j[0] == "inconclusive" for j in judged)
        undecided.append(f"{n / len(judged) * 100:.0f}% ({n}/{len(judged)})" if judged else "—")
        hit = total = 0
        for key, rs in by_scenario.items():
            if key.startswith(f"{ld} "):
                h, t = _coverage(rs, st, 1.0 if key.endswith("A/A") else None)
                hit, total = hit + h, total + t
        coverage.append(f"{hit / total * 100:.0f}% ({hit}/{total})" if total else "—")
    lines.append("| undecided, all scenarios | " + " | ".join(undecided) + " |")
    lines.append("| 95 % interval coverage | " + " | ".join(coverage) + " |")
    if len({ld for ld in loads if "/" in ld}) > 1:  # --rules: how long each stop rule measured
        pairs, seconds, on_cpu = [], [], []
        for ld, _ in columns:
            every = [r for key, rs in by_scenario.items() if key.startswith(f"{ld} ") for r in rs]
            pairs.append(f"{statistics.mean(r.pairs for r in every):.1f}" if every else "—")
            seconds.append(f"{statistics.mean(r.seconds for r in every):.1f}" if every else "—")
            n = sum(r.stop == "decided_cpu" for r in every)
            on_cpu.append(f"{n}/{len(every)}")
        lines.append("| process pairs per comparison (mean) | " + " | ".join(pairs) + " |")
        lines.append("| seconds per comparison (mean) | " + " | ".join(seconds) + " |")
        lines.append("| stopped early on CPU time | " + " | ".join(on_cpu) + " |")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--aa", type=int, default=100, help="A/A comparisons per load (default 100)")
    parser.add_argument("--ab", type=int, default=40, help="comparisons per slowdown of --slowdowns (default 40)")
    parser.add_argument("--big", type=int, default=10, help="comparisons of a 2x slower head (default 10)")
    parser.add_argument("--slowdowns", default="5,10", help="injected slowdowns in %% (default 5,10)")
    parser.add_argument("--loads", default="idle,busy", help="idle, busy (one core kept busy) or both (default)")
    parser.add_argument("--busy-max-s", type=float, default=7200.0, help="the busy loop ends itself after this")
    parser.add_argument("--case", default="square_512", help="a cpu case of deepgemm_tile")
    parser.add_argument("--shape", help="the case's shape instead of its own: m=64,n=64,k=64")
    parser.add_argument("--tree", type=Path, help="another checkout whose judge the rule `tree` runs")
    parser.add_argument("--save", type=Path, help="write every comparison's samples and verdicts here (JSON)")
    parser.add_argument(
        "--rules", default="after", help="after (the judge's), before (issue 40's early stop), blocksN; one or more"
    )
    args = parser.parse_args()
    loads = [ld for ld in args.loads.split(",") if ld]
    if any(ld not in ("idle", "busy") for ld in loads):
        raise SystemExit("gate_power: --loads takes idle and/or busy")
    rules = [r for r in args.rules.split(",") if r]
    valid = (*RUNNERS, "tree")
    if not rules or any(r not in valid and not re.fullmatch(r"blocks([2-9]|[1-9]\d+)", r) for r in rules):
        raise SystemExit("gate_power: --rules takes before, after, tree and/or blocksN (N >= 2)")
    global TREE
    if "tree" in rules:
        if args.tree is None or not (args.tree / "bot" / "untrusted" / "runner" / "judge.py").is_file():
            raise SystemExit("gate_power: the rule tree needs --tree DIR, a checkout of opgate")
        TREE = args.tree.resolve()

    kernel = load_kernel(KERNEL)
    case = next(c for c in kernel.manifest.cases if c.name == args.case)
    if args.shape:
        try:
            shape = {k: int(v) for k, v in (part.split("=") for part in args.shape.split(","))}
        except ValueError:
            raise SystemExit(f"gate_power: --shape takes m=64,n=64,k=64, not {args.shape!r}") from None
        case = case.model_copy(update={"shape": shape, "name": f"{case.name}@{args.shape}"})
    settings = load_settings()
    measure, build_root = settings.measure, settings.build_dir
    with tempfile.TemporaryDirectory(prefix="opgate-gate-power-") as tmp:
        folder = compose_folder(Path(tmp))
        base = variant(folder, build_root, 0, tag=0)
        twin = variant(folder, build_root, 0, tag=1)
        gemm_ms, ms_per_miter = calibrate(folder, case, base, build_root)
        print(f"# case {case.name}: GEMM p50 {gemm_ms:.3f} ms; extra work {ms_per_miter:.3f} ms per 1e6 iterations")
        heads: list[tuple[str, Built, int]] = [("A/A", twin, args.aa)]
        for pct in (float(p) for p in args.slowdowns.split(",") if p):
            iters = int(gemm_ms * pct / 100.0 / ms_per_miter * 1e6)
            heads.append((f"+{pct:g}%", variant(folder, build_root, iters), args.ab))
        if args.big:
            heads.append(("2x", variant(folder, build_root, int(gemm_ms / ms_per_miter * 1e6)), args.big))
        print(
            f"# {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, commit {_commit()}, {platform.node()}, "
            f"{os.cpu_count()} cores, python {platform.python_version()}, "
            f"isolation {Sandbox.detect().isolation.mode}"
        )
        print(f"# measure: {measure.model_dump()}; limit {LIMIT:g}%; busy: one spinning process")
        by_scenario: dict[str, list[Comparison]] = {}
        for kind in loads:
            with load(kind, args.busy_max_s):
                for name, head, n in heads:
                    if n <= 0:
                        continue
                    for rule, results in comparisons(folder, case, base, head, measure, n, rules).items():
                        at = kind if len(rules) == 1 else f"{kind}/{rule}"
                        by_scenario[f"{at} {name}"] = results
                        print(
                            f"# {at} {name}: {n} comparisons, wall {_share(results, 'wall', 'fail')} fail / "
                            f"{_share(results, 'wall', 'inconclusive')} undecided, gate "
                            f"{_share(results, 'new', 'inconclusive')} undecided; median pairs "
                            f"{statistics.median(r.pairs for r in results):.0f}, "
                            f"{statistics.median(r.seconds for r in results):.1f} s per comparison, other cores "
                            f"{statistics.median(r.other_cores or 0.0 for r in results):.2f}, load "
                            f"{os.getloadavg()[0]:.1f}",
                            flush=True,
                        )
        columns = [kind if len(rules) == 1 else f"{kind}/{rule}" for kind in loads for rule in rules]
        for line in table(by_scenario, columns, STATISTICS if len(rules) == 1 else ("new",)):
            print(line)
        if args.save:
            args.save.write_text(json.dumps({k: [r.__dict__ for r in rs] for k, rs in by_scenario.items()}))


def _commit() -> str:
    out = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return out.stdout.strip() or "unknown"


if __name__ == "__main__":
    main()
