"""Torch reference and case inputs for deepgemm_tile."""

import torch


def make_inputs(case: dict, device: str, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Random A[m,k] and B[k,n] in the case's dtype, reproducible from the seed."""
    shape = case["shape"]
    gen = torch.Generator(device="cpu").manual_seed(seed)
    dtype = getattr(torch, case["dtype"])
    a = torch.randn(shape["m"], shape["k"], generator=gen).to(dtype)
    b = torch.randn(shape["k"], shape["n"], generator=gen).to(dtype)
    return a.to(device), b.to(device)


def reference(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """C = A @ B accumulated in fp32 (float64 on the CPU, so the reference has no error of its own)."""
    acc = torch.float64 if a.device.type == "cpu" else torch.float32
    return (a.to(acc) @ b.to(acc)).float()
