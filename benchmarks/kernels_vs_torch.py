"""Each kernel against its torch baseline on the CUDA cases, timed by opgate's own judge (needs a GPU).

Every kernel's CUDA extension and the torch baselines (benchmarks/torch_baselines: torch.matmul and
F.scaled_dot_product_attention, built and run like a kernel) go through `bot.untrusted.runner.spawn.run_cases` with a
JudgeJob: the judge draws the inputs, checks the output against the reference and times batches of calls
from request to reply with a device-wide synchronize, in fresh worker processes. Kernel and baseline are
timed in separate judge runs (not interleaved); their ratio's CI is over worker processes.

  python -m benchmarks.kernels_vs_torch --mode check     every cuda case once, correctness only
  python -m benchmarks.kernels_vs_torch --mode time      rates: TFLOP/s and % of torch.matmul (GEMM),
                                                         GB/s and % of 4.8 TB/s (MLA decode), % of SDPA (split-K)
  python -m benchmarks.kernels_vs_torch --mode ncu       Nsight Compute metrics of the headline cases
  [--quick]  the headline cases only; [--out DIR] (default reports/gpu-check). One worker process per side.
  [--device cpu]  the same plumbing on the CPU cases (the baselines run on the CPU too): a dry run with no GPU

Writes kernels_vs_torch.json and .md into --out (updated after every case), and the gpu-check step file.
"""

from __future__ import annotations

import argparse
import importlib.machinery
import importlib.util
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Literal

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks import throughput  # noqa: E402
from scripts.gpucheck.steps import one_line, write_step_json  # noqa: E402

# The costliest to time last: the judge draws each input set on one CPU thread (decode_512_cuda ~3 s a set).
KERNELS = ("deepgemm_tile", "v41_attention_splitk", "flashmla_decode")
MARGIN_S = 60.0  # a judge notices its case deadline between reads only: leave it a block's input drawing
HEADLINES = {
    "cuda": {"deepgemm_tile": "gemm_4096", "flashmla_decode": "decode_512_cuda", "v41_attention_splitk": "seq_8192"},
    "cpu": {"deepgemm_tile": "square_512", "flashmla_decode": "decode_128", "v41_attention_splitk": "cpu_causal_512"},
}
# kernel -> (baseline entry, its name, reference inputs, reference function)
BASELINES = {
    "deepgemm_tile": ("matmul", "torch.matmul", "make_gemm_inputs", "gemm_reference"),
    "v41_attention_splitk": ("sdpa", "F.scaled_dot_product_attention", "make_attention_inputs", "attention_reference"),
}
# The targets: kernel -> (minimum %, of what)
TARGETS = {
    "deepgemm_tile": (60.0, "torch.matmul"),
    "flashmla_decode": (50.0, "4.8 TB/s"),
    "v41_attention_splitk": (40.0, "SDPA"),
}
BASELINE_FOLDER = ROOT / "benchmarks" / "torch_baselines"


def seconds_left() -> float:
    deadline = os.environ.get("GPU_CHECK_DEADLINE")
    return float(deadline) - time.time() if deadline else float("inf")


class Bench:
    """Builds, jobs and results of one run."""

    def __init__(self, out: Path, quick: bool, device: str = "cuda") -> None:
        from bot.config.manifest import load_kernel
        from bot.untrusted.sandbox import Sandbox

        self.out, self.quick, self.device = out, quick, device
        self.headline = HEADLINES[device]
        self.sandbox = Sandbox.detect()
        self.store = Path(os.environ.get("OPGATE_BUILD_DIR", out / "build"))
        self.kernels = {name: load_kernel(ROOT / "kernels" / name) for name in KERNELS}
        self.results: dict[str, Any] = {
            "quick": quick,
            "cases": {},
            "builds": {},
            "isolation": self.sandbox.isolation.mode,
        }

    def so(self, name: str) -> str | None:
        """The verified CUDA extension of a kernel (or of the baselines), built once (cached by content)."""
        from bot.config.manifest_tables import BuildSpec
        from bot.untrusted.build import build, verify

        if name == "torch_baselines":
            spec, folder, config = (
                BuildSpec(sources=["binding.cpp"], cflags=["-O3"], entry="matmul"),
                BASELINE_FOLDER,
                {},
            )
        else:
            k = self.kernels[name]
            spec, folder, config = k.manifest.build[self.device], k.folder, k.config
        device: Literal["cpu", "cuda"] = "cuda" if self.device == "cuda" else "cpu"
        built = build(name, folder, spec, config, device, self.store, self.sandbox)
        self.results["builds"][name] = {"ok": built.ok, "seconds": round(built.seconds, 1), "cached": built.cached}
        if not built.ok:
            self.results["builds"][name]["log_tail"] = built.log_tail[-2000:]
            return None
        return str(verify(built))

    def job(self, name: str, cases: list[Any], so: str, *, time_it: bool, baseline: bool = False) -> Any:
        from bot.models.judging import JudgeJob, MeasureSettings, ReferenceSource
        from bot.untrusted.runner.spawn import new_secret

        k = self.kernels[name]
        if baseline:
            entry, _, inputs, function = BASELINES[name]
            reference = ReferenceSource(path=str(BASELINE_FOLDER / "reference.py"), inputs=inputs, function=function)
        else:
            entry = k.manifest.build[self.device].entry
            reference = ReferenceSource(
                path=str(k.folder / k.manifest.reference.module),
                inputs=k.manifest.reference.inputs,
                function=k.manifest.reference.function,
            )
        constraints = k.manifest.constraints
        tolerance = (
            (lambda c: throughput.baseline_tolerance(name, c.shape))
            if baseline
            else (lambda c: c.tolerance or constraints.tolerance)
        )
        # One worker process, two blocks: every input set costs the judge a CPU draw (README "H200"), and three
        # headline figures within a lease matter more than a confidence interval across processes.
        measure = MeasureSettings(max_seconds=2.0, min_blocks=2, min_processes=1, max_processes=1)
        timeout = min(float(k.manifest.timeout_s), max(20.0, seconds_left() - MARGIN_S))
        return JudgeJob(
            kernel=f"{name}{' baseline' if baseline else ''}",
            reference=reference,
            cases=[{**c.model_dump(), "tolerance": tolerance(c), "max_regression_pct": 3.0} for c in cases],
            sides={"head": {self.device: so}},
            module="opgate_ext",
            entry=entry,
            measure=measure,
            timeout_s=timeout,
            time=time_it,
            secret=new_secret(),
        )

    def save(self) -> None:
        (self.out / "kernels_vs_torch.json").write_text(json.dumps(self.results, indent=2, default=str) + "\n")
        (self.out / "kernels_vs_torch.md").write_text("\n".join(table(self.results)) + "\n")

    def cases(self, name: str) -> list[Any]:
        return [c for c in self.kernels[name].manifest.cases if c.device == self.device]


def comparable(case: Any) -> bool:
    """SDPA's is_causal aligns the mask top-left: the kernel's function only when q_len == kv_len (every cuda case)."""
    return "q_len" not in case.shape or case.shape["q_len"] == case.shape["kv_len"]


def check_row(run: Any) -> dict[str, Any]:
    head = run.checks.get("head")
    return {
        "status": str(run.status.value if hasattr(run.status, "value") else run.status),
        "detail": one_line(run.detail, 300),
        "max_abs_err": head.max_abs_err if head else None,
        "nan_inf": head.nan_inf if head else None,
        "error": head.error if head else None,
    }


def timing_row(run: Any) -> dict[str, Any]:
    timing = run.timings.get("head")
    if run.status != "ok" or timing is None or not timing.samples_ms:
        return {"status": str(run.status), "detail": one_line(run.detail, 300)}
    spot = run.spots.get("head")
    return {
        "status": "ok",
        "p50_ms": statistics.median(timing.samples_ms),
        "processes": timing.processes,
        "samples": len(timing.samples_ms),
        "calls_per_sample": timing.calls_per_sample,
        "spot_checks": spot.checked if spot else 0,
        "spot_failures": spot.failed if spot else 0,
        "notes": run.notes,
    }


def rates(kernel: str, case: Any, row: dict[str, Any]) -> dict[str, Any]:
    """The case's rate and its share of the baseline or the bandwidth, from the measured latencies."""
    from benchmarks.bootstrap import hierarchical_ratio_ci

    unit, amount = throughput.work(kernel, case.shape, case.params or {})
    timed = row.get("kernel", {})
    if timed.get("status") != "ok":
        return {}
    out: dict[str, Any] = {"unit": unit, "amount": amount}
    rate = throughput.per_second(amount, timed["p50_ms"])
    if unit == "flop":
        out["tflops"] = rate / 1e12
    else:
        out["gbps"] = rate / 1e9
        out["pct_of_peak"] = throughput.percent(rate, throughput.H200_HBM_BYTES_PER_S)
    base = row.get("baseline", {})
    if base.get("status") == "ok":
        out["baseline_tflops"] = throughput.per_second(amount, base["p50_ms"]) / 1e12
        out["pct_of_baseline"] = throughput.percent(base["p50_ms"], timed["p50_ms"])
        full = [p for p in timed["processes"] if len(p) >= 2], [p for p in base["processes"] if len(p) >= 2]
        if len(full[0]) >= 2 and len(full[1]) >= 2:
            _, low, high = hierarchical_ratio_ci(full[1], full[0], resamples=1000)  # baseline / kernel time
            out["pct_of_baseline_ci"] = [100.0 * low, 100.0 * high]
    return out


def _fmt(x: float | None, spec: str) -> str:
    return "—" if x is None else format(x, spec)


def table(results: dict[str, Any]) -> list[str]:
    lines = [
        "| kernel | case | correct (max abs err) | p50 ms | rate | baseline p50 ms | % of baseline / peak | target |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for key, row in results["cases"].items():
        kernel, case = key.split("/", 1)
        check = row.get("check", {})
        ok = check.get("status") == "ok" and check.get("error") is None and not check.get("nan_inf")
        correct = f"{'yes' if ok else '**no**'} ({_fmt(check.get('max_abs_err'), '.2g')})" if check else "—"
        if check.get("status") not in (None, "ok"):
            correct = f"**{check['status']}**: {one_line(check.get('detail', ''), 80).replace('|', '/')}"
        timed, base, r = row.get("kernel", {}), row.get("baseline", {}), row.get("rates", {})
        p50 = _fmt(timed.get("p50_ms"), ".4g") if timed.get("status") == "ok" else (timed.get("status") or "—")
        rate = f"{r['tflops']:.4g} TFLOP/s" if "tflops" in r else (f"{r['gbps']:.4g} GB/s" if "gbps" in r else "—")
        base_p50 = _fmt(base.get("p50_ms"), ".4g") if base.get("status") == "ok" else (base.get("status") or "—")
        share, target = "—", "—"
        goal, of = TARGETS[kernel]
        value = r.get("pct_of_baseline", r.get("pct_of_peak"))
        if value is not None:
            ci = r.get("pct_of_baseline_ci")
            share = f"{value:.1f}% of {of}" + (f" [{ci[0]:.1f}, {ci[1]:.1f}]" if ci else "")
            target = f"≥ {goal:g}%: {'met' if value >= goal else '**missed**'}"
        lines.append(f"| {kernel} | {case} | {correct} | {p50} | {rate} | {base_p50} | {share} | {target} |")
    return lines


def mode_check(bench: Bench) -> int:
    from bot.untrusted.runner.spawn import run_cases

    def one(name: str) -> dict[str, Any]:
        so = bench.so(name)
        cases = bench.cases(name)
        if so is None:
            return {
                f"{name}/{c.name}": {"check": {"status": "compile_fail", "detail": "the CUDA build failed"}}
                for c in cases
            }
        runs = run_cases(bench.job(name, cases, so, time_it=False))
        return {f"{name}/{c.name}": {"check": check_row(runs[c.name])} for c in cases if c.name in runs}

    with ThreadPoolExecutor(max_workers=len(KERNELS)) as pool:
        for part in pool.map(one, KERNELS):
            bench.results["cases"].update(part)
    bench.save()
    bad = [
        f"{key} {row['check']['status']}"
        + (f" (err {row['check']['max_abs_err']:.3g})" if row["check"].get("max_abs_err") else "")
        for key, row in bench.results["cases"].items()
        if row["check"]["status"] != "ok" or row["check"].get("error") or row["check"].get("nan_inf")
    ]
    total = sum(len(bench.cases(name)) for name in KERNELS)
    missing = total - len(bench.results["cases"])
    if missing:
        bad.append(f"{missing} case(s) not reported by the judge")
    reason = f"wrong or failed: {', '.join(bad)}" if bad else f"all {total} {bench.device} cases match their references"
    write_step_json("failed" if bad else "passed", reason, bench.results, table(bench.results))
    return 1 if bad else 0


def mode_time(bench: Bench) -> int:
    from bot.untrusted.runner.spawn import run_cases

    plan = []  # headline cases first, so a short budget still measures them
    for name in KERNELS:
        for c in bench.cases(name):
            if c.name == bench.headline[name]:
                plan.insert(sum(1 for p in plan if p[1].name == bench.headline[p[0]]), (name, c))
            elif not bench.quick:
                plan.append((name, c))
    sos = {name: bench.so(name) for name in (*KERNELS, "torch_baselines")}
    problems, skipped = [], []
    for name, case in plan:
        key = f"{name}/{case.name}"
        row = bench.results["cases"].setdefault(key, {})
        if seconds_left() < MARGIN_S + 20:
            skipped.append(case.name)
            continue
        if sos[name] is None:
            row["kernel"] = {"status": "compile_fail"}
            problems.append(f"{key}: no CUDA build")
            continue
        run = run_cases(bench.job(name, [case], sos[name], time_it=True))[case.name]
        row["check"], row["kernel"] = check_row(run), timing_row(run)
        if (
            name in BASELINES
            and sos["torch_baselines"] is not None
            and seconds_left() > MARGIN_S + 20
            and comparable(case)
        ):
            base = run_cases(bench.job(name, [case], sos["torch_baselines"], time_it=True, baseline=True))[case.name]
            row["baseline"] = timing_row(base) | {"check": check_row(base)}
        row["rates"] = rates(name, case, row)
        if row["kernel"].get("status") != "ok":
            problems.append(f"{key}: {row['kernel'].get('status')} {row['kernel'].get('detail', '')}".strip())
        bench.save()
    headline = []
    for name in KERNELS:
        r = bench.results["cases"].get(f"{name}/{bench.headline[name]}", {}).get("rates", {})
        value = r.get("pct_of_baseline", r.get("pct_of_peak"))
        goal, of = TARGETS[name]
        if value is not None:
            headline.append(
                f"{bench.headline[name]} {value:.0f}% of {of} ({'met' if value >= goal else 'missed'} ≥ {goal:g}%)"
            )
    reason = "; ".join(problems) or "; ".join(headline) or "no case timed"
    if skipped:
        reason += f"; out of time before {', '.join(skipped)}"
    lines = [*table(bench.results), "", "Measurement: one worker process, 2 blocks per side; one side per judge run."]
    write_step_json("failed" if problems else "passed", reason, bench.results, lines)
    return 1 if problems else 0


def mode_ncu(bench: Bench) -> int:
    from bot.untrusted import nsight

    ncu = shutil.which("ncu")
    if ncu is None:
        write_step_json("skipped", "ncu (Nsight Compute) is not on the PATH: no hardware counters collected")
        return 0
    version = subprocess.run([ncu, "--version"], capture_output=True, text=True).stdout.strip().splitlines()[-1:]
    tool = f"ncu {version[0].split()[-1]}" if version else "ncu"
    collected: dict[str, Any] = {}
    problems: list[str] = []
    lines = [
        "| case | function | µs | achieved occ. | theoretical occ. | DRAM % | DRAM bytes | registers | local bytes |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name in KERNELS:
        so = bench.so(name)
        case = next(c for c in bench.cases(name) if c.name == bench.headline[name])
        if so is None or seconds_left() < 30:
            problems.append(f"{name}: {'no CUDA build' if so is None else 'out of time'}")
            continue
        log = bench.out / f"ncu-{name}.csv"
        argv = [
            sys.executable,
            "-m",
            "benchmarks.kernels_vs_torch",
            "--mode",
            "profile",
            "--case",
            f"{name}/{case.name}",
            "--so",
            so,
        ]
        proc = subprocess.run(
            nsight.command(ncu, str(log), argv),
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=max(30, seconds_left() - 10),
        )
        text = log.read_text(errors="replace") if log.is_file() else ""
        try:
            metrics = nsight.summarize(nsight.parse_csv(text), tool)
        except nsight.NsightError as exc:
            errors = [line for line in (text + proc.stdout + proc.stderr).splitlines() if "ERR" in line]
            problems.append(f"{name}: {exc} {one_line(errors[0] if errors else proc.stderr[-300:], 200)}")
            continue
        collected[f"{name}/{case.name}"] = metrics.model_dump()
        bench.results["cases"].setdefault(f"{name}/{case.name}", {})["nsight"] = metrics.model_dump()
        for n in metrics.kernels:
            cells = [
                _fmt(n.duration_us, ".4g"),
                _fmt(n.achieved_occupancy_pct, ".1f"),
                _fmt(n.theoretical_occupancy_pct, ".1f"),
                _fmt(n.dram_throughput_pct, ".1f"),
                _fmt(n.dram_bytes, ".3g"),
                str(n.registers) if n.registers is not None else "—",
                _fmt(n.local_bytes, ".3g"),
            ]
            lines.append(f"| {case.name} | `{n.function}` | {' | '.join(cells)} |")
    (bench.out / "nsight.json").write_text(json.dumps(collected, indent=2) + "\n")
    bench.save()
    reason = "; ".join(problems) or f"{tool}: {len(collected)} cases profiled"
    write_step_json("failed" if problems else "passed", reason, {"nsight": collected}, lines)
    return 1 if problems else 0


def mode_profile(case_key: str, so: str) -> int:
    """Inside ncu: one call of the case after two warm-ups, between cudaProfilerStart and Stop."""
    import torch

    from bot.config.manifest import load_kernel

    name, case_name = case_key.split("/", 1)
    k = load_kernel(ROOT / "kernels" / name)
    case = next(c for c in k.manifest.cases if c.name == case_name)
    spec = importlib.util.spec_from_file_location("opgate_reference", k.folder / k.manifest.reference.module)
    assert spec is not None and spec.loader is not None
    reference = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(reference)
    loader = importlib.machinery.ExtensionFileLoader("opgate_ext", so)
    ext_spec = importlib.util.spec_from_file_location("opgate_ext", so, loader=loader)
    assert ext_spec is not None
    ext = importlib.util.module_from_spec(ext_spec)
    loader.exec_module(ext)
    entry = getattr(ext, k.manifest.build["cuda"].entry)
    inputs = getattr(reference, k.manifest.reference.inputs)(case.model_dump(), "cuda", 1)
    for _ in range(2):
        entry(*inputs)
    torch.cuda.synchronize()
    torch.cuda.profiler.start()
    entry(*inputs)
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", choices=("check", "time", "ncu", "profile"), default="time")
    parser.add_argument("--quick", action="store_true", help="headline cases only, one worker process per side")
    parser.add_argument(
        "--out", type=Path, default=Path(os.environ.get("GPU_CHECK_WORK", ROOT / "reports" / "gpu-check"))
    )
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda", help="cpu: a dry run on the CPU cases")
    parser.add_argument("--case", help="(--mode profile) kernel/case")
    parser.add_argument("--so", help="(--mode profile) the extension to load")
    args = parser.parse_args()
    if args.mode == "profile":
        return mode_profile(args.case, args.so)
    import torch

    if args.device == "cuda" and not torch.cuda.is_available():
        write_step_json("failed", "torch sees no CUDA GPU")
        print("kernels_vs_torch: needs a CUDA GPU", file=sys.stderr)
        return 1
    args.out.mkdir(parents=True, exist_ok=True)
    bench = Bench(args.out, args.quick or os.environ.get("GPU_CHECK_QUICK") == "1", args.device)
    previous = args.out / "kernels_vs_torch.json"
    if args.mode != "check" and previous.is_file():  # keep the check's correctness column
        bench.results["cases"] = json.loads(previous.read_text()).get("cases", {})
    code = {"check": mode_check, "time": mode_time, "ncu": mode_ncu}[args.mode](bench)
    print("\n".join(table(bench.results)))
    return code


if __name__ == "__main__":
    sys.exit(main())
