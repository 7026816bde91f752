"""The agent's expected metrics held against what the review measured (bot/verdict/expectations.py) and kept in
the ledger on SQLite and PostgreSQL (the comment's lines: test_present_expectations.py)."""

from __future__ import annotations

import json

from bot.ledger import open_ledger
from bot.models.agent_report import AgentReport
from bot.models.report import Report
from bot.verdict.expectations import attach, check_kernel
from bot.wording.messages import phrase
from tests import comment_reports as cr
from tests import ledger_world
from tests.pg import Cluster, pg_cluster, pg_url  # noqa: F401  (fixtures)

url = ledger_world.url  # the fixture


def _with_expectations(expected: dict[str, float | str]) -> Report:
    """fail_latency (ragged +10.53 %, CI +9.73..+12.00; square −1.2 %, CI −2.9..+0.4) with the kernel's agent."""
    r = cr.fail_latency()
    agent = AgentReport(status="ok", domain="deepgemm", kernel="deepgemm_tile", expected_metrics=expected)
    return attach(r.model_copy(update={"agents": [agent], "agent": agent}))


def test_a_p50_change_per_case_is_inside_or_outside_its_measured_interval():
    checks = check_kernel(cr.fail_latency().kernels[0], {"latency_p50_regression": "+10%"})
    by_case = {c.subject: c for c in checks}
    assert set(by_case) == {"square_512", "ragged_200x328x264"}  # both timed cases, the skipped CUDA ones not
    assert by_case["ragged_200x328x264"].outcome == "inside"  # 10 in 9.73..12.00
    assert (by_case["ragged_200x328x264"].low, by_case["ragged_200x328x264"].high) == (9.73, 12.0)
    assert by_case["square_512"].outcome == "outside"
    assert by_case["square_512"].measured == -1.2


def test_a_name_that_names_a_case_is_held_against_that_case_only():
    checks = check_kernel(cr.fail_latency().kernels[0], {"square_512.p50_change_pct": -8})
    assert [(c.subject, c.outcome, c.expected_value) for c in checks] == [("square_512", "outside", -8.0)]


def test_the_case_a_name_names_does_not_decide_the_quantity():
    k = cr.fail_latency().kernels[0]
    k = k.model_copy(update={"cases": [k.cases[0].model_copy(update={"name": "spill_time"}), *k.cases[1:]]})
    (check,) = check_kernel(k, {"max_abs_err[spill_time]": 1e-3})
    assert (check.quantity, check.subject, check.outcome) == ("max_abs_err", "spill_time", "inside")


def test_a_speedup_is_read_as_the_p50_change_it_means():
    (check,) = check_kernel(cr.fail_latency().kernels[0], {"speedup@square_512": 1.01})
    assert check.quantity == "p50 change"
    assert round(check.expected_value or 0, 3) == -0.990  # 1/1.01 − 1, inside −2.9..+0.4
    assert check.outcome == "inside"


def test_a_speedup_that_names_no_case_is_the_same_p50_change_on_every_timed_case():
    """The agent's value is read per case: a second case is not held against the first case's converted change
    (it was: a speedup x1.05 became -4.76, then "a speedup must be above 0" on the next case)."""
    checks = check_kernel(cr.fail_latency().kernels[0], {"speedup": 1.05})
    assert [(c.subject, c.quantity, round(c.expected_value or 0, 2)) for c in checks] == [
        ("square_512", "p50 change", -4.76),
        ("ragged_200x328x264", "p50 change", -4.76),
    ]


def test_a_latency_in_ms_is_held_against_heads_p50_and_its_interval_in_ms():
    (check,) = check_kernel(cr.fail_latency().kernels[0], {"latency_p50_ms[ragged_200x328x264]": 4.44})
    assert check.unit == "ms"
    assert check.measured == round(4.0 * 1.1053, 6)
    assert (check.low, check.high) == (round(4.0 * 1.0973, 6), round(4.0 * 1.12, 6))
    assert check.outcome == "inside"


def test_resources_are_held_against_the_exact_figures_of_ptxas_and_the_occupancy_table():
    k = cr.fail_latency().kernels[0]  # two functions: 215 and 223 registers, no spill, 98,304 B dynamic smem, 12.5 %
    checks = check_kernel(k, {"register_spill_bytes": 0, "registers": 215, "smem_bytes": 98_304, "occupancy": "12.5%"})
    outcomes = [(c.quantity, c.outcome) for c in checks]
    assert outcomes == [
        ("spill bytes", "inside"),
        ("spill bytes", "inside"),
        ("registers", "inside"),
        ("registers", "outside"),
        ("shared memory", "inside"),
        ("shared memory", "inside"),
        ("occupancy", "inside"),
        ("occupancy", "inside"),
    ]
    assert all(c.subject.endswith("(sm_90a)") for c in checks)


def test_an_expectation_nothing_measured_matches_is_not_measured_with_the_reason():
    checks = check_kernel(cr.fail_latency().kernels[0], {"tflops": 140, "max_abs_err": "small", "p50@gemm_4096": -3})
    assert [(c.metric, c.outcome) for c in checks] == [
        ("tflops", "not_measured"),
        ("max_abs_err", "not_measured"),
        ("p50@gemm_4096", "not_measured"),
    ]
    assert [phrase(c.note) if c.note else "" for c in checks] == [
        "no measured quantity has this name",
        "the expected value is not a number",
        "the case it names has no timed p50",  # gemm_4096 was skipped (no GPU)
    ]


def test_an_expected_error_is_a_ceiling():
    checks = check_kernel(cr.fail_latency().kernels[0], {"max_abs_err": 1e-2, "max_abs_err@square_512": 1e-6})
    assert [(c.subject, c.outcome) for c in checks] == [
        ("square_512", "inside"),
        ("ragged_200x328x264", "inside"),
        ("square_512", "outside"),  # 1.9e-05 measured
    ]


def test_the_checks_are_recomputed_from_the_merged_report():
    r = _with_expectations({"latency_p50@ragged_200x328x264": 11})
    assert r.agents[0].expectations[0].outcome == "inside"
    k = r.kernels[0].model_copy(
        update={"cases": [c.model_copy(update={"ci95_pct": [20.0, 25.0]}) for c in r.kernels[0].cases]}
    )
    again = attach(r.model_copy(update={"kernels": [k, *r.kernels[1:]]}))
    assert again.agents[0].expectations[0].outcome == "outside"
    assert Report.model_validate_json(again.to_json()) == again  # report.json carries them


def test_the_ledger_keeps_the_expected_and_the_measured_values(url):
    r = _with_expectations({"latency_p50@square_512": "-8%", "registers": 215, "tflops": 140})
    with open_ledger(url) as ledger:
        review_id = ledger.record_review(r)
        rows = ledger.expectations()
        assert {row.review_id for row in rows} == {review_id}
        first = rows[0]
        assert (first.domain, first.kernel, first.metric, json.loads(first.expected)) == (
            "deepgemm",
            "deepgemm_tile",
            "latency_p50@square_512",
            "-8%",
        )
        assert (first.expected_value, first.measured, first.low, first.high, first.unit, first.outcome) == (
            -8.0,
            -1.2,
            -2.9,
            0.4,
            "%",
            "outside",
        )
        checks = r.agents[0].expectations
        assert [(x.metric, x.subject, x.measured, x.outcome) for x in rows] == [
            (c.metric, c.subject, c.measured, c.outcome) for c in checks
        ]
        assert ledger.expectations(domain="flashmla") == []
        assert ledger.latest_review(r.head_sha) == r
