"""Which GPU targets this runner's nvcc compiles (`nvcc --list-gpu-code`), asked once per nvcc."""

from __future__ import annotations

import logging
import shutil
import subprocess
from functools import cache

from bot.verdict.occupancy import family

log = logging.getLogger(__name__)


@cache
def gpu_codes(nvcc: str) -> tuple[str, ...] | None:
    """The sm_XX codes `nvcc --list-gpu-code` prints, in its order; None when this nvcc cannot say (too old)."""
    try:
        proc = subprocess.run([nvcc, "--list-gpu-code"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        log.warning("nvcc --list-gpu-code failed: %s", exc)
        return None
    codes = tuple(line.strip() for line in proc.stdout.splitlines() if line.strip().startswith("sm_"))
    return codes if proc.returncode == 0 and codes else None


def unsupported(arch: str, nvcc: str | None = None) -> str | None:
    """Why this runner's nvcc cannot compile for `arch` (sm_100a needs sm_100 in its list); None when it can,
    when there is no nvcc (the check says so itself) or when nvcc cannot list its targets (then it just tries)."""
    nvcc = nvcc or shutil.which("nvcc")
    if nvcc is None:
        return None
    codes = gpu_codes(nvcc)
    if codes is None or family(arch) in codes:
        return None
    return (
        f"this runner's nvcc cannot compile for {arch} (`nvcc --list-gpu-code`: {', '.join(codes)}): "
        f"resources on {arch} not checked; install a CUDA toolkit that targets it"
    )
