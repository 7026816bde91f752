"""Inputs and references for the torch baselines: each kernel's own inputs, the part of its reference a
baseline returns (torch.matmul: C; SDPA: out, no lse), compared with benchmarks/throughput.baseline_tolerance."""

import importlib.util
from functools import cache
from pathlib import Path
from types import ModuleType

import torch

KERNELS = Path(__file__).resolve().parents[2] / "kernels"


@cache
def _kernel(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"opgate_baseline_{name}", KERNELS / name / "reference.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def make_gemm_inputs(case: dict, device: str, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    return _kernel("deepgemm_tile").make_inputs(case, device, seed)


def gemm_reference(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return _kernel("deepgemm_tile").reference(a, b)


def make_attention_inputs(case: dict, device: str, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    return _kernel("v41_attention_splitk").make_inputs(case, device, seed)


def attention_reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    return _kernel("v41_attention_splitk").reference(q, k, v)[0]
