"""Boundary probes of each kernel's reference: well formed, and sharp where the random inputs are blunt.

Each sensitivity test computes, in float64 torch, what a kernel with a one-off error would return (a mask that
sees one key more, a key lost at a split or page edge, a phantom key, a dropped product) and checks that the
probe moves the output by far more than the tolerance, while the same error on the case's random inputs can stay
under it. The mutation data file (benchmarks/mutations.toml) is checked against the sources it mutates.
"""

from __future__ import annotations

import functools
import importlib.util
import math
import sys
import tomllib
from pathlib import Path
from types import ModuleType

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
TOL = 1e-2


def _module(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def reference(kernel: str) -> ModuleType:
    return _module(ROOT / "kernels" / kernel / "reference.py", f"reference_{kernel}")


def cases(kernel: str, device: str = "cpu") -> list[dict]:
    manifest = tomllib.loads((ROOT / "kernels" / kernel / "kernel.toml").read_text())
    return [c for c in manifest["cases"] if c.get("device", "cpu") == device]


@functools.cache
def _probes(kernel: str, name: str) -> dict[str, tuple[torch.Tensor, ...]]:
    case = next(c for c in cases(kernel) if c["name"] == name)
    found = dict(reference(kernel).make_probes(case, "cpu", 7))
    assert found, f"{kernel} has no probes for {name}"
    return found


def probes(kernel: str, case: dict) -> dict[str, tuple[torch.Tensor, ...]]:
    return _probes(kernel, case["name"])


KERNELS = ["deepgemm_tile", "flashmla_decode", "v41_attention_splitk"]


@pytest.mark.parametrize("kernel", KERNELS)
def test_every_cpu_case_gets_named_reproducible_probes_whose_reference_is_finite(kernel):
    ref = reference(kernel)
    outs = ref.reference(*ref.make_inputs(cases(kernel)[0], "cpu", 1))
    assert len(ref.OUTPUTS) == (1 if isinstance(outs, torch.Tensor) else len(outs))  # every output is named
    first = cases(kernel)[0]
    again = dict(ref.make_probes(first, "cpu", 7))
    for name, inputs in probes(kernel, first).items():  # the same seed builds the same probes
        assert all(torch.equal(a.nan_to_num(7.0), b.nan_to_num(7.0)) for a, b in zip(inputs, again[name], strict=True))
    for case in cases(kernel):
        built = list(probes(kernel, case).items())
        assert len(built) >= 2
        for name, inputs in built:
            outs = ref.reference(*inputs)
            outs = [outs] if isinstance(outs, torch.Tensor) else list(outs)
            assert all(torch.isfinite(o).all() for o in outs), f"{kernel}/{case['name']}/{name}"


# -- v41_attention_splitk ----------------------------------------------------------------------------------------


def attention(q, k, v, shift: int = 0, drop: int | None = None, phantom: bool = False):
    """(out, lse) of causal attention in float64 where each row sees `shift` keys past its own position, key
    `drop` is lost, or (phantom) one zero key past the sequence is counted."""
    q, k, v = q.double(), k.double(), v.double()
    if phantom:
        k = torch.cat([k, torch.zeros_like(k[..., :1, :])], dim=-2)
        v = torch.cat([v, torch.zeros_like(v[..., :1, :])], dim=-2)
    sq, skv, d = q.shape[-2], k.shape[-2] - phantom, q.shape[-1]
    scores = q @ k.transpose(-1, -2) / math.sqrt(d)
    pos = torch.arange(sq)[:, None] + (skv - sq)
    keys = torch.arange(k.shape[-2])[None, :]
    hidden = keys > pos + shift
    if phantom:
        hidden = hidden & (keys < skv)
    if drop is not None:
        hidden = hidden | (keys == drop)
    scores = scores.masked_fill(hidden, float("-inf"))
    lse = torch.logsumexp(scores, -1)
    return torch.exp(scores - lse[..., None]) @ v, lse


def worst(a, b) -> float:
    return max(float((x - y).abs().max()) for x, y in zip(a, b, strict=True))


def test_v41_causal_edge_turns_a_one_key_mask_error_into_an_order_one_error_random_inputs_barely_see():
    case = next(c for c in cases("v41_attention_splitk") if c["name"] == "cpu_seq_8192")
    ref = reference("v41_attention_splitk")
    q, k, v = probes("v41_attention_splitk", case)["causal_edge"]
    truth = attention(q, k, v)
    assert worst(truth, ref.reference(q, k, v)) < 1e-4  # the test's attention is the reference's
    assert worst(attention(q, k, v, shift=1), truth) > 100 * TOL  # sees the first invisible key
    assert worst(attention(q, k, v, shift=-1), truth) > 100 * TOL  # loses the last visible key
    q, k, v = ref.make_inputs(case, "cpu", 3)
    assert worst(attention(q, k, v, shift=1), attention(q, k, v)) < TOL  # the blind spot the probe covers
    assert float(ref.reference(*probes("v41_attention_splitk", case)["causal_edge"])[1].max()) < -103  # exp underflows


@pytest.mark.parametrize("drop", [31, 32, 511, 512, 1024, 2047])
def test_v41_split_edges_notice_one_key_lost_at_any_block_or_split_edge(drop):
    case = next(c for c in cases("v41_attention_splitk") if c["name"] == "cpu_seq_2048")
    q, k, v = probes("v41_attention_splitk", case)["split_edges"]
    assert worst(attention(q, k, v, drop=drop), attention(q, k, v)) > 10 * TOL


def test_v41_causal_edge_notices_a_phantom_zero_key_past_the_sequence():
    case = next(c for c in cases("v41_attention_splitk") if c["name"] == "cpu_seq_2048")
    q, k, v = probes("v41_attention_splitk", case)["causal_edge"]
    assert worst(attention(q, k, v, phantom=True), attention(q, k, v)) > 100 * TOL


# -- flashmla_decode --------------------------------------------------------------------------------------------


def mla(inputs, shift: int = 0, drop: int | None = None, phantom: bool = False):
    """(out, lse) of paged MLA attention in float64, every row seeing `shift` positions more, position `drop`
    lost, or (phantom) one zero key counted past the visible ones."""
    q, kcache, table, seqlens, head_dim_v, causal = inputs
    _, s_q, h_q, d = q.shape
    dv, block_size = int(head_dim_v), kcache.shape[1]
    outs, lses = [], []
    for i, n in enumerate(seqlens.tolist()):
        kv = kcache[table[i, : -(-n // block_size)].long()].reshape(-1, d)[:n].double()
        if phantom:
            kv = torch.cat([kv, torch.zeros(1, d, dtype=kv.dtype)])
        scores = (q[i].reshape(s_q * h_q, d).double() @ kv.T) * d**-0.5
        row_last = n - 1 - (s_q - 1 - torch.arange(s_q * h_q) // h_q) * int(causal)
        keys = torch.arange(kv.shape[0])[None, :]
        hidden = keys > row_last[:, None] + shift
        if phantom:
            hidden = hidden & (keys < n)
        if drop is not None and drop < n:
            hidden = hidden | (keys == drop)
        scores = scores.masked_fill(hidden, float("-inf"))
        lses.append(torch.logsumexp(scores, -1))
        outs.append(torch.softmax(scores, -1) @ kv[:, :dv])
    return outs, lses


def mla_worst(a, b) -> float:
    return max(worst(x, y) for x, y in zip(a, b, strict=True))


def test_mla_last_visible_catches_the_causal_off_by_one_that_random_prefill_inputs_pass():
    case = next(c for c in cases("flashmla_decode") if c["name"] == "prefill_4096")
    ref = reference("flashmla_decode")
    inputs = probes("flashmla_decode", case)["last_visible"]
    out, _ = ref.reference(*inputs)
    truth = mla(inputs)
    assert (
        max(float((out[i].reshape(-1, out.shape[-1]) - truth[0][i]).abs().max()) for i in range(len(truth[0]))) < 1e-4
    )
    assert mla_worst(mla(inputs, shift=1), truth) > 100 * TOL
    assert mla_worst(mla(inputs, shift=-1), truth) > 100 * TOL
    random_inputs = ref.make_inputs(case, "cpu", 5)
    assert mla_worst(mla(random_inputs, shift=1), mla(random_inputs)) < TOL  # the measured blind spot


@pytest.mark.parametrize("drop", [0, 15, 16, 63, 64, 4095, 4096])
def test_mla_page_edges_notice_one_position_lost_at_a_page_or_tile_edge(drop):
    case = next(c for c in cases("flashmla_decode") if c["name"] == "prefill_4096")
    inputs = probes("flashmla_decode", case)["page_edges"]
    assert mla_worst(mla(inputs, drop=drop), mla(inputs)) > 10 * TOL


def test_mla_probe_lengths_sit_on_page_edges_and_a_phantom_zero_key_moves_last_visible():
    case = next(c for c in cases("flashmla_decode") if c["name"] == "decode_128")
    inputs = probes("flashmla_decode", case)["last_visible"]
    seqlens = inputs[3].tolist()
    assert {127, 128, 129, 1} <= set(seqlens)  # one short of, on and one past a page edge; the shortest
    out, _ = mla(inputs)
    assert float(torch.cat(out)[:, :256].sub(256).abs().max()) < 1e-9  # uniform heads and coded heads alike
    assert mla_worst(mla(inputs, phantom=True), mla(inputs)) > 100 * TOL


# -- deepgemm_tile ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", cases("deepgemm_tile"), ids=lambda c: c["name"])
def test_gemm_probes_are_exact_in_fp32_with_one_element_tails_and_an_fp16_overflow(case):
    ref = reference("deepgemm_tile")
    found = probes("deepgemm_tile", case)
    a, b = found["tile_edges"]
    m, k, n = a.shape[0], a.shape[1], b.shape[1]
    assert m % 256 == 1 and n % 256 == 1 and k % 128 == 1 and len({m, n, k}) == 3
    exact = ref.reference(a, b)
    assert torch.equal(a.float() @ b.float(), exact)  # any fp32 accumulation order gives the same integers
    dropped = a[:, :-1].double() @ b[:-1].double()  # the last product of K lost
    assert float((dropped - exact.double()).abs().max()) >= 1.0
    a, b = found["large_magnitude"]
    c = ref.reference(a, b)
    assert torch.equal(a.float() @ b.float(), c) and 65504 < float(c.abs().max()) < 2**24
    assert torch.isinf(c.half()).any()  # stored through fp16 it overflows


# -- the mutation data ------------------------------------------------------------------------------------------


def test_every_mutation_applies_to_exactly_one_place_in_a_cpu_twin():
    score = _module(ROOT / "benchmarks" / "mutation_score.py", "mutation_score")
    mutations = score.load_mutations()
    assert len(mutations) >= 30
    twins = {"kernels/deepgemm_tile/gemm_cpu.cpp", "kernels/flashmla_decode/decode_cpu.cpp"}
    twins |= {"kernels/v41_attention_splitk/attention_cpu.cpp"}
    assert {m.file for m in mutations} == twins
    per_kernel = {k: sum(m.kernel == k for m in mutations) for k in KERNELS}
    assert min(per_kernel.values()) >= 10, per_kernel
    classes = {m.cls for m in mutations}
    assert {"bounds_off_by_one", "dropped_clamp", "mask_shift", "accumulation_dtype", "split_boundary"} <= classes
    assert {"tail_tile", "swapped_stride", "missing_rescale"} <= classes


def test_the_mutation_score_tells_random_catches_from_probe_catches_and_latency_fails():
    score = _module(ROOT / "benchmarks" / "mutation_score.py", "mutation_score")

    def case(status, reasons, probes=(), err=0.0):
        outputs = [{"name": "out", "max_abs_err": err, "nan_inf": False}]
        failed = [{"name": p, "verdict": "fail"} for p in probes]
        return {"name": "c", "status": status, "tolerance": TOL, "reasons": list(reasons), "outputs": outputs,
                "probes": failed, "probe_seconds": 0.5, "case_seconds": 4.0}  # fmt: skip

    def kernel(verdict, *cases):
        return {"verdict": verdict, "build": {"ok": True}, "cases": list(cases)}

    random = score.classify(kernel("fail", case("incorrect", ["correctness: max_abs_err 0.5 > tolerance 0.01"])))
    assert random.caught and random.by_random == ["c"] and not random.by_probe
    probe_reason = "correctness: max_abs_err 0.5 > tolerance 0.01 on out, first bad element out[0]; boundary probe p"
    probe = score.classify(kernel("fail", case("incorrect", [probe_reason], ["p"])))
    assert probe.caught and not probe.by_random and probe.by_probe == ["c/p"]
    crash = score.classify(kernel("error", case("crashed", ["head crashed: killed by signal 11 during head probe p"])))
    assert crash.by_probe == ["c (crashed)"] and not crash.by_random
    slow = score.classify(kernel("fail", case("ok", ["performance: p50 +9.00% regresses more than 3%"])))
    assert not slow.caught and slow.latency_only
    assert random.probe_seconds == 0.5 and random.case_seconds == 4.0
