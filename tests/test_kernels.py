"""Each kernel kind under `opgate review`: an A/A change passes; wrong, NaN and spilling changes fail.

The CPU twins are really built and run; the spill check really compiles the .cu with nvcc for sm_90a
(nothing CUDA runs here). Sabotage recipes are exact substitutions verified by each kernel's author.
"""

from __future__ import annotations

import shutil

import pytest

from bot.verdict.names import base_name
from tests.conftest import make_repo

pytestmark = pytest.mark.slow

# kernel -> (cpu body, cuda body, incorrect recipe, NaN recipe, spill recipe); recipes are (old, new)
KERNELS = {
    "deepgemm_tile": (
        "gemm_cpu.cpp",
        "gemm_cuda.cu",
        ("crow[jj] += a_ip * brow[jj];", "crow[jj] += a_ip * brow[jj] * 1.001f;"),
        (
            "std::copy_n(acc.data() + ii * TN, cols, c + (i0 + ii) * n + j0);",
            "std::copy_n(acc.data() + ii * TN, cols, c + (i0 + ii) * n + j0);\n"
            "        if (i0 + ii == m - 1) c[(i0 + ii) * n + j0] = 0.0f / 0.0f;",
        ),
        (
            "__global__ void __launch_bounds__(TileCfg<TM, TN, TK>::kThreads, 1)",
            "__global__ void __launch_bounds__(1024, 2)",
        ),
    ),
    "flashmla_decode": (
        "decode_cpu.cpp",
        "decode_cuda.cu",
        ("    acc[c] *= alpha;", "    acc[c] *= 1.0f;"),  # the accumulator is not rescaled between tiles
        ("  return seqlen;", "  return seqlen + 1;"),  # the no-mask branch reads one NaN-filled position too many
        ("__global__ void __launch_bounds__(kThreads, 1)", "__global__ void __launch_bounds__(1024, 2)"),
    ),
    "v41_attention_splitk": (
        "attention_cpu.cpp",
        "attention_cuda.cu",
        # each split keeps its running softmax sum in fp16: the reduction drifts as the sequence grows
        (
            "  float l;            // running sum of exp(score - m)",
            "  _Float16 l;         // running sum of exp(score - m)",
        ),
        # 0 * inf when a split is empty (fully masked)
        (
            "const float inv_l = part[r].l > 0.0f ? 1.0f / part[r].l : 0.0f;",
            "const float inv_l = 1.0f / part[r].l;",
        ),
        ("__launch_bounds__(kThreads) splitk_partial_kernel", "__launch_bounds__(kThreads, 4) splitk_partial_kernel"),
    ),
}

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on the PATH")


def review(opgate, repo):
    head = repo.commit()
    return opgate("review", "--repo", str(repo.path), "--base", repo.base, "--head", head, "--offline")


def cpu_cases(run, name):
    return [c for c in run.kernel(name)["cases"] if c["device"] == "cpu"]


# Timed (alone): it asserts an A/A never fails, which a second test loading the machine broke once (CI at 8a58131:
# v41's cpu_seq_8192 +8.2 % with another test's builds beside it).
@pytest.mark.parametrize("name", [k for k in KERNELS if k != "deepgemm_tile"])  # its: test_review_spine's no-op test
def test_a_no_op_change_passes_with_every_cpu_case_measured(opgate, tmp_path, name):
    """An unused function: other bytes, the same behaviour (a comment alone compiles to base's very ext.so, which is
    checked but not timed: tests/test_review_spine.py)."""
    cpu_body = KERNELS[name][0]
    repo = make_repo(tmp_path / "repo", [name])
    path = repo.path / "kernels" / name / cpu_body
    path.write_text(path.read_text() + '\nextern "C" int opgate_no_op_marker() { return 40; }\n')
    run = review(opgate, repo)
    assert run.code == 0, run.stdout + run.stderr
    kernel = run.kernel(name)
    assert kernel["build"]["key"] != kernel["base_build"]["key"]
    for case in cpu_cases(run, name):
        assert case["verdict"] in ("pass", "inconclusive") and case["max_abs_err"] <= case["tolerance"]
        assert case["p50_ms"] > 0 and case["base_p50_ms"] > 0
    # a pass only when every latency was decided; an interval straddling the limit leaves it undecided
    decided = all(c["verdict"] == "pass" for c in cpu_cases(run, name))
    assert kernel["verdict"] == ("pass" if decided else "undecided"), kernel
    check = kernel["resource_check"]
    if shutil.which("nvcc"):
        assert check["status"] == "ok" and check["head"] and all(r["spill_bytes"] == 0 for r in check["head"])
    else:
        assert check["status"] == "no_nvcc"


@pytest.mark.untimed  # a wrong side is never timed
@pytest.mark.parametrize("name", list(KERNELS))
def test_a_wrong_result_fails_on_correctness(opgate, tmp_path, name):
    cpu_body, _, (old, new), _, _ = KERNELS[name]
    repo = make_repo(tmp_path / "repo", [name])
    repo.edit(f"kernels/{name}/{cpu_body}", old, new)
    run = review(opgate, repo)
    assert run.code == 1
    wrong = [c for c in cpu_cases(run, name) if c["status"] == "incorrect"]
    assert wrong and all(c["verdict"] == "fail" and c["max_abs_err"] > c["tolerance"] for c in wrong)
    assert all(any(r.startswith("correctness: max_abs_err") for r in c["reasons"]) for c in wrong)
    assert all(c["p50_ms"] is None for c in wrong)  # a wrong kernel is not timed


@pytest.mark.untimed  # a wrong side is never timed
@pytest.mark.parametrize("name", list(KERNELS))
def test_a_nan_the_reference_does_not_have_fails_on_stability(opgate, tmp_path, name):
    cpu_body, _, _, (old, new), _ = KERNELS[name]
    repo = make_repo(tmp_path / "repo", [name])
    repo.edit(f"kernels/{name}/{cpu_body}", old, new)
    run = review(opgate, repo)
    assert run.code == 1
    assert any(c["nan_inf"] and c["verdict"] == "fail" for c in cpu_cases(run, name))


@pytest.mark.untimed  # compile-only; the CPU twin is the same build, never timed
@needs_nvcc
@pytest.mark.parametrize("name", list(KERNELS))
def test_a_spilling_cuda_change_fails_the_resource_gate_without_a_gpu(opgate, tmp_path, name):
    _, cuda_body, _, _, (old, new) = KERNELS[name]
    repo = make_repo(tmp_path / "repo", [name])
    repo.edit(f"kernels/{name}/{cuda_body}", old, new)
    run = review(opgate, repo)
    assert run.code == 1
    kernel = run.kernel(name)
    spills = [r for r in kernel["resource_check"]["head"] if r["spill_bytes"] > 0]
    assert spills
    # the reason names the function (or its template family, short) and its spill bytes; the CPU twin still passes
    named = (spills[0]["function"], base_name(spills[0]["function"]))
    assert any(
        r.startswith("resource: ") and any(n in r for n in named) and f"spills {spills[0]['spill_bytes']} bytes" in r
        for r in kernel["reasons"]
    ), kernel["reasons"]
    assert all(c["verdict"] == "pass" for c in cpu_cases(run, name))
    assert kernel["build"]["key"] == kernel["base_build"]["key"]  # a .cu edit does not rebuild the CPU twin


@pytest.mark.untimed  # correctness: a wrong side is never timed
def test_a_split_k_reduction_that_drifts_fails_random_inputs_on_the_long_bucket_and_the_drift_probe_everywhere(
    opgate, tmp_path
):
    name = "v41_attention_splitk"
    cpu_body, _, (old, new), _, _ = KERNELS[name]
    repo = make_repo(tmp_path / "repo", [name])
    repo.edit(f"kernels/{name}/{cpu_body}", old, new)
    run = review(opgate, repo)
    by_case = {c["name"]: c for c in cpu_cases(run, name)}
    # the random inputs' error is reported per sequence bucket and output; only the long reduction leaves the
    # tolerance on them, while the sum_drift probe (running sums of 1 and 0.61) exposes the fp16 sum on the short one
    short, long = by_case["cpu_seq_2048"], by_case["cpu_seq_8192"]
    random_err = {c: max(o["max_abs_err"] for o in by_case[c]["outputs"]) for c in ("cpu_seq_2048", "cpu_seq_8192")}
    assert random_err["cpu_seq_2048"] <= short["tolerance"] < random_err["cpu_seq_8192"]
    assert long["status"] == "incorrect" and long["failure"]["probe"] is None
    assert short["status"] == "incorrect" and short["failure"]["probe"] == "sum_drift"
    assert {p["name"]: p["verdict"] for p in short["probes"]}["sum_drift"] == "fail"
    assert long["probes"] == [] and long["probe_count"] == 3  # wrong on random inputs already: not probed
    reasons = run.kernel(name)["reasons"]  # the kernel states the case's reason once: gate, case, value, limit
    assert any(r.startswith("correctness: cpu_seq_8192 max_abs_err ") and "> tolerance" in r for r in reasons)
    assert "cpu_seq_8192: fail" not in reasons and "**correctness** `cpu_seq_8192` max_abs_err " in run.comment


@pytest.mark.untimed  # compile-only
@needs_nvcc
def test_a_cuda_source_that_does_not_compile_fails_the_kernel_on_a_cpu_machine(opgate, tmp_path):
    repo = make_repo(tmp_path / "repo", ["flashmla_decode"])
    repo.write(
        "kernels/flashmla_decode/decode_cuda.cu",
        (repo.path / "kernels/flashmla_decode/decode_cuda.cu").read_text() + "\nthis is not CUDA;\n",
    )
    run = review(opgate, repo)
    assert run.code == 1
    kernel = run.kernel("flashmla_decode")
    assert kernel["resource_check"]["status"] == "compile_fail"
    body = "kernels/flashmla_decode/decode_cuda.cu"
    lines = len((repo.path / body).read_text().splitlines())
    for arch in ("sm_90a", "sm_100a"):  # each architecture it ships for names the error by repository path and line
        [reason] = [r for r in kernel["reasons"] if r.startswith(f"resource: CUDA sources for {arch}:")]
        assert reason.startswith(f"resource: CUDA sources for {arch}: head does not compile: {body}:{lines}: "), reason
    assert "decode_cuda.cu" in kernel["resource_check"]["log_tail"]
    assert kernel["resource_check"]["base"] and kernel["resource_check"]["base_log_tail"] == ""  # base compiled
    assert "ptxas log (head, compile_fail)" in run.comment and "Base, as the build compiles it" in run.comment
