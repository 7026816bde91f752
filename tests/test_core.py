"""Pure parts of the spine: diff analysis, static checks, statistics, the gate, rendering, parsing."""

from __future__ import annotations

import numpy as np
import pytest

from bot.agent.client import validate_base_url
from bot.agent.review import AgentOutputError, parse_review
from bot.config.manifest import Case, Constraints
from bot.config.settings import load_settings
from bot.errors import InputError
from bot.models.judging import CaseRun, Check, Timing
from bot.models.report import CaseStatus, KernelReport, Resource
from bot.present.render import untrusted
from bot.review.changes import matches, parse_diff, touching
from bot.text.redact import RedactingFilter, scrub
from bot.verdict.gate import Policy, case_verdict, kernel_verdict, overall, resource_reasons
from bot.verdict.static import check_tunables
from bot.verdict.stats import hierarchical_ratio_ci, latency_verdict, ratio_ci
from tests.conftest import REPO_CONFIG

DIFF = """\
diff --git a/kernels/deepgemm_tile/tile_config.json b/kernels/deepgemm_tile/tile_config.json
index 1111111..2222222 100644
--- a/kernels/deepgemm_tile/tile_config.json
+++ b/kernels/deepgemm_tile/tile_config.json
@@ -1 +1 @@
-{"tile_m": 128, "tile_n": 128, "tile_k": 64}
+{"tile_m": 96, "tile_n": 128, "tile_k": 64}
diff --git a/old/place.cu b/kernels/flashmla_decode/place.cu
similarity index 90%
rename from old/place.cu
rename to kernels/flashmla_decode/place.cu
index 3333333..4444444 100644
--- a/old/place.cu
+++ b/kernels/flashmla_decode/place.cu
@@ -1,2 +1,3 @@
 int a;
+int b;
 int c;
"""


def test_diff_parsing_keeps_renames_and_line_counts():
    changes = parse_diff(DIFF)
    assert [c.path for c in changes] == ["kernels/deepgemm_tile/tile_config.json", "kernels/flashmla_decode/place.cu"]
    assert (changes[0].added, changes[0].removed) == (1, 1)
    assert changes[1].old_path == "old/place.cu" and changes[1].paths == (
        "kernels/flashmla_decode/place.cu",
        "old/place.cu",
    )
    # a rename out of an unrelated folder touches the kernel it lands in, and the old place's globs too
    assert touching(changes, ["old/**"]) == [changes[1]]


@pytest.mark.parametrize(
    ("path", "glob", "hit"),
    [
        ("kernels/deepgemm_tile/gemm_cpu.cpp", "kernels/deepgemm_tile/**", True),
        ("kernels/deepgemm_tile/sub/x.h", "kernels/deepgemm_tile/**", True),
        ("kernels/deepgemm_tile_v2/x.h", "kernels/deepgemm_tile/**", False),
        ("kernels/deepgemm_tile/sub/x.h", "kernels/deepgemm_tile/*.h", False),
        ("kernels/deepgemm_tile/x.h", "kernels/deepgemm_tile/*.h", True),
        ("common/include/mma.cuh", "**/*.cuh", True),
        ("mma.cuh", "**/*.cuh", True),
    ],
)
def test_globs_match_like_a_repository_glob(path, glob, hit):
    assert matches(path, [glob]) is hit


def test_static_check_names_the_parameter_and_the_allowed_set():
    allowed = {"tile_m": [64, 128, 256], "tile_n": [64, 128, 256], "tile_k": [32, 64, 128]}
    assert check_tunables({"tile_m": 128, "tile_n": 64, "tile_k": 32}, allowed, "tile_config.json") == []
    findings = check_tunables({"tile_m": 96, "tile_n": 64, "tile_k": 32}, allowed, "tile_config.json")
    assert findings == ["tile_config.json: tile_m=96 not in {64,128,256}"]
    findings = check_tunables({"tile_m": 64, "tile_n": 64, "tile_kk": 32, "tile_k": True}, allowed, "c.json")
    assert "c.json: unknown tunable 'tile_kk' (allowed: tile_k, tile_m, tile_n)" in findings
    assert "c.json: tile_k=True not in {32,64,128}" in findings  # True == 1 must not sneak through


def _samples(center: float, n: int, seed: int, noise: float = 0.01) -> list[float]:
    rng = np.random.default_rng(seed)
    return list(center * (1 + noise * rng.standard_normal(n)))


def test_identical_distributions_do_not_fail_and_a_large_slowdown_does():
    base = _samples(1.0, 60, 1)
    same = _samples(1.0, 60, 2)
    slow = _samples(1.10, 60, 3)
    _, low, high = ratio_ci(same, base)
    assert latency_verdict(low, high, 3.0) == "pass"
    ratio, low, high = ratio_ci(slow, base)
    assert ratio == pytest.approx(1.10, abs=0.01)
    assert latency_verdict(low, high, 3.0) == "fail"
    # a shift right at the threshold with few samples is neither proven good nor bad
    assert latency_verdict(1.01, 1.05, 3.0) == "inconclusive"


def test_the_bootstrap_is_seeded_and_reproducible():
    a, b = _samples(1.0, 40, 5), _samples(1.02, 40, 6)
    assert ratio_ci(b, a) == ratio_ci(b, a)


CASE = Case(name="square", device="cpu", dtype="bfloat16", shape={"m": 8})
LIMITS = Constraints()


def test_gate_case_correctness_stability_and_latency():
    ok = CaseRun(
        status=CaseStatus.ok,
        checks={"head": Check(label="head", max_abs_err=1e-4)},
        timings={
            "head": Timing(label="head", samples_ms=_samples(1.2, 30, 1)),
            "base": Timing(label="base", samples_ms=_samples(1.0, 30, 2)),
        },
    )
    slow = case_verdict(CASE, LIMITS, ok)
    assert slow.verdict == "fail" and slow.reasons[0].startswith("performance: p50 +2")
    wrong = case_verdict(
        CASE, LIMITS, CaseRun(status=CaseStatus.ok, checks={"head": Check(label="head", max_abs_err=0.5)})
    )
    assert wrong.verdict == "fail" and wrong.status == CaseStatus.incorrect
    assert wrong.reasons == ["correctness: max_abs_err 0.5 > tolerance 0.01"]
    nan = case_verdict(
        CASE, LIMITS, CaseRun(status=CaseStatus.ok, checks={"head": Check(label="head", max_abs_err=0.0, nan_inf=True)})
    )
    assert nan.verdict == "fail" and nan.nan_inf
    crashed = case_verdict(
        CASE, LIMITS, CaseRun(status=CaseStatus.crashed, detail="killed by signal 11 (SIGSEGV)", failed_label="head")
    )
    assert crashed.verdict == "error" and crashed.reasons == ["head crashed: killed by signal 11 (SIGSEGV)"]
    skipped = case_verdict(CASE, LIMITS, None, "needs a CUDA GPU")
    assert skipped.verdict == "skipped" and skipped.status == CaseStatus.skipped


def test_resource_gate_occupancy_limits_and_a_missing_nvcc():
    from bot.models.report import ResourceCheckReport

    big = Resource(function="attn<8>", registers=128, smem_bytes=240_000)
    check = ResourceCheckReport(
        status="ok",
        head=[big],
        threads={"attn<8>": 1024},
        base=[Resource(function="attn<8>", registers=96, smem_bytes=1024)],
    )
    judged = kernel_verdict(
        KernelReport(name="k", domain="d", changed=True, verdict="skipped", resource_check=check),
        [],
        [],
        LIMITS,
        Policy(),
    )
    assert judged.verdict == "fail"
    assert judged.reasons == [
        "resource: attn<8> uses 240,000 B shared memory per block (static + dynamic) > 232,448",
        "resource: attn<8> cannot be resident on an SM: 128 registers x 1024 threads = 131,072 allocated per block",
    ]
    assert "attn<8>: registers 96 -> 128" in judged.notes
    none = kernel_verdict(
        KernelReport(
            name="k", domain="d", changed=True, verdict="skipped", resource_check=ResourceCheckReport(status="no_nvcc")
        ),
        [],
        [],
        LIMITS,
        Policy(),
    )
    assert "resource check skipped: nvcc is not on the PATH" in none.notes


def test_gate_kernel_spills_fail_and_inconclusive_follows_the_policy():
    from bot.models.report import ResourceCheckReport

    spill = Resource(
        function="gemm_kernel<128,128,64>", registers=255, spill_bytes=96, spill_store_bytes=48, spill_load_bytes=48
    )
    kernel = KernelReport(
        name="k",
        domain="deepgemm",
        changed=True,
        verdict="skipped",
        resource_check=ResourceCheckReport(status="ok", head=[spill], threads={spill.function: 128}),
    )
    judged = kernel_verdict(kernel, [], [], LIMITS, Policy())
    assert judged.verdict == "fail"
    assert judged.reasons == ["resource: gemm_kernel<128,128,64> spills 96 bytes (stores 48 B, loads 48 B)"]
    unsure = case_verdict(CASE, LIMITS, None, "x").model_copy(update={"verdict": "inconclusive", "reasons": []})
    neutral = kernel_verdict(
        KernelReport(name="k", domain="d", changed=True, verdict="skipped"),
        [],
        [unsure],
        LIMITS,
        Policy(inconclusive="neutral"),
    )
    strict = kernel_verdict(
        KernelReport(name="k", domain="d", changed=True, verdict="skipped"),
        [],
        [unsure],
        LIMITS,
        Policy(inconclusive="fail"),
    )
    assert (neutral.verdict, strict.verdict) == ("undecided", "fail")  # undecided is never a pass
    assert overall([neutral, strict]) == "fail" and overall([neutral]) == "undecided"


def test_untrusted_text_cannot_post_images_links_or_html():
    text = "ok ![x](https://t.example/p.gif) [click](https://t.example/?utm_source=a) <img src=x> | cell"
    out = untrusted(text)
    assert "![" not in out and "<img" not in out and "](" not in out and "https://" not in out
    assert "\\| cell" in out


def test_agent_reply_parsing_accepts_a_fenced_object_and_rejects_the_rest():
    review = parse_review('```json\n{"risk_notes": ["r"], "local_commands": [], "expected_metrics": {}}\n```')
    assert review.risk_notes == ["r"] and review.candidate_patch is None
    with pytest.raises(AgentOutputError, match="not valid JSON"):
        parse_review("no")
    with pytest.raises(AgentOutputError, match="risk_notes"):
        parse_review('{"risk_notes": "one string"}')


@pytest.mark.parametrize(
    "url",
    [
        "https://taotoken.net/api?utm_source=x",
        "https://taotoken.net/api?x=1",
        "ftp://taotoken.net/api",
        "https://user:pw@taotoken.net/api",
        "taotoken.net/api",
    ],
)
def test_gateway_base_url_must_be_bare(url):
    with pytest.raises(InputError):
        validate_base_url(url)


def test_gateway_base_url_is_normalised():
    assert validate_base_url("https://taotoken.net/api/") == "https://taotoken.net/api"


def test_settings_reject_bad_numbers_with_the_setting_name():
    with pytest.raises(InputError, match="OPGATE_MEASURE_MAX_SECONDS"):
        load_settings({"OPGATE_MEASURE_MAX_SECONDS": "soon"})
    env = {"TAOTOKEN_API_KEY_DEEPGEMM_AGENT": "sk-123456789", "OPGATE_CASE_TIMEOUT_S": "5"}
    settings = load_settings(env, REPO_CONFIG)
    assert settings.case_timeout_s == 5 and settings.key_for("TAOTOKEN_API_KEY_DEEPGEMM_AGENT") == "sk-123456789"
    assert "sk-123456789" not in repr(settings)


def test_secrets_are_scrubbed_from_text_and_log_records():
    import base64
    import logging

    key = "sk-live-abcdef123456"
    encoded = base64.b64encode(key.encode()).decode()
    assert scrub(f"key={key} b64={encoded}", [key]) == "key=*** b64=***"
    record = logging.LogRecord("x", logging.INFO, __file__, 1, "sending %s", (key,), None)
    RedactingFilter([key]).filter(record)
    assert record.getMessage() == "sending ***"


def test_pr_code_gets_an_environment_without_secrets_or_the_ledger(monkeypatch):
    from bot.untrusted.sandbox import base_env

    secrets = ("TAOTOKEN_API_KEY_DEEPGEMM_AGENT", "GITHUB_TOKEN", "OPGATE_DATABASE_URL", "ANTHROPIC_AUTH_TOKEN")
    for name in secrets:
        monkeypatch.setenv(name, "secret-value-123456")
    env = base_env({"OPGATE_BUILD_DIR": "/tmp/builds", **dict.fromkeys(secrets, "secret-value-123456")})
    assert "secret-value-123456" not in env.values()
    assert env["OPGATE_BUILD_DIR"] == "/tmp/builds" and "PATH" in env


def test_untrusted_text_cannot_mention_people():
    assert "@\u200bkernel-team" in untrusted("cc @kernel-team please")


def test_a_renamed_template_instantiation_is_still_compared_with_its_base():
    from bot.verdict.gate import match_base

    base = [
        Resource(function="k<128, 64, false>(int)", registers=200),
        Resource(function="k<128, 64, true>(int)", registers=180),
        Resource(function="merge(int)", registers=20),
    ]
    head = [
        Resource(function="k<256, 64, false>(int)", registers=230),
        Resource(function="k<256, 64, true>(int)", registers=170),
        Resource(function="merge(int)", registers=22),
    ]
    matched = match_base(head, base)
    assert {h: b.function for h, b in matched.items()} == {
        "k<256, 64, false>(int)": "k<128, 64, false>(int)",
        "k<256, 64, true>(int)": "k<128, 64, true>(int)",
        "merge(int)": "merge(int)",
    }
    _, notes = resource_reasons(head, base, LIMITS)
    assert notes == ["k<256, 64, false>(int): registers 200 -> 230", "merge(int): registers 20 -> 22"]


def test_function_names_render_as_literal_code():
    from bot.present.render import code

    assert code("k<1, 2>(int) | `x`") == "k<1, 2>(int) \\| 'x'"


def _aa_processes(rng, pairs: int, samples: int, process_sd: float, sample_sd: float) -> tuple[list, list]:
    """A/A timings: every process gets its own placement effect, every sample its own noise."""

    def one() -> list[float]:
        effect = rng.normal(0.0, process_sd)
        return list(np.exp(effect + rng.normal(0.0, sample_sd, samples)))

    return [one() for _ in range(pairs)], [one() for _ in range(pairs)]


def test_the_hierarchical_interval_holds_the_variation_between_processes_and_the_pooled_one_does_not():
    rng = np.random.default_rng(7)
    hier = pooled = 0
    trials = 200
    for _ in range(trials):
        head, base = _aa_processes(rng, pairs=4, samples=5, process_sd=0.04, sample_sd=0.005)
        _, low, high = hierarchical_ratio_ci(head, base, resamples=400)
        hier += low <= 1.0 <= high
        _, low, high = ratio_ci([x for p in head for x in p], [x for p in base for x in p], resamples=400)
        pooled += low <= 1.0 <= high
    assert hier / trials >= 0.90  # covers the truth as a 95 % interval should (small-sample widening included)
    assert pooled / trials < 0.75  # samples-only intervals are far too narrow when processes differ


def test_the_hierarchical_interval_is_tight_when_processes_agree_and_needs_two_pairs():
    rng = np.random.default_rng(3)
    head, base = _aa_processes(rng, pairs=4, samples=8, process_sd=0.0, sample_sd=0.003)
    head = [[x * 1.10 for x in p] for p in head]  # a 10 % slower head
    ratio, low, high = hierarchical_ratio_ci(head, base)
    assert 1.08 < low < ratio < high < 1.12
    with pytest.raises(ValueError):
        hierarchical_ratio_ci(head[:1], base[:1])
