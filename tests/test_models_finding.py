"""The Finding model: what the gates make, as JSON and back, with its place, value, limit and unit."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from bot.config.manifest_tables import Case, Constraints
from bot.models.finding import Finding, Gate, Outcome
from bot.models.judging import CaseRun, Check
from bot.models.report import CaseStatus, Resource
from bot.verdict.gate import case_verdict
from bot.verdict.gate_resources import resource_findings
from bot.verdict.static import tunable_findings


def test_a_finding_round_trips_through_json_with_its_place_and_numbers():
    f = Finding(gate=Gate.resources, outcome=Outcome.fail, key="resources.spill", kernel="k", arch="sm_90a",
                function="k<1>", file="kernels/k/k.cu", line=12, value=16, limit=0, unit="B",
                params={"function": "k<1>", "bytes": 16, "stores": 8, "loads": 8})  # fmt: skip
    assert Finding.model_validate_json(f.model_dump_json()) == f
    assert f.model_dump(mode="json")["gate"] == "resources"


def test_a_finding_refuses_an_unknown_gate_outcome_or_field():
    with pytest.raises(ValidationError):
        Finding(gate="vibes", outcome=Outcome.fail, key="x")  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        Finding(gate=Gate.run, outcome="maybe", key="x")  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        Finding.model_validate({"gate": "run", "outcome": "fail", "key": "x", "colour": "red"})


def test_the_gates_fill_in_value_limit_unit_function_and_file_where_they_know_them():
    spill = Resource(function="k<1>", registers=64, spill_bytes=16, spill_store_bytes=8, spill_load_bytes=8)
    failures, _ = resource_findings([spill], [], Constraints(max_registers=32))
    assert [(f.key, f.function, f.value, f.limit, f.unit) for f in failures] == [
        ("resources.spill", "k<1>", 16, 0, "B"),
        ("resources.registers", "k<1>", 64, 32, "registers"),
    ]
    [static] = tunable_findings({"tile": 3}, {"tile": [1, 2]}, "kernels/k/tile.json")
    assert (static.gate, static.file, static.key) == (Gate.static, "kernels/k/tile.json", "static.tunable_value")
    case = case_verdict(
        Case(name="c"), Constraints(), CaseRun(status=CaseStatus.ok, checks={"head": Check(max_abs_err=0.5)})
    )
    [wrong] = case.findings
    assert (wrong.gate, wrong.case, wrong.value, wrong.limit) == (Gate.correctness, "c", 0.5, case.tolerance)
