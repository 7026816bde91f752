"""Runner health: how busy, how fast and (on a GPU) how throttled the machine is while opgate times.

`snapshot()` is read once per review (load, governor, clock, GPU state) for the report; `CpuWindow`
measures, over one case's timing, how many cores processes other than opgate's own kept busy. `noisy()`, a pure
function, says why the runner was busy: the judge then measures longer, and the gate names it beside an interval
that stays undecided (it never overrides one that decides).
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

from bot.models.finding import Phrase
from bot.models.report import RunnerHealth

THROTTLE_NAMES = {  # NVML clocks-event reasons that mean "slower than it should be"
    0x0000000000000002: "applications clocks setting",
    0x0000000000000004: "software power cap",
    0x0000000000000008: "hardware slowdown",
    0x0000000000000020: "software thermal slowdown",
    0x0000000000000040: "hardware thermal slowdown",
    0x0000000000000080: "hardware power brake",
}


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text()
    except OSError:
        return None


def busy_ticks() -> int:
    """CPU ticks the whole machine spent busy (user, nice, system, irq, softirq, steal), from /proc/stat."""
    text = _read("/proc/stat") or ""
    for line in text.splitlines():
        if line.startswith("cpu "):
            f = [int(x) for x in line.split()[1:]]
            return f[0] + f[1] + f[2] + f[5] + f[6] + (f[7] if len(f) > 7 else 0)
    return 0


def snapshot() -> RunnerHealth:
    """Load, cores, CPU governor and clock now; on a GPU (NVML) clocks, temperature, throttling, other processes."""
    cores = os.cpu_count() or 1
    load = _read("/proc/loadavg")
    governors = sorted({g.strip() for g in (_read(str(p)) for p in Path("/sys/devices/system/cpu").glob(
        "cpu[0-9]*/cpufreq/scaling_governor")) if g})  # fmt: skip
    mhz = [
        float(line.split(":")[1]) for line in (_read("/proc/cpuinfo") or "").splitlines() if line.startswith("cpu MHz")
    ]
    health = RunnerHealth(
        cores=cores,
        load1=float(load.split()[0]) if load else None,
        governor=",".join(governors) or None,
        cpu_mhz=round(sum(mhz) / len(mhz), 1) if mhz else None,
    )
    return _gpu(health)


def _gpu(health: RunnerHealth) -> RunnerHealth:
    try:
        import pynvml  # nvidia-ml-py, on GPU runners
    except ImportError:
        return health
    try:
        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(int((os.environ.get("CUDA_VISIBLE_DEVICES") or "0").split(",")[0]))
        reasons = pynvml.nvmlDeviceGetCurrentClocksThrottleReasons(handle)
        others = [p for p in pynvml.nvmlDeviceGetComputeRunningProcesses(handle) if p.pid != os.getpid()]
        return health.model_copy(
            update={
                "gpu_sm_mhz": pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM),
                "gpu_mem_mhz": pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_MEM),
                "gpu_temp_c": pynvml.nvmlDeviceGetTemperature(handle, pynvml.NVML_TEMPERATURE_GPU),
                "gpu_throttle": [name for bit, name in THROTTLE_NAMES.items() if reasons & bit],
                "gpu_other_processes": len(others),
            }
        )
    except Exception:  # NVML refused: say nothing rather than guess
        return health
    finally:
        with contextlib.suppress(Exception):
            pynvml.nvmlShutdown()


def noisy_phrase(other_cores: float | None, limit: float, health: RunnerHealth | None = None) -> Phrase | None:
    """Why the runner was busy or throttled while it measured (named beside an undecided interval), as a phrase of
    the findings' catalog, or None. Pure."""
    if other_cores is not None and other_cores > limit:
        cores = health.cores if health else "?"
        return Phrase(key="noisy.cores", params={"busy": f"{other_cores:.1f}", "cores": cores})
    if health is not None and health.gpu_throttle:
        return Phrase(key="noisy.throttled", params={"reasons": ", ".join(health.gpu_throttle)})
    if health is not None and health.gpu_other_processes:
        return Phrase(key="noisy.gpu_busy", params={"processes": health.gpu_other_processes})
    return None
