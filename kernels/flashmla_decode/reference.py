"""Torch reference and case inputs for flashmla_decode (paged MLA decode attention, FlashMLA's test layout)."""

import torch

UNUSED_BLOCK = 2147480000  # block_table entry of a slot past a sequence's end: any read of it crashes
SEQLEN_PAD = 256  # max_blocks_per_seq covers the longest sequence rounded up to this, as in FlashMLA's tests
OUTPUTS = ("out", "lse")  # names of reference()'s outputs, as reports and reasons show them
EDGE = 16  # the smallest block_n: every tile edge, and every page edge (block_size 64), falls on a multiple


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
    batch, s_q, h_q, d = (shape[k] for k in ("batch", "s_q", "h_q", "d"))
    mean, block_size = shape["seqlen"], shape["block_size"]
    dtype = getattr(torch, case["dtype"])
    gen = torch.Generator(device="cpu").manual_seed(seed)

    if params.get("varlen", True):
        drawn = torch.normal(float(mean), mean / 2.0, (batch,), generator=gen)
        seqlens = drawn.round().clamp(min=s_q).to(torch.int32)
    else:
        seqlens = torch.full((batch,), mean, dtype=torch.int32)
    slots = _slots(seqlens, block_size, gen)
    logical = torch.randn(batch, slots.shape[1] * block_size, d, generator=gen, dtype=dtype)
    q = torch.randn(batch, s_q, h_q, d, generator=gen, dtype=dtype)
    return _paged(q, logical, seqlens, slots, case, device)


def _slots(seqlens: torch.Tensor, block_size: int, gen: torch.Generator) -> torch.Tensor:
    """A random cache block for every (sequence, logical block): int32 [batch, max_blocks_per_seq]."""
    max_blocks = -(-int(seqlens.max()) // SEQLEN_PAD) * SEQLEN_PAD // block_size
    batch = len(seqlens)
    return torch.randperm(batch * max_blocks, generator=gen, dtype=torch.int32).view(batch, max_blocks)


def _paged(
    q: torch.Tensor, logical: torch.Tensor, seqlens: torch.Tensor, slots: torch.Tensor, case: dict, device: str
) -> tuple[torch.Tensor, ...]:
    """make_inputs' tuple from per-sequence keys [batch, positions, d]: positions past a sequence are NaN, its
    blocks scattered through the cache by `slots`, block-table slots past its last block UNUSED_BLOCK."""
    dtype = getattr(torch, case["dtype"])
    batch, max_blocks = slots.shape
    block_size, d = case["shape"]["block_size"], logical.shape[-1]
    logical = logical.to(dtype).clone()
    for i, n in enumerate(seqlens.tolist()):
        logical[i, n:] = float("nan")
    kcache = torch.empty(batch * max_blocks, block_size, 1, d, dtype=dtype)
    kcache[slots.long()] = logical.view(batch, max_blocks, block_size, 1, d)
    used = -(-seqlens.long() // block_size)
    block_table = torch.where(torch.arange(max_blocks) < used[:, None], slots, UNUSED_BLOCK).to(torch.int32)
    head_dim_v = torch.tensor(case["shape"]["dv"], dtype=torch.int32)
    causal = torch.tensor(int(bool(case.get("params", {}).get("causal", False))), dtype=torch.int32)
    q = q.to(dtype)
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


def make_probes(case: dict, device: str, seed: int):
    """Boundary probes, each a make_inputs tuple built so that a key position counted one off moves out by >> 1e-2.

    Sequence lengths sit on the edges (varlen cases): one past a page boundary, one short of it, on it, one past
    a tile edge, the shortest allowed (s_q), one past the first page. Positions past a sequence stay NaN and
    block-table slots past its last block UNUSED_BLOCK, as in make_inputs.

    - last_visible: in the first half of the heads, scores grow by 10.7 per position up to the row's last
      visible one (causal: n - s_q + s; otherwise n - 1), so each row's softmax sits on that key: seeing the
      first invisible position, or losing the last visible one, swaps the row's output for another key's value.
      Built from base-64 digits of positions (exact in bf16, their dot products exact in fp32) in the key-only
      columns d_v..d. Every real score is offset by -171, so a zero key counted (a phantom from a zero-filled
      tile slot) outweighs them all, and a kernel that skips the max subtraction underflows to a zero sum.
      The other heads have q = 0 (every visible key weighs exactly 1) and the value is 256 in the first 256
      columns for every key, so out there is exactly 256 and lse exactly log(n): a phantom key pulls it down by
      256 / (n + 1), a running sum rounded to fp16 (4097 -> 4096) moves it by 256 / n.
    - page_edges: the positions on both sides of every multiple of 16 (tile and page edges) and each row's last
      visible one carry one-hot codes in the key-only columns; each query row matches one code, so its output is
      the mean of a few keys' values, each marking its own column: a key lost or read twice moves it by >= 8 / K.
    - sum_drift: keys weigh 1 and 0.61 alternately and the value is 1 in the first 64 columns, where out is
      exactly 1 whatever the weights: a running sum or output kept in fp16 takes rounded steps and drifts.
    """
    shape, params = case["shape"], case.get("params", {})
    batch, s_q, h_q, d, dv = (shape[k] for k in ("batch", "s_q", "h_q", "d", "dv"))
    mean, block_size = shape["seqlen"], shape["block_size"]
    gen = torch.Generator(device="cpu").manual_seed(seed)
    rows = s_q * h_q
    seqlens = _edge_lengths(batch, mean, s_q, block_size, bool(params.get("varlen", True)))
    slots = _slots(seqlens, block_size, gen)
    positions = slots.shape[1] * block_size
    # the last position row r = s * h_q + h of each sequence sees
    behind = (
        (s_q - 1 - torch.arange(rows) // h_q) if params.get("causal", False) else torch.zeros(rows, dtype=torch.long)
    )
    last = seqlens.long()[:, None] - 1 - behind[None, :]
    cols = list(range(dv, d)) if d > dv else list(range(d))  # code columns: the key-only ones (MLA: 64)

    digits = max(1, -(-max(positions - 1, 1).bit_length() // 6))
    assert 256 * positions < 2**24 and 2 * digits + 1 <= len(cols), "positions must stay exact in bf16 and fp32"
    logical = torch.randn(batch, positions, d, generator=gen, dtype=getattr(torch, case["dtype"]))
    logical[..., cols] = 0.0
    q = torch.zeros(batch, rows, d)
    pos = torch.arange(positions)
    for i in range(digits):
        logical[..., cols[i]] = ((pos // 64**i) % 64).float()
        q[..., cols[i]] = 256.0 * 64**i
        logical[..., cols[digits + i]] = 1.0
        q[..., cols[digits + i]] = -256.0 * 64**i * ((last // 64**i) % 64).float()
    logical[..., cols[2 * digits]] = 1.0
    q[..., cols[2 * digits]] = -4096.0  # -171 on every real score; a zero key scores 0
    logical[..., : min(256, dv)] = 256.0
    q[:, torch.arange(rows) % h_q >= (h_q + 1) // 2] = 0.0  # the uniform heads
    yield "last_visible", _paged(q.view(batch, s_q, h_q, d), logical, seqlens, slots, case, device)

    logical = torch.randn(batch, positions, d, generator=gen, dtype=getattr(torch, case["dtype"]))
    logical[..., cols] = 0.0
    q = torch.zeros(batch, rows, d)
    for i, n in enumerate(seqlens.tolist()):
        edges = {p for p in range(n) if p % EDGE in (0, EDGE - 1)} | set(last[i].tolist())
        special = sorted(edges)
        codes = min(len(cols), rows, len(special))
        # a position every row sees gets the codes in turn; a later one the code of the first row that sees it
        everyone = int(last[i].min())
        code = [t % codes if p <= everyone else int((last[i] >= p).nonzero()[0]) % codes for t, p in enumerate(special)]
        members = [0] * codes
        slot = []
        for c in code:
            slot.append(members[c] % dv)  # each key of a code marks its own value column
            members[c] += 1
        at = torch.tensor(special)
        logical[i, at, :dv] = 0.0
        logical[i, at, torch.tensor(cols)[code]] = 24.0  # score 24 * 24 / sqrt(576) = 24 against its own code
        logical[i, at, torch.tensor(slot)] = 8.0
        r = torch.arange(rows)
        q[i, r, torch.tensor(cols)[r % codes]] = 24.0
    yield "page_edges", _paged(q.view(batch, s_q, h_q, d), logical, seqlens, slots, case, device)

    logical = torch.randn(batch, positions, d, generator=gen, dtype=getattr(torch, case["dtype"]))
    logical[..., : min(64, dv)] = 1.0
    logical[..., cols[0]] = (pos % 2).float()
    q = torch.zeros(batch, rows, d)
    q[..., cols[0]] = -0.5 * d**0.5  # scores 0 and -0.5 on alternate positions
    yield "sum_drift", _paged(q.view(batch, s_q, h_q, d), logical, seqlens, slots, case, device)


def _edge_lengths(batch: int, mean: int, s_q: int, block_size: int, varlen: bool) -> torch.Tensor:
    """Sequence lengths on page and tile edges near the case's mean (all the mean itself without varlen)."""
    if not varlen:
        return torch.full((batch,), mean, dtype=torch.int32)
    base = block_size * max(1, round(mean / block_size))
    ends = [base + 1, base - 1, base, base + EDGE + 1, s_q, block_size + 1, base + EDGE, base + block_size - 1]
    return torch.tensor([max(s_q, ends[i % len(ends)]) for i in range(batch)], dtype=torch.int32)
