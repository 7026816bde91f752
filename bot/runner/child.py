"""The case runner's child process: load builds, check against the reference, time interleaved.

Invoked as `python -m bot.runner.child JOB.json`. It appends one JSON line per event to the
job's `events` file *before* each risky step, so the parent can tell what crashed or hung.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

from bot.stats import median_ci_halfwidth_pct, ratio_ci

THROTTLE_FRACTION = 0.95  # a block measured below 95% of the highest SM clock seen is discarded


class Events:
    def __init__(self, path: str) -> None:
        self._file = open(path, "a", buffering=1)  # noqa: SIM115 - lives as long as the process

    def close(self) -> None:
        self._file.close()

    def emit(self, event: str, **fields: Any) -> None:
        self._file.write(json.dumps({"event": event, **fields}) + "\n")
        self._file.flush()


def load_file_module(name: str, path: str) -> ModuleType:
    loader: importlib.machinery.SourceFileLoader | importlib.machinery.ExtensionFileLoader
    if path.endswith(".py"):
        loader = importlib.machinery.SourceFileLoader(name, path)
    else:
        loader = importlib.machinery.ExtensionFileLoader(name, path)
    spec = importlib.util.spec_from_file_location(name, path, loader=loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def as_tensors(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)) and all(isinstance(v, torch.Tensor) for v in value):
        return list(value)
    raise TypeError(f"expected a tensor or a tuple of tensors, got {type(value).__name__}")


def compare(out: Any, ref: Any) -> dict[str, Any]:
    """max |out - ref| where both are finite; NaN/Inf must sit exactly where the reference has them."""
    outs, refs = as_tensors(out), as_tensors(ref)
    if len(outs) != len(refs):
        return {"error": f"returned {len(outs)} tensors, the reference {len(refs)}"}
    worst, nan_inf = 0.0, False
    for i, (o, r) in enumerate(zip(outs, refs, strict=True)):
        if o.shape != r.shape:
            return {"error": f"output {i} has shape {tuple(o.shape)}, the reference {tuple(r.shape)}"}
        o64, r64 = o.detach().double().cpu(), r.detach().double().cpu()
        fo, fr = torch.isfinite(o64), torch.isfinite(r64)
        if not torch.equal(fo, fr):
            nan_inf = True
        both = fo & fr
        if both.any():
            worst = max(worst, float((o64[both] - r64[both]).abs().max()))
    return {"max_abs_err": worst, "nan_inf": nan_inf}


class Timer:
    """Per-call wall time: perf_counter_ns on the CPU, CUDA events (after an L2 flush) on a GPU."""

    L2_FLUSH_BYTES = 256 * 1024 * 1024

    def __init__(self, device: str) -> None:
        self.cuda = device == "cuda"
        if self.cuda:
            self.flush = torch.empty(self.L2_FLUSH_BYTES, dtype=torch.uint8, device="cuda")

    def sm_clock_mhz(self) -> float | None:
        """The SM clock now (NVML through torch), or None where it cannot be read."""
        if not self.cuda:
            return None
        try:
            return float(torch.cuda.clock_rate())
        except Exception:  # pynvml missing or NVML refused: record nothing rather than guess
            return None

    def __call__(self, fn: Any) -> float:
        if self.cuda:
            self.flush.zero_()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            return float(start.elapsed_time(end))
        t0 = time.perf_counter_ns()
        fn()
        return (time.perf_counter_ns() - t0) / 1e6


def warm_up(fn: Any, timer: Timer, min_ms: float, min_calls: int) -> float:
    """Call until both floors are met; returns the median warm call time in ms."""
    times: list[float] = []
    started = time.perf_counter()
    while len(times) < min_calls or (time.perf_counter() - started) * 1e3 < min_ms:
        times.append(timer(fn))
    times.sort()
    return times[len(times) // 2]


def measure(fns: dict[str, Any], device: str, m: dict[str, Any], events: Events) -> None:
    """Interleaved blocks A B A B …, adaptive: stop at the precision target or at a cap."""
    timer = Timer(device)
    labels = list(fns)
    events.emit("start", label=",".join(labels), phase="timing")
    call_ms = max(warm_up(fns[lab], timer, m["warmup_ms"], m["warmup_calls"]) for lab in labels)
    # A block lasts ~20 ms of calls (at least 1) so drift is sampled often on both sides.
    per_block = max(1, min(50, int(20.0 / max(call_ms, 1e-3))))
    samples: dict[str, list[float]] = {lab: [] for lab in labels}
    blocks, started, stop = 0, time.perf_counter(), "max_samples"
    clocks: list[float] = []
    throttled = 0
    while True:
        order = labels if blocks % 2 == 0 else labels[::-1]
        block = {lab: [timer(fns[lab]) for _ in range(per_block)] for lab in order}
        blocks += 1
        clock = timer.sm_clock_mhz()
        if clock is not None:
            clocks.append(clock)
        if clock is not None and clock < THROTTLE_FRACTION * max(clocks):
            throttled += 1  # the GPU slowed down during this block: its samples are not comparable
        else:
            for lab in labels:
                samples[lab].extend(block[lab])
        n = min(len(s) for s in samples.values())
        if blocks >= m["min_blocks"] and n >= 5:
            if len(labels) == 2:
                _, low, high = ratio_ci(samples[labels[1]], samples[labels[0]], resamples=300)
                halfwidth = (high - low) / 2.0 * 100.0
            else:
                halfwidth = median_ci_halfwidth_pct(samples[labels[0]], resamples=300)
            if halfwidth <= m["target_pct"]:
                stop = "precision"
                break
        if n >= m["max_samples"]:
            stop = "max_samples"
            break
        if time.perf_counter() - started >= m["max_seconds"]:
            stop = "max_seconds"
            break
    events.emit(
        "timing", samples_ms=samples, stop_reason=stop, blocks=blocks, sm_clock_mhz=clocks, throttled_blocks=throttled
    )


def main(job_path: str) -> None:
    job = json.loads(Path(job_path).read_text())
    events = Events(job["events"])
    case, device = job["case"], job["case"]["device"]
    torch.manual_seed(case.get("seed", 0))
    torch.set_num_threads(int(job.get("threads", 1)))

    events.emit("start", phase="setup")
    ref = job["reference"]
    refmod = load_file_module(f"opgate_reference_{job['kernel']}", ref["path"])
    inputs = getattr(refmod, ref["inputs"])(case, device, case.get("seed", 0))
    expected = getattr(refmod, ref["function"])(*inputs)

    fns: dict[str, Any] = {}
    for b in job["builds"]:
        label = b["label"]
        events.emit("start", label=label, phase="check")
        try:
            ext = load_file_module(b["module"], b["so_path"])
            entry = getattr(ext, b["entry"])
            out = entry(*inputs)
            if device == "cuda":
                torch.cuda.synchronize()
            result = compare(out, expected)
        except Exception as exc:  # the kernel raised: report it, keep the process alive
            result = {"error": f"{type(exc).__name__}: {exc}"}
        events.emit("check", label=label, **result)
        ok = "error" not in result and not result["nan_inf"] and result["max_abs_err"] <= job["tolerance"]
        if ok and job.get("time", True):
            fns[label] = lambda e=entry: e(*inputs)
    # Only correct builds are timed; without a correct head there is nothing to compare.
    if job["builds"][-1]["label"] in fns:
        measure(fns, device, job["measure"], events)
    events.emit("done")
    events.close()


if __name__ == "__main__":
    main(sys.argv[1])
