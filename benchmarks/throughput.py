"""The arithmetic of the GPU benchmark (pure): work per call of each kernel's case, and rates from a latency.

Conventions: a GEMM is 2·m·n·k FLOP; causal attention 4·head_dim FLOP per (query, key) pair it computes
(q·k and p·v), with query i at position kv_len - q_len + i as in the kernel; MLA decode's bytes are the
fewest it must move (each cache position of each sequence read once: 576 bf16 values, the value being its
first 512; q read once; out fp32 and lse written once; block table and lengths read once). Varlen cases
draw each sequence length from N(seqlen, seqlen/2) clamped to s_q, per input set: the bytes use the
expected length.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

H200_HBM_BYTES_PER_S = 4.8e12  # NVIDIA's H200 datasheet: 4.8 TB/s of HBM3e
SEQLEN_PAD = 256  # kernels/flashmla_decode/reference.py: block tables cover the longest sequence rounded up to this
BF16_EPS = 2.0**-8  # spacing of bf16 numbers in [1, 2): half of it is the worst rounding error relative to |x|


def gemm_flops(shape: Mapping[str, int]) -> float:
    return 2.0 * shape["m"] * shape["n"] * shape["k"]


def gemm_bytes(shape: Mapping[str, int], out_bytes: int = 4) -> float:
    """bf16 A and B read once, C written once (fp32 from the kernel, bf16 from torch.matmul)."""
    m, n, k = shape["m"], shape["n"], shape["k"]
    return 2.0 * (m * k + k * n) + out_bytes * m * n


def causal_pairs(q_len: int, kv_len: int) -> int:
    """(query, key) pairs a causal mask leaves when query i sits at position kv_len - q_len + i."""
    offset = kv_len - q_len
    return q_len * offset + q_len * (q_len + 1) // 2


def attention_flops(shape: Mapping[str, int]) -> float:
    pairs = causal_pairs(shape["q_len"], shape["kv_len"])
    return 4.0 * shape["head_dim"] * pairs * shape["batch"] * shape["heads"]


def expected_seqlen(mean: float, s_q: int, varlen: bool) -> float:
    """E[max(X, s_q)] for X ~ N(mean, mean/2) (the reference's varlen draw); `mean` itself otherwise."""
    if not varlen:
        return float(mean)
    sigma = mean / 2.0
    a = (s_q - mean) / sigma
    phi = math.exp(-a * a / 2.0) / math.sqrt(2.0 * math.pi)
    below = 0.5 * (1.0 + math.erf(a / math.sqrt(2.0)))
    return s_q * below + mean * (1.0 - below) + sigma * phi


def mla_decode_bytes(shape: Mapping[str, int], params: Mapping[str, Any]) -> float:
    """The fewest bytes one call of a flashmla_decode case moves (module doc), at the expected lengths."""
    batch, s_q, h_q, d, dv = (shape[k] for k in ("batch", "s_q", "h_q", "d", "dv"))
    seqlen = expected_seqlen(shape["seqlen"], s_q, bool(params.get("varlen", True)))
    kv = batch * seqlen * d * 2
    q = batch * s_q * h_q * d * 2
    out = batch * s_q * h_q * dv * 4 + batch * h_q * s_q * 4
    blocks = math.ceil(seqlen / shape["block_size"])
    table = batch * blocks * 4 + batch * 4
    return float(kv + q + out + table)


def per_second(amount: float, ms: float) -> float:
    """`amount` (FLOP or bytes) per call at `ms` milliseconds per call, per second."""
    if ms <= 0:
        raise ValueError(f"a latency must be positive, got {ms} ms")
    return amount / (ms * 1e-3)


def percent(value: float, reference: float) -> float:
    return 100.0 * value / reference


def work(kernel: str, shape: Mapping[str, int], params: Mapping[str, Any]) -> tuple[str, float]:
    """("flop" | "byte", amount per call): what the rate of a case of `kernel` is counted in."""
    if kernel == "deepgemm_tile":
        return "flop", gemm_flops(shape)
    if kernel == "v41_attention_splitk":
        return "flop", attention_flops(shape)
    if kernel == "flashmla_decode":
        return "byte", mla_decode_bytes(shape, params)
    raise ValueError(f"no work model for kernel {kernel!r}")


def baseline_tolerance(kernel: str, shape: Mapping[str, int]) -> float:
    """max |out - ref| a torch baseline with bf16 output may show: its rounding, not a wrong result.

    torch.matmul of bf16 returns bf16: |C| stays below 6·sqrt(k) for unit-normal inputs, so rounding is
    below half a bf16 spacing of that. SDPA's output is a softmax average of unit-normal values (|out| < 6),
    computed with bf16 probabilities: a few bf16 spacings.
    """
    if kernel == "deepgemm_tile":
        return BF16_EPS * 6.0 * math.sqrt(shape["k"])
    if kernel == "v41_attention_splitk":
        return 4 * BF16_EPS * 6.0
    raise ValueError(f"{kernel} has no torch baseline")
