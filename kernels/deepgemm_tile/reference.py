"""Torch reference and case inputs for deepgemm_tile."""

import torch

OUTPUTS = ("c",)  # the name reports and reasons give reference()'s output
FP32_EXACT = 2**24  # integers below this are exact in fp32: sums of small integer products never round


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


def make_probes(case: dict, device: str, seed: int):
    """Boundary probes (A, B) of small integers, so that any fp32 accumulation is exact and a correct kernel's error
    is 0 whatever its order; a dropped or doubled product moves an element by a whole integer.

    - tile_edges: m one past a multiple of 256, n one past a multiple of 256 below it, k one past a multiple of
      128: every allowed tile (m, n in {64, 128, 256}, k in {32, 64, 128}) ends with a tail of one row, one
      column and one k step; the three sizes differ, so a swapped stride reads the wrong elements.
    - large_magnitude: the case's shape with A's last row and B's last column scaled by a power of two so that
      C's last element exceeds fp16's range (65,504) while staying exact in fp32: an accumulator or store through
      fp16 overflows, a bf16 one rounds.
    """
    shape = case["shape"]
    m, n, k = shape["m"], shape["n"], shape["k"]
    dtype = getattr(torch, case["dtype"])
    gen = torch.Generator(device="cpu").manual_seed(seed)

    def ints(rows: int, cols: int, low: int = -4, high: int = 4) -> torch.Tensor:
        return torch.randint(low, high + 1, (rows, cols), generator=gen).float()

    def pack(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return a.to(dtype).to(device), b.to(dtype).to(device)

    pm, pn, pk = 256 * -(-m // 256) + 1, 256 * -(-n // 256) - 255, 128 * -(-k // 128) - 127
    if pn == pm:
        pn += 256
    if pk in (pm, pn):
        pk += 128 * (1 + (pk + 128 in (pm, pn)))
    yield "tile_edges", pack(ints(pm, pk), ints(pk, pn))

    scale = 1
    while 16 * (2 * scale) ** 2 * k < FP32_EXACT:
        scale *= 2  # the largest power of two with |C| < 2**24: |a|, |b| <= 4 * scale in the last row / column
    a, b = ints(m, k), ints(k, n)
    a[-1] = scale * ints(1, k, 1, 4)[0]
    b[:, -1] = scale * ints(k, 1, 1, 4)[:, 0]
    yield "large_magnitude", pack(a, b)
