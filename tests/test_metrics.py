"""Error metrics (bot/metrics.py) and how the gate words them: each catches what it should, at the right index."""

from __future__ import annotations

import math
import tomllib
from typing import Any

import pytest
import torch

from bot.config.manifest import KernelManifest
from bot.config.manifest_tables import Case, Constraints, Limits, OutputLimits
from bot.models.judging import CaseRun, Check
from bot.models.report import CaseReport, CaseStatus, KernelReport, OutputMetrics, Violation
from bot.untrusted.runner.case import compare
from bot.verdict import metrics
from bot.verdict.gate import Policy, case_verdict, kernel_verdict
from bot.verdict.written import written_case, written_kernel

CASE = Case(name="tiny", device="cpu", dtype="bfloat16", shape={"m": 4})


def judged_case(*args: Any, **kw: Any) -> CaseReport:
    """`case_verdict`'s report as report.json states it (its findings' lines written)."""
    return written_case(case_verdict(*args, **kw))


def judged_kernel(*args: Any, **kw: Any) -> KernelReport:
    """`kernel_verdict`'s report as report.json states it (its findings' lines written)."""
    return written_kernel(kernel_verdict(*args, **kw))


def measure(name: str, out: torch.Tensor, ref: torch.Tensor) -> OutputMetrics:
    """Every metric of one output, as the judge's `evaluate` takes them."""
    [found], _ = metrics.evaluate([out], [ref], [name], None)
    return found


def violation(name: str, out: torch.Tensor, ref: torch.Tensor, limits: OutputLimits) -> Violation | None:
    """The first limit one output breaks, as the judge's `evaluate` finds it (a limit left None: not gated)."""
    case = Limits(max_abs_err=math.inf, outputs={name: limits})
    return metrics.evaluate([out], [ref], [name], case)[1]


def max_abs_err(out: torch.Tensor, ref: torch.Tensor) -> float:
    return measure("out", out, ref).max_abs_err


def max_rel_err(out: torch.Tensor, ref: torch.Tensor) -> float:
    return measure("out", out, ref).max_rel_err


def cos_diff(out: torch.Tensor, ref: torch.Tensor) -> float:
    return measure("out", out, ref).cos_diff


def test_max_abs_err_ignores_positions_non_finite_in_both_and_flags_new_ones():
    ref = torch.tensor([1.0, float("nan"), 3.0, 4.0])
    same_nan = torch.tensor([1.5, float("nan"), 3.0, 4.0])
    assert max_abs_err(same_nan, ref) == pytest.approx(0.5)
    assert not measure("out", same_nan, ref).nan_inf
    new_inf = torch.tensor([1.0, float("nan"), float("inf"), 4.0])
    v = violation("out", new_inf, ref, OutputLimits(max_abs_err=1.0))
    assert v is not None and v.metric == "nan_inf" and v.index == [2] and v.got == float("inf") and v.expected == 3.0


def test_the_first_bad_index_is_the_first_element_over_the_limit_in_row_major_order():
    ref = torch.zeros(3, 4, 5)
    out = ref.clone()
    out[2, 0, 0] = 0.9  # the largest error, but later in memory
    out[1, 2, 3] = 0.2  # the first one over the limit
    out[0, 1, 1] = 0.05  # within the limit
    v = violation("out", out, ref, OutputLimits(max_abs_err=0.1))
    assert v is not None and v.metric == "max_abs_err"
    assert v.index == [1, 2, 3] and v.value == pytest.approx(0.9) and v.limit == 0.1
    assert v.got == pytest.approx(0.2) and v.expected == 0.0
    assert measure("out", out, ref).worst_index == [2, 0, 0]


def test_relative_error_catches_a_large_element_off_by_a_percentage_but_not_noise_near_zero():
    ref = torch.tensor([[1000.0, 1e-9], [2.0, -3.0]])
    noisy_zero = ref.clone()
    noisy_zero[0, 1] = 1e-4  # near a zero reference: relative to 1 % of the RMS, not to 1e-9
    assert max_rel_err(noisy_zero, ref) < 1e-3
    off = ref.clone()
    off[0, 0] = 1050.0  # 5 % off: far under an absolute tolerance of 100, plainly wrong relative to itself
    assert max_abs_err(off, ref) == pytest.approx(50.0)
    assert max_rel_err(off, ref) == pytest.approx(0.05)
    v = violation("lse", off, ref, OutputLimits(max_abs_err=100.0, max_rel_err=0.01))
    assert v is not None and v.metric == "max_rel_err" and v.index == [0, 0] and v.value == pytest.approx(0.05)


def test_cos_diff_is_deepgemms_calc_diff_and_names_the_first_bad_row():
    x = torch.randn(6, 32, generator=torch.Generator().manual_seed(0))
    assert cos_diff(x, x) == pytest.approx(0.0, abs=1e-15)
    assert cos_diff(2 * x, x) == pytest.approx(1 - 2 * 2 / 5)  # 1 - 2<2x,x>/(|2x|^2+|x|^2)
    assert cos_diff(-x, x) == pytest.approx(2.0)
    assert cos_diff(torch.zeros(3), torch.zeros(3)) == 0.0
    out = x.clone()
    out[4] = -out[4]  # one row flipped: a sign error in one output row
    v = violation("out", out, x, OutputLimits(max_cos_diff=1e-5))
    assert v is not None and v.metric == "cos_diff" and v.index == [4] and v.got is None


def test_limits_apply_per_output_and_the_first_broken_output_is_reported():
    out_ref, lse_ref = torch.zeros(2, 3), torch.full((2,), 5.0)
    outs = [out_ref + 0.001, lse_ref + torch.tensor([0.0, 0.02])]
    limits = Limits(max_abs_err=0.01, outputs={"lse": OutputLimits(max_abs_err=0.05)})
    measured, first = metrics.evaluate(outs, [out_ref, lse_ref], ["out", "lse"], limits)
    assert [m.name for m in measured] == ["out", "lse"] and first is None  # lse's own limit is looser
    strict = Limits(max_abs_err=0.01)
    _, first = metrics.evaluate(outs, [out_ref, lse_ref], ["out", "lse"], strict)
    assert first is not None and first.output == "lse" and first.index == [1]
    assert metrics.output_names(2, ("out", "lse")) == ["out", "lse"]
    assert metrics.output_names(2, ("out",)) == ["out0", "out1"]  # a declaration that does not fit is ignored
    assert metrics.output_names(1) == ["out"]


def _run(head: Check, probes: list[Check] | None = None, base: Check | None = None) -> CaseRun:
    checks = {"head": head} | ({"base": base} if base else {})
    return CaseRun(
        status=CaseStatus.ok,
        checks=checks,
        probes={"head": probes or []},
        probe_count=len(probes or []),
    )


def test_a_failing_probe_fails_the_case_and_its_reason_names_metric_output_index_value_and_probe():
    limits = CASE.limits(Constraints())
    good = compare([torch.zeros(2, 3)], [torch.zeros(2, 3)], ["out"], limits).model_copy(update={"label": "head"})
    out = torch.zeros(2, 3)
    out[1, 2] = 0.5
    bad = compare([out], [torch.zeros(2, 3)], ["out"], limits).model_copy(
        update={"label": "head", "probe": "last_visible"}
    )
    report = judged_case(CASE, Constraints(), _run(good, [bad]))
    assert report.verdict == "fail" and report.status == CaseStatus.incorrect
    assert report.reasons == [
        "correctness: max_abs_err 0.5 > tolerance 0.01 on out, first bad element out[1, 2]: got 0.5, reference 0; "
        "boundary probe last_visible"
    ]
    assert report.max_abs_err == 0.5  # the headline is the worst error seen, probes included
    assert report.failure is not None and report.failure.probe == "last_visible" and report.failure.index == [1, 2]
    assert [(p.name, p.verdict) for p in report.probes] == [("last_visible", "fail")]
    assert report.outputs[0].name == "out" and report.outputs[0].max_abs_err == 0.0


def test_a_gated_relative_error_fails_with_its_own_reason():
    constraints = Constraints(max_rel_err=0.01)
    limits = CASE.limits(constraints)
    check = compare([torch.tensor([105.0, 1.0])], [torch.tensor([100.0, 1.0])], ["lse"], limits)
    report = judged_case(CASE, constraints, _run(check.model_copy(update={"label": "head"})))
    assert report.verdict == "fail"
    assert report.reasons[0].startswith("correctness: max_abs_err 5 > tolerance 0.01 on lse, first bad element lse[0]")
    loose = Constraints(tolerance=10.0, max_rel_err=0.01)
    check = compare([torch.tensor([105.0, 1.0])], [torch.tensor([100.0, 1.0])], ["lse"], CASE.limits(loose))
    report = judged_case(CASE, loose, _run(check.model_copy(update={"label": "head"})))
    assert report.reasons == [
        "correctness: max_rel_err 0.05 > limit 0.01 on lse, first bad element lse[0]: got 105, reference 100"
    ]


def test_a_base_that_fails_a_probe_is_not_compared_on_latency():
    limits = CASE.limits(Constraints())
    good = compare([torch.zeros(2)], [torch.zeros(2)], ["out"], limits)
    bad = compare([torch.ones(2)], [torch.zeros(2)], ["out"], limits).model_copy(update={"probe": "tile_edges"})
    run = CaseRun(
        status=CaseStatus.ok,
        checks={"head": good, "base": good},
        probes={"head": [good.model_copy(update={"probe": "tile_edges"})], "base": [bad]},
    )
    report = judged_case(CASE, Constraints(), run)
    assert report.verdict == "pass"
    assert report.reasons == ["base is itself incorrect on this case (boundary probe tile_edges); latency not compared"]


def test_a_kernel_whose_reference_has_no_probes_gets_a_note_never_a_failure():
    limits = CASE.limits(Constraints())
    good = compare([torch.zeros(2)], [torch.zeros(2)], ["out"], limits).model_copy(update={"label": "head"})
    none = CaseRun(status=CaseStatus.ok, checks={"head": good}, probe_count=0)
    cases = [judged_case(CASE, Constraints(), none)]
    kernel = judged_kernel(
        KernelReport(name="k", domain="deepgemm", changed=True, verdict="skipped"), [], cases, Constraints(), Policy()
    )
    assert kernel.verdict == "pass"
    assert any(n.startswith("no boundary probes: the reference defines no make_probes") for n in kernel.notes)
    probed = judged_case(CASE, Constraints(), _run(good, [good.model_copy(update={"probe": "p"})]))
    kernel = judged_kernel(
        KernelReport(name="k", domain="deepgemm", changed=True, verdict="skipped"),
        [],
        [probed],
        Constraints(),
        Policy(),
    )
    assert not any("boundary probes" in n for n in kernel.notes)


def test_metric_gates_and_per_output_limits_are_read_from_the_manifest():
    manifest = tomllib.loads(
        """
name = "k"
domain = "flashmla"
globs = ["kernels/k/**"]
[build.cpu]
sources = ["k.cpp"]
entry = "k"
[constraints]
tolerance = 1e-2
max_cos_diff = 1e-5
[constraints.outputs.lse]
max_abs_err = 1e-3
[[cases]]
name = "c"
tolerance = 2e-2
"""
    )
    m = KernelManifest.model_validate(manifest)
    limits = m.cases[0].limits(m.constraints)
    assert limits.max_abs_err == 2e-2 and limits.max_cos_diff == 1e-5 and limits.max_rel_err is None
    assert limits.of("lse") == OutputLimits(max_abs_err=1e-3, max_cos_diff=1e-5)
    assert limits.of("out") == OutputLimits(max_abs_err=2e-2, max_cos_diff=1e-5)
    manifest["constraints"]["outputs"]["lse"]["max_ulp"] = 1  # an unknown metric is bad input, not ignored
    with pytest.raises(ValueError, match="max_ulp"):
        KernelManifest.model_validate(manifest)
