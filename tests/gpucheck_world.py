"""What the gpu-check tests share: a step that runs a line of Python and a runner in a scratch folder."""

from __future__ import annotations

import sys
from pathlib import Path

from scripts.gpucheck.steps import Result, Step

ROOT = Path(__file__).resolve().parent.parent


PY = sys.executable


def py(code: str) -> tuple[str, ...]:
    return (PY, "-c", code)


def step(name: str, code: str, estimate: float = 0, limit: float = 30, needs: tuple[str, ...] = ()) -> Step:
    return Step(name, f"what {name} proves", py(code), estimate, limit, needs)


def results() -> list[Result]:
    return [
        Result("machine", "a GPU", "passed", "NVIDIA H200 (sm_90)", 3.2, 0, "logs/machine.log", {"gpu": "NVIDIA H200"}),
        Result("build", "extensions build", "failed", "did not build: flashmla_decode (cuda) | nvcc\nerror", 88.0, 1),
        Result("pytest", "pytest -m gpu", "skipped", "out of time: needs about 240 s, 12 s left"),
        Result("bench", "kernels vs torch", "passed", "gemm_4096 71% of torch.matmul", 120.0, 0, None, {}, ["| x |"]),
    ]
