"""A CPU runner's own peak, measured once and cached: one thread's best matmul FLOP/s and copy bandwidth.

`python -m bot.edges.peak [REPEATS]` imports torch (nothing from a repository), pins itself to one thread as the
judge's workers are, and prints the figures as JSON; `cpu_peak()` caches them under the build folder by CPU model,
torch version and this module's version, so a review that finds them cached starts no process.

How: FLOP/s is the best of REPEATS timed `a @ b` in float32 (512 x 512) and in bfloat16 (256 x 256); GB/s is
the best `dst.copy_(src)` (read + write) over working sets of 64 KiB, 1 MiB, 16 MiB and 64 MiB, so a case whose
data stays in a cache is still held to what this core can stream. Both are what one core reached, not a
data-sheet figure: a head above them in a CPU case is treated as impossible (bot/verdict/throughput.py).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import subprocess
import sys
import time
from collections.abc import Callable
from functools import partial
from importlib import metadata
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from bot.edges.machine import cpu_name
from bot.models.evidence import Peak
from bot.models.finding import Phrase

log = logging.getLogger(__name__)

KEY_VERSION = "opgate.cpu-peak/1"
REPEATS = 7  # a first measurement; a case above it measures again with REFRESH_REPEATS before it fails
REFRESH_REPEATS = 25
MATMULS = (("float32", 512), ("bfloat16", 256))
COPY_BYTES = (1 << 16, 1 << 20, 1 << 24, 1 << 26)
TIMEOUT_S = 300


def _best(fn: Callable[[], Any], repeats: int) -> float:
    best = float("inf")
    fn()  # warm: page in, pick the kernel
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - started)
    return best


def measure(repeats: int = REPEATS) -> dict[str, float]:
    """One thread's best GFLOP/s (matmul) and GB/s (copy) on this machine (imports torch)."""
    import torch

    torch.set_num_threads(1)
    gflops = 0.0
    for dtype, n in MATMULS:
        a = torch.randn(n, n).to(getattr(torch, dtype))
        b = torch.randn(n, n).to(getattr(torch, dtype))
        gflops = max(gflops, 2 * n**3 / _best(partial(torch.matmul, a, b), repeats) / 1e9)
    gbps = 0.0
    for size in COPY_BYTES:
        src, dst = torch.ones(size // 4), torch.empty(size // 4)
        gbps = max(gbps, 2 * size / _best(partial(dst.copy_, src), repeats) / 1e9)
    return {"gflops": gflops, "gbps": gbps, "repeats": repeats}


def _key() -> str:
    try:
        torch = metadata.version("torch")
    except metadata.PackageNotFoundError:
        torch = "none"
    return hashlib.sha256(json.dumps([KEY_VERSION, cpu_name(), torch]).encode()).hexdigest()[:24]


def _peak(data: dict[str, float]) -> Peak:
    return measured_peak(data["gflops"] / 1e3, data["gbps"], cpu_name())


def measured_peak(tflops: float, gbps: float, cpu: str) -> Peak:
    """This runner's measured peak, and whose it is (a message of the catalog)."""
    return Peak(tflops=tflops, gbps=gbps, of=Phrase(key="peak.cpu", params={"cpu": cpu}))


def _measure_in_child(repeats: int) -> dict[str, float]:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    proc = subprocess.run(
        [sys.executable, "-P", "-m", "bot.edges.peak", str(repeats)],  # -P: never the cwd's bot/ package
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        env=env,
    )
    if proc.returncode != 0:
        raise OSError(f"measuring the CPU peak failed: {proc.stderr.strip()[-300:]}")
    data = json.loads(proc.stdout)
    if not (data.get("gflops", 0) > 0 and data.get("gbps", 0) > 0):
        raise OSError(f"measuring the CPU peak gave no figures: {proc.stdout[:200]}")
    return {k: float(v) for k, v in data.items()}


def cpu_peak(cache_dir: Path, *, refresh: bool = False) -> Peak | None:
    """This CPU's peak, from the cache or measured now; `refresh` measures again, longer, and keeps the larger
    figures (a busy machine can only make a measurement slower, never faster). None when it cannot measure."""
    path = cache_dir / f"cpu-peak-{_key()}.json"
    cached: dict[str, float] | None = None
    try:
        cached = json.loads(path.read_text())
        _peak(cached)
    except FileNotFoundError:
        cached = None
    except (OSError, ValueError, KeyError, TypeError, ValidationError) as exc:
        log.warning("ignoring an unreadable CPU peak %s: %s", path, exc)
        cached = None
    if cached is not None and not refresh:
        return _peak(cached)
    try:
        fresh = _measure_in_child(REFRESH_REPEATS if refresh else REPEATS)
    except (OSError, ValueError, subprocess.TimeoutExpired) as exc:
        log.warning("%s", exc)
        return _peak(cached) if cached is not None else None
    if cached is not None:
        fresh = {k: max(fresh[k], cached.get(k, 0.0)) for k in fresh}
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(fresh))
    tmp.replace(path)
    log.info("CPU peak of %s: %.1f GFLOP/s, %.1f GB/s (one thread)", cpu_name(), fresh["gflops"], fresh["gbps"])
    return _peak(fresh)


if __name__ == "__main__":  # pragma: no cover - run by cpu_peak() in a child process
    print(json.dumps(measure(int(sys.argv[1]) if len(sys.argv) > 1 else REPEATS)))
