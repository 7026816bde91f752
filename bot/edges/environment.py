"""What machine this is: device, GPU, torch, nvcc and Python versions (cheap, no torch import)."""

from __future__ import annotations

import platform
import re
import shutil
import subprocess
from functools import cache
from importlib import metadata
from pathlib import Path

from bot.models.report import Environment


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
def nvcc_version() -> str | None:
    out = _run("nvcc", "--version")
    match = re.search(r"release (\S+), V(\S+)", out or "")
    return match.group(2) if match else None


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


def torch_version() -> str | None:
    try:
        return metadata.version("torch")
    except metadata.PackageNotFoundError:
        return None


def detect() -> Environment:
    gpu = gpu_name()
    return Environment(
        device="cuda" if gpu else "cpu",
        gpu=gpu,
        torch=torch_version(),
        nvcc=nvcc_version(),
        python=platform.python_version(),
    )
