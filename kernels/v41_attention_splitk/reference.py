"""Torch reference and case inputs for v41_attention_splitk (causal prefill attention, head_dim 128)."""

import math

import torch

ROWS_PER_STEP = 1024  # query rows per reference step: bounds the [rows, kv_len] score matrix in memory
OUTPUTS = ("out", "lse")  # names of reference()'s outputs, as reports and reasons show them
EDGE = 32  # every multiple of the smallest block_n: block, split-chunk and row-tile edges all fall on one


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


def make_probes(case: dict, device: str, seed: int):
    """Boundary probes (q, k, v) at the case's shape, each built so that a key counted one off moves out by >> 1e-2.

    - causal_edge: scores grow by 11.3 per key position up to each row's own, so each row's softmax sits on
      its last visible key; seeing the first invisible one (or losing the last visible one) swaps the row's
      output for another key's value. Every real score is offset by -181, so a zero key counted past the
      sequence (a phantom from a zero-filled tile slot) would outweigh them all, and a kernel that skips the
      max subtraction underflows to a zero sum.
    - split_edges: the keys on both sides of every multiple of 32 (block_n, split-chunk and row-tile edges)
      and the last two keys carry one-hot codes; each query row matches one code, so its output is the mean
      of a few keys' values, each marking its own column: a key dropped or counted twice at a split or block
      edge moves that column by >= 8 / (keys per code).
    - sum_drift: keys weigh 1 and 0.61 alternately and v = 1 in the first 64 columns, where out is exactly 1
      whatever the weights: a running sum or output kept in fp16 takes rounded steps and drifts.
    causal_edge's keys and queries are small integers times powers of two: its fp32 dot products are exact.
    """
    shape = case["shape"]
    b, h, d = shape["batch"], shape["heads"], shape["head_dim"]
    sq, skv = shape["q_len"], shape["kv_len"]
    dtype = getattr(torch, case["dtype"])
    gen = torch.Generator(device="cpu").manual_seed(seed)

    def pack(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return q.to(dtype).to(device), k.to(dtype).to(device), v.to(dtype).to(device)

    # causal_edge: q_i . k_j = 128 (j - p_i) - 2048 exactly (p_i: row i's position), from base-64 digits of j in
    # k and of -p_i in q against columns of ones; every partial sum is an integer below 2**24.
    digits = max(1, -(-max(skv - 1, 1).bit_length() // 6))
    assert 128 * skv < 2**24 and 2 * digits + 1 <= d, "positions must stay exact in bf16 and fp32"
    k = torch.zeros(b, h, skv, d)
    q = torch.zeros(b, h, sq, d)
    key_pos, row_pos = torch.arange(skv), torch.arange(sq) + (skv - sq)
    for i in range(digits):
        k[..., i] = (key_pos // 64**i) % 64
        q[..., i] = 128.0 * 64**i
        k[..., digits + i] = 1.0
        q[..., digits + i] = -128.0 * 64**i * ((row_pos // 64**i) % 64)
    k[..., 2 * digits] = 1.0
    q[..., 2 * digits] = -2048.0  # -181 on every real score; a zero key scores 0
    yield "causal_edge", pack(q, k, torch.randn(b, h, skv, d, generator=gen))

    # split_edges: special keys on both sides of every multiple of EDGE, and the sequence's last two keys.
    # A key every row sees gets the codes in turn; a later one the code of the first row that sees it.
    special = sorted({p for p in range(skv) if p % EDGE in (0, EDGE - 1)} | {max(skv - 2, 0), skv - 1})
    codes = min(d, len(special), sq)
    k = torch.zeros(b, h, skv, d)
    v = torch.randn(b, h, skv, d, generator=gen)
    members = [0] * codes
    for t, p in enumerate(special):
        code = t % codes if p <= skv - sq else (p - (skv - sq)) % codes
        k[..., p, code] = 16.0  # score 16 * 16 / sqrt(128) = 22.6 against its own code, 0 against others
        v[..., p, :] = 0.0
        v[..., p, members[code] % d] = 8.0  # each key of a code marks its own column
        members[code] += 1
    q = torch.zeros(b, h, sq, d)
    for i in range(sq):
        q[..., i, i % codes] = 16.0
    yield "split_edges", pack(q, k, v)

    # sum_drift: scores 0 and -0.5 on alternate keys (weights 1 and 0.61); the first 64 columns of v are 1.
    k = torch.randn(b, h, skv, d, generator=gen)
    k[..., 0] = (torch.arange(skv) % 2).to(k.dtype)
    q = torch.zeros(b, h, sq, d)
    q[..., 0] = -0.5 * math.sqrt(d)
    v = torch.randn(b, h, skv, d, generator=gen)
    v[..., : min(64, d)] = 1.0
    yield "sum_drift", pack(q, k, v)
