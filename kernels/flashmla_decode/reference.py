"""Torch reference and case inputs for flashmla_decode (paged MLA decode attention, FlashMLA's test layout)."""

import torch

UNUSED_BLOCK = 2147480000  # block_table entry of a slot past a sequence's end: any read of it crashes
SEQLEN_PAD = 256  # max_blocks_per_seq covers the longest sequence rounded up to this, as in FlashMLA's tests


def make_inputs(case: dict, device: str, seed: int) -> tuple[torch.Tensor, ...]:
    """(q, kcache, block_table, cache_seqlens, head_dim_v, causal), reproducible from the seed.

    q [batch, s_q, h_q, d] and kcache [num_blocks, block_size, 1, d] are in the case's dtype;
    the value is the first dv dims of the cache (MLA). Blocks are scattered in a random order;
    every cache position past a sequence's length, and every block no sequence uses, is NaN, and
    block_table slots past a sequence's last block hold UNUSED_BLOCK, so a kernel that reads past
    the end poisons its output or crashes. head_dim_v and causal are 0-dim int32 CPU tensors
    (host-side launch parameters, like FlashMLA's Python arguments).
    """
    shape, params = case["shape"], case.get("params", {})
    batch, s_q, h_q, d, dv = (shape[k] for k in ("batch", "s_q", "h_q", "d", "dv"))
    mean, block_size = shape["seqlen"], shape["block_size"]
    dtype = getattr(torch, case["dtype"])
    gen = torch.Generator(device="cpu").manual_seed(seed)

    if params.get("varlen", True):
        drawn = torch.normal(float(mean), mean / 2.0, (batch,), generator=gen)
        seqlens = drawn.round().clamp(min=s_q).to(torch.int32)
    else:
        seqlens = torch.full((batch,), mean, dtype=torch.int32)
    max_blocks = -(-int(seqlens.max()) // SEQLEN_PAD) * SEQLEN_PAD // block_size
    num_blocks = batch * max_blocks

    slots = torch.randperm(num_blocks, generator=gen, dtype=torch.int32).view(batch, max_blocks)
    logical = torch.randn(batch, max_blocks * block_size, d, generator=gen, dtype=dtype)
    for i, n in enumerate(seqlens.tolist()):
        logical[i, n:] = float("nan")
    kcache = torch.empty(num_blocks, block_size, 1, d, dtype=dtype)
    kcache[slots.long()] = logical.view(batch, max_blocks, block_size, 1, d)

    used = -(-seqlens.long() // block_size)
    block_table = torch.where(torch.arange(max_blocks) < used[:, None], slots, UNUSED_BLOCK).to(torch.int32)
    q = torch.randn(batch, s_q, h_q, d, generator=gen, dtype=dtype)
    head_dim_v = torch.tensor(dv, dtype=torch.int32)
    causal = torch.tensor(int(bool(params.get("causal", False))), dtype=torch.int32)
    return q.to(device), kcache.to(device), block_table.to(device), seqlens.to(device), head_dim_v, causal


def reference(
    q: torch.Tensor,
    kcache: torch.Tensor,
    block_table: torch.Tensor,
    cache_seqlens: torch.Tensor,
    head_dim_v: torch.Tensor,
    causal: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(out [batch, s_q, h_q, dv], lse [batch, h_q, s_q]) in fp32, softmax scale d**-0.5.

    Accumulates in float64 on the CPU (so the reference has no error of its own), fp32 elsewhere.
    Only the blocks and positions below each sequence length enter the arithmetic. A row that sees
    no position (impossible with make_inputs' seqlen >= s_q) gets out 0 and lse +inf, like the kernel.
    """
    acc = torch.float64 if q.device.type == "cpu" else torch.float32
    batch, s_q, h_q, d = q.shape
    dv, is_causal = int(head_dim_v), bool(causal)
    block_size = kcache.shape[1]
    out = torch.empty(batch, s_q, h_q, dv, dtype=torch.float32, device=q.device)
    lse = torch.empty(batch, h_q, s_q, dtype=torch.float32, device=q.device)
    # Row r of a sequence is query s = r // h_q, head h = r % h_q (FlashMLA flattens s_q into the heads).
    query_of_row = torch.arange(s_q, device=q.device).repeat_interleave(h_q)
    for i, n in enumerate(cache_seqlens.tolist()):
        pages = block_table[i, : -(-n // block_size)].long()
        kv = kcache[pages].reshape(-1, d)[:n].to(acc)
        scores = (q[i].reshape(s_q * h_q, d).to(acc) @ kv.T) * d**-0.5
        if is_causal:  # query s sees positions up to n - s_q + s
            last = n - s_q + query_of_row
            scores.masked_fill_(torch.arange(n, device=q.device)[None, :] > last[:, None], float("-inf"))
        row_lse = torch.logsumexp(scores, dim=-1)
        row_out = torch.softmax(scores, dim=-1) @ kv[:, :dv]
        empty = torch.isneginf(row_lse)
        row_out[empty] = 0.0
        row_lse[empty] = float("inf")
        out[i] = row_out.view(s_q, h_q, dv).float()
        lse[i] = row_lse.view(s_q, h_q).T.float()
    return out, lse
