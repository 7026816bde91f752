"""report.json's JSON Schema: generated from the models, published in docs/, and every example report holds to it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

from bot.config.manifest_tables import Case, Constraints
from bot.models.judging import CaseRun, Check
from bot.models.report import SCHEMA, CaseStatus, KernelReport, Report
from bot.models.schema import report_schema, schema_text
from bot.verdict.gate import Policy, case_verdict, kernel_verdict
from bot.verdict.written import written
from tests import comment_reports as cr
from tests.conftest import ROOT

SCHEMA_FILE = "docs/report.schema.json"  # the published schema
VALIDATOR = jsonschema.Draft202012Validator(report_schema())


def _problems(data: object) -> list[str]:
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in VALIDATOR.iter_errors(data)]


def test_the_published_schema_is_the_models_schema():
    jsonschema.Draft202012Validator.check_schema(report_schema())
    published = (ROOT / SCHEMA_FILE).read_text()
    assert published == schema_text(), f"regenerate it: python -m bot.models.schema > {SCHEMA_FILE}"
    run = subprocess.run([sys.executable, "-m", "bot.models.schema"], capture_output=True, text=True, cwd=ROOT)
    assert run.returncode == 0 and run.stdout == published


@pytest.mark.parametrize("name", sorted(cr.REPORTS))
def test_every_example_report_holds_to_the_schema(name: str):
    data = json.loads(cr.REPORTS[name]().to_json())
    assert data["schema"] == SCHEMA
    assert _problems(data) == []


def _gated() -> Report:
    """A report as the gate makes it: a wrong case and a slow one, each with its findings."""
    case = Case(name="c", shape={"n": 8})
    wrong = CaseRun(status=CaseStatus.ok, checks={"head": Check(max_abs_err=0.5, nan_inf=True)})
    kernel = KernelReport(name="k", domain="d", changed=True, verdict="pass")
    judged = kernel_verdict(kernel, [], [case_verdict(case, Constraints(), wrong)], Constraints(), Policy())
    return cr.report([judged])


def test_a_gated_report_carries_its_findings_and_holds_to_the_schema():
    data = json.loads(_gated().to_json())
    kernel = data["kernels"][0]
    assert [f["gate"] for f in kernel["findings"]] == ["stability", "correctness"]
    assert kernel["findings"][0]["case"] == "c" and kernel["cases"][0]["findings"][0]["key"] == "stability.nan_inf"
    assert _problems(data) == []


def test_the_schema_rejects_what_the_models_reject():
    data = json.loads(_gated().to_json())
    data["kernels"][0]["findings"][0]["gate"] = "vibes"  # no such gate
    del data["kernels"][0]["findings"][1]["key"]
    assert len(_problems(data)) == 2


def test_an_opgate_report_1_still_reads_and_holds_to_the_schema():
    data = json.loads(written(cr.fail_latency()).to_json())
    data["schema"] = "opgate.report/1"
    for k in data["kernels"]:
        k.pop("findings")
        for c in k["cases"]:
            c.pop("findings")
    assert _problems(data) == []
    old = Report.model_validate(data)
    assert old.kernels[0].reasons and not old.kernels[0].findings


def test_the_reports_folder_holds_to_the_schema():
    """What `opgate review` left in reports/ (git-ignored; nothing to check on a fresh checkout)."""
    found = sorted(Path(ROOT / "reports").rglob("report.json"))
    for path in found:
        data = json.loads(path.read_text())
        if data.get("schema") == SCHEMA:
            assert _problems(data) == [], path
