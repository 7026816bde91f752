"""report.json's JSON Schema: generated from the models, published in docs/, and every example report holds to it;
one field per fact (schema /3), and the reports written before it still read."""

from __future__ import annotations

import json
import subprocess
import sys
import typing
from pathlib import Path

import jsonschema
import pytest
from pydantic import BaseModel

from bot.config.manifest_tables import Case, Constraints
from bot.models.finding import Phrase
from bot.models.judging import CaseRun, Check
from bot.models.report import SCHEMA, CaseStatus, KernelReport, Report
from bot.models.schema import report_schema, schema_text
from bot.present.render import render_comment
from bot.present.status import acceptance_status
from bot.text.i18n import speaking
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


def _models(model: type[BaseModel], seen: set[type[BaseModel]] | None = None) -> set[type[BaseModel]]:
    """`model` and every model its fields hold, at any depth."""
    seen = set() if seen is None else seen
    if model in seen:
        return seen
    seen.add(model)
    hints = typing.get_type_hints(model)
    for name in model.model_fields:
        todo = [hints[name]]
        while todo:
            kind = todo.pop()
            todo.extend(typing.get_args(kind))
            if isinstance(kind, type) and issubclass(kind, BaseModel):
                _models(kind, seen)
    return seen


def test_no_report_model_holds_an_english_field_beside_a_phrase_of_the_same_fact():
    """Schema /3: one field per fact. The phrase is the data, the comment renders it (in English through
    bot.wording.messages, in the reader's language through bot.wording.spoken); no `X` in English beside `X_why`,
    no `reason`, `note` or `detail` beside a `why`. The judge's result too (`CaseRun`, what the gate reads)."""
    from bot.models.judging import CaseRun

    twins = []
    for model in sorted(_models(Report) | _models(CaseRun), key=lambda m: m.__name__):
        fields = set(model.model_fields)
        twins += [f"{model.__name__}.{f}" for f in sorted(fields) if f.endswith("_why")]
        twins += [f"{model.__name__}.{f}+why" for f in ("reason", "note", "detail") if f in fields and "why" in fields]
    assert twins == []


REPORT_2 = ROOT / "tests" / "data" / "report2"  # report.json texts opgate wrote at schema /2 (tests/comment_reports.py)


@pytest.mark.parametrize("name", sorted(p.stem for p in REPORT_2.glob("*.json")))
def test_a_report_2_reads_back_into_the_comment_its_report_renders(name: str):
    """A report.json written before schema /3 (its lines in English, each with its phrase beside it, or none) reads
    into the /3 models: each phrase under the plain name, else the English as written; the comment, in English and
    zh-CN, and the status are those of the report it was written from."""
    text = (REPORT_2 / f"{name}.json").read_text()
    assert json.loads(text)["schema"] == "opgate.report/2"
    old, now = Report.model_validate_json(text), written(getattr(cr, name)())  # its lines as report.json has them
    assert old.schema_ == "opgate.report/2" and now.schema_ == SCHEMA == "opgate.report/3"
    for locale in ("en", "zh-CN"):
        with speaking(locale):
            assert render_comment(old) == render_comment(now)
            assert render_comment(old, pr=cr.pr_for(old)) == render_comment(now, pr=cr.pr_for(now))
    assert acceptance_status(old) == acceptance_status(now)
    # the data too: the same phrases (the sum of several agents' reasons, never shown, was one English line at /2;
    # why base fails too was a line of an agent case's reasons, now `base_fails` beside them)
    kept = {
        "schema_": True,
        "agent": {"reason"},
        "kernels": {"__all__": {"agent_cases": {"cases": {"__all__": {"base_fails"}}}}},
    }
    assert old.model_dump(exclude=kept) == now.model_dump(exclude=kept)  # type: ignore[arg-type]
    assert Report.model_validate_json(old.to_json()) == old  # and it writes back as /3's fields


def test_a_report_2_line_without_its_phrase_reads_as_written():
    """An older report whose English line has no phrase beside it (or not one for each line): the line as written."""
    data = json.loads((REPORT_2 / "launch_lines.json").read_text())
    check = data["kernels"][0]["resource_check"]
    check["launch_notes"], check["launch_notes_why"] = ["a line of its own"], []
    agent = data["agents"][0] if data["agents"] else data["agent"]
    agent.update(reason="asked elsewhere", why=None, inputs=["the diff"], inputs_why=[])
    data["isolation"] = {"mode": "none", "reason": "no bwrap on this runner", "tool": None, "why": None}
    old = Report.model_validate(data)
    [notes] = [k.resource_check.launch_notes for k in old.kernels if k.resource_check is not None]
    assert [(p.key, p.params) for p in notes] == [("text", {"text": "a line of its own"})]
    shown = old.agents[0] if old.agents else old.agent
    assert shown.reason == Phrase.as_written("asked elsewhere") and shown.inputs == [Phrase.as_written("the diff")]
    assert old.isolation is not None and old.isolation.reason == Phrase.as_written("no bwrap on this runner")
