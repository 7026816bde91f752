"""Torch reference and case inputs for v41_attention_splitk (causal prefill attention, head_dim 128)."""

import math

import torch

ROWS_PER_STEP = 1024  # query rows per reference step: bounds the [rows, kv_len] score matrix in memory


def make_inputs(case: dict, device: str, seed: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Random q[b,h,q_len,d] and k, v[b,h,kv_len,d] in the case's dtype, reproducible from the seed.

    The queries are the *last* q_len positions of a kv_len-long sequence (query offset kv_len - q_len),
    so a CPU case can keep the full kv_len reduction per row while computing only a few rows.
    """
    shape = case["shape"]
    b, h, d = shape["batch"], shape["heads"], shape["head_dim"]
    sq, skv = shape["q_len"], shape["kv_len"]
    gen = torch.Generator(device="cpu").manual_seed(seed)
    dtype = getattr(torch, case["dtype"])
    q = torch.randn(b, h, sq, d, generator=gen).to(dtype)
    k = torch.randn(b, h, skv, d, generator=gen).to(dtype)
    v = torch.randn(b, h, skv, d, generator=gen).to(dtype)
    return q.to(device), k.to(device), v.to(device)


def reference(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(out, lse) of causal softmax(q k^T / sqrt(d)) v, query i at position kv_len - q_len + i.

    Accumulated in fp32 on a GPU and in float64 on the CPU (so there the reference has no error of its
    own); both results are returned as fp32: out[b,h,q_len,d] and the natural-log lse[b,h,q_len].
    """
    acc = torch.float64 if q.device.type == "cpu" else torch.float32
    sq, skv, d = q.shape[-2], k.shape[-2], q.shape[-1]
    assert sq <= skv, "the queries are the last q_len of kv_len positions"
    k, v = k.to(acc), v.to(acc)
    key_pos = torch.arange(skv, device=q.device)
    outs, lses = [], []
    for r0 in range(0, sq, ROWS_PER_STEP):
        rows = q[..., r0 : r0 + ROWS_PER_STEP, :].to(acc)
        scores = (rows @ k.transpose(-1, -2)) / math.sqrt(d)
        q_pos = torch.arange(r0, r0 + rows.shape[-2], device=q.device) + (skv - sq)
        scores.masked_fill_(key_pos[None, :] > q_pos[:, None], float("-inf"))
        lse = torch.logsumexp(scores, dim=-1)
        outs.append(torch.exp(scores - lse[..., None]) @ v)
        lses.append(lse)
    return torch.cat(outs, dim=-2).float(), torch.cat(lses, dim=-1).float()
