"""What machine this is: device, GPU, torch, nvcc and Python versions (cheap, no torch import)."""

from __future__ import annotations

import platform
import re
import shutil
import subprocess
from functools import cache
from importlib import metadata
from pathlib import Path

from bot.models.report import Machine


def _run(*cmd: str) -> str | None:
    if shutil.which(cmd[0]) is None:
        return None
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout if proc.returncode == 0 else None


@cache
def gpu_name() -> str | None:
    out = _run("nvidia-smi", "--query-gpu=name", "--format=csv,noheader")
    return out.strip().splitlines()[0] if out and out.strip() else None


@cache
def gpu_arch() -> str | None:
    """The GPU's architecture from its compute capability: `9.0` -> `sm_90`, `10.0` -> `sm_100`."""
    out = _run("nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader")
    match = re.fullmatch(r"(\d+)\.(\d+)", out.strip().splitlines()[0].strip()) if out and out.strip() else None
    return f"sm_{match.group(1)}{match.group(2)}" if match else None


@cache
def nvcc_version() -> str | None:
    out = _run("nvcc", "--version")
    match = re.search(r"release (\S+), V(\S+)", out or "")
    return match.group(2) if match else None


@cache
def gpu_codes() -> tuple[str, ...] | None:
    """The sm_XX codes the installed nvcc builds (`nvcc --list-gpu-code`), None without an nvcc that can say."""
    out = _run("nvcc", "--list-gpu-code")
    codes = tuple(line.strip() for line in (out or "").splitlines() if line.strip().startswith("sm_"))
    return codes or None


@cache
def driver_version() -> str | None:
    out = _run("nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader")
    return out.strip().splitlines()[0] if out and out.strip() else None


@cache
def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def device_key(gpu: str | None, arch: str | None) -> str:
    """How baselines, history and drift name a GPU: its model and architecture ("NVIDIA H100 80GB HBM3 · sm_90"),
    so figures of two models or two architectures are never compared; the model alone when the arch is unknown."""
    name = gpu or "cuda"
    return f"{name} · {arch}" if arch else name


def torch_version() -> str | None:
    try:
        return metadata.version("torch")
    except metadata.PackageNotFoundError:
        return None


def detect() -> Machine:
    gpu = gpu_name()
    return Machine(
        device="cuda" if gpu else "cpu",
        gpu=gpu,
        arch=gpu_arch() if gpu else None,
        torch=torch_version(),
        nvcc=nvcc_version(),
        python=platform.python_version(),
    )
