"""The GPU benchmark's arithmetic (benchmarks/throughput.py) and its table, checked without a GPU."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import pytest
import torch

from benchmarks import throughput
from benchmarks.kernels_vs_torch import table
from bot.config.manifest import load_kernel

ROOT = Path(__file__).resolve().parent.parent


def reference(kernel: str):
    spec = importlib.util.spec_from_file_location(f"ref_{kernel}", ROOT / "kernels" / kernel / "reference.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def cuda_case(kernel: str, name: str):
    return next(c for c in load_kernel(ROOT / "kernels" / kernel).manifest.cases if c.name == name)


def test_a_4096_cube_gemm_is_137_gflop_and_at_a_quarter_millisecond_550_tflops():
    flops = throughput.gemm_flops({"m": 4096, "n": 4096, "k": 4096})
    assert flops == 2 * 4096**3 == 137_438_953_472
    assert throughput.per_second(flops, 0.25) / 1e12 == pytest.approx(549.76, abs=0.01)


@pytest.mark.parametrize(("q_len", "kv_len"), [(1, 1), (4, 4), (2, 4), (77, 333), (512, 512)])
def test_causal_pairs_are_what_the_reference_mask_leaves(q_len, kv_len):
    key_pos = torch.arange(kv_len)
    q_pos = torch.arange(q_len) + (kv_len - q_len)  # as v41_attention_splitk/reference.py places the queries
    kept = int((key_pos[None, :] <= q_pos[:, None]).sum())
    assert throughput.causal_pairs(q_len, kv_len) == kept


def test_split_k_at_8192_counts_both_matmuls_over_the_causal_half():
    shape = cuda_case("v41_attention_splitk", "seq_8192").shape
    assert throughput.work("v41_attention_splitk", shape, {}) == ("flop", 4.0 * 128 * (8192 * 8193 // 2) * 16)


def test_mla_decode_bytes_of_the_fixed_length_case_by_hand():
    case = cuda_case("flashmla_decode", "decode_128_cuda")
    kv = 128 * 128 * 576 * 2  # each sequence's 128 positions read once, one KV head
    q = 128 * 1 * 128 * 576 * 2
    out = 128 * 1 * 128 * 512 * 4 + 128 * 128 * 1 * 4  # fp32 out and lse
    table_bytes = 128 * 2 * 4 + 128 * 4  # two 64-position blocks per sequence, and the lengths
    assert throughput.mla_decode_bytes(case.shape, case.params) == kv + q + out + table_bytes
    assert throughput.work("flashmla_decode", case.shape, case.params)[0] == "byte"


@pytest.mark.parametrize(("mean", "s_q"), [(512, 2), (8, 6)])
def test_expected_sequence_length_matches_the_reference_draw(mean, s_q):
    shape = {"batch": 4000, "s_q": s_q, "h_q": 1, "d": 4, "dv": 2, "seqlen": mean, "block_size": 64}
    case = {"shape": shape, "params": {"varlen": True}, "dtype": "bfloat16"}
    seqlens = reference("flashmla_decode").make_inputs(case, "cpu", seed=7)[3].double()
    standard_error = float(seqlens.std()) / math.sqrt(len(seqlens))
    assert throughput.expected_seqlen(mean, s_q, True) == pytest.approx(float(seqlens.mean()), abs=4 * standard_error)
    assert throughput.expected_seqlen(mean, s_q, False) == mean


def test_rates_need_a_positive_latency():
    with pytest.raises(ValueError, match="positive"):
        throughput.per_second(1e9, 0.0)


def test_the_matmul_baseline_tolerance_admits_bf16_rounding_but_not_a_wrong_product():
    ref = reference("deepgemm_tile")
    shape = {"m": 64, "n": 96, "k": 2048}
    a, b = ref.make_inputs({"shape": shape, "dtype": "bfloat16"}, "cpu", 3)
    exact = ref.reference(a, b)
    tolerance = throughput.baseline_tolerance("deepgemm_tile", shape)
    assert float((exact.bfloat16().float() - exact).abs().max()) <= tolerance  # torch.matmul's bf16 output
    half_k = ref.reference(a[:, :1024], b[:1024])  # a product that skipped half of k
    assert float((half_k - exact).abs().max()) > tolerance
    with pytest.raises(ValueError, match="no torch baseline"):
        throughput.baseline_tolerance("flashmla_decode", shape)


def test_the_table_shows_each_rate_its_share_of_torch_or_peak_and_the_target():
    results = {
        "cases": {
            "deepgemm_tile/gemm_4096": {
                "check": {"status": "ok", "max_abs_err": 3e-4, "nan_inf": False, "error": None},
                "kernel": {"status": "ok", "p50_ms": 0.25},
                "baseline": {"status": "ok", "p50_ms": 0.2},
                "rates": {"tflops": 549.8, "pct_of_baseline": 80.0, "pct_of_baseline_ci": [78.5, 81.2]},
            },
            "flashmla_decode/decode_512_cuda": {
                "check": {"status": "ok", "max_abs_err": 1e-6, "nan_inf": False, "error": None},
                "kernel": {"status": "ok", "p50_ms": 0.05},
                "rates": {"gbps": 1900.0, "pct_of_peak": 39.6},
            },
            "v41_attention_splitk/seq_8192": {"check": {"status": "timeout", "detail": "timed out after 180 s"}},
        }
    }
    lines = table(results)
    assert lines[2] == (
        "| deepgemm_tile | gemm_4096 | yes (0.0003) | 0.25 | 549.8 TFLOP/s | 0.2 | 80.0% of torch.matmul [78.5, 81.2] "
        "| ≥ 60%: met |"
    )
    assert lines[3] == (
        "| flashmla_decode | decode_512_cuda | yes (1e-06) | 0.05 | 1900 GB/s | — | 39.6% of 4.8 TB/s "
        "| ≥ 50%: **missed** |"
    )
    assert lines[4].startswith("| v41_attention_splitk | seq_8192 | **timeout**: timed out after 180 s | — |")
