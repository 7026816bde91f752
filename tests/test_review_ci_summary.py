"""The facts a CI summary is asked about (bot/review/ci_summary.py): when one is asked; failing cases, figures."""

from __future__ import annotations

from bot.models.report import Resource
from bot.review import ci_summary as summary
from tests import comment_reports as cr


def test_a_summary_is_asked_only_when_a_kernel_did_not_pass_or_changed_a_resource():
    assert not summary.needs_ci_summary(cr.passing()) and not summary.needs_ci_summary(cr.no_change())
    for name in ("fail_latency", "crashed", "noisy", "gpu_skipped", "new_kernel", "build_fail"):
        assert summary.needs_ci_summary(cr.REPORTS[name]()), name
    grown = cr.passing().model_copy(deep=True)
    build = grown.kernels[0].build
    assert build is not None
    build.resources = [r.model_copy(update={"registers": r.registers + 8}) for r in build.resources]
    assert grown.verdict == "pass" and summary.needs_ci_summary(grown)
    (change,) = summary.facts(grown).kernels[0].resources[:1]
    assert change.head is not None and change.base is not None
    assert change.head["registers"] == change.base["registers"] + 8
    assert "(" not in change.function  # the parameter list is left out: the template arguments stay


def test_the_facts_carry_the_failing_cases_numbers_and_the_kernels_agent_notes():
    r = cr.with_candidate_and_agent()
    r.agents[0].kernel = "deepgemm_tile"
    facts = summary.facts(r)
    (k,) = facts.kernels
    (case,) = k.cases
    assert case.name == "ragged_200x328x264" and case.numbers["regression_pct"] == 10.53
    assert case.numbers["ci95_pct"] == [9.73, 12.0] and case.numbers["max_regression_pct"] == 3.0
    assert k.passed == ["square_512"] and len(k.not_run["needs a CUDA GPU; this machine has none"]) == 7
    assert k.risk_notes == ["tile_n 256 doubles the dynamic shared memory per block"]
    assert facts.unchanged == ["flashmla_decode"]


def test_a_resource_only_change_keeps_the_functions_figures():
    r = cr.passing().model_copy(deep=True)
    k = r.kernels[0]
    assert k.build is not None and k.base_build is not None
    old = k.base_build.resources[0]
    k.build.resources = [Resource(function=old.function, registers=old.registers, spill_bytes=4)]
    (change, *_) = summary.facts(r).kernels[0].resources
    assert change.head == {"registers": old.registers, "spill_bytes": 4, "smem_bytes": 0, "stack_bytes": 0}
