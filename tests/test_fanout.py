"""Fanning a review out (bot/review/fanout.py): parts merged, a missing one an error, each checked against the plan."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.errors import InputError
from bot.models.report import AgentReport
from bot.review import fanout
from tests.test_accept import BASE, HEAD, OLD, PR, make_report


def test_merge_joins_parts_and_a_missing_part_is_an_error(tmp_path: Path) -> None:
    good = tmp_path / "part-deepgemm_tile"
    good.mkdir()
    part_report = make_report()
    part_report.kernels = part_report.kernels[:1]
    part_report.agents = [AgentReport(status="ok", domain="deepgemm", requests=1, total_tokens=7)]
    (good / "report.json").write_text(part_report.to_json())
    (good / fanout.UNSEEN_FILE).write_text('["kernels/deepgemm_tile/big.cu"]')
    (tmp_path / "part-flashmla_decode").mkdir()
    parts = [fanout.read_part(tmp_path / "part-deepgemm_tile"), fanout.read_part(tmp_path / "part-flashmla_decode")]
    report, unseen = fanout.merge(parts, BASE, HEAD, PR)
    assert [(k.name, k.verdict) for k in report.kernels] == [("deepgemm_tile", "pass"), ("flashmla_decode", "error")]
    assert report.verdict == "error" and report.agent.total_tokens == 7 and unseen == ["kernels/deepgemm_tile/big.cu"]
    assert "left no report" in report.kernels[1].reasons[0]
    with pytest.raises(InputError, match=r"reviewed b2b2b2b2b2\.\.\.a1a1a1a1a1, not b2b2b2b2b2\.\.\.c3c3"):
        fanout.merge(parts[:1], BASE, OLD, PR)


def _part(folder: Path, kernels: list[str], agents: list[AgentReport] | None = None) -> fanout.Part:
    folder.mkdir()
    report = make_report()
    report.kernels = [k for k in report.kernels if k.name in kernels]
    report.agents = agents or []
    (folder / "report.json").write_text(report.to_json())
    return fanout.read_part(folder, prefix=fanout.AGENT_PREFIX if folder.name.startswith("agent-") else "part-")


def test_a_part_is_untrusted_data_checked_against_the_plan(tmp_path: Path) -> None:
    plan = tmp_path / "plan.json"
    plan.write_text(fanout.matrix([fanout.PlannedKernel(kernel="deepgemm_tile", domain="deepgemm")]))
    planned = fanout.read_plan(plan)
    both = _part(tmp_path / "part-deepgemm_tile", ["deepgemm_tile", "flashmla_decode"])
    with pytest.raises(InputError, match="reports other kernels too: flashmla_decode"):
        fanout.merge([both], BASE, HEAD, PR, planned=planned)
    stranger = _part(tmp_path / "part-flashmla_decode", ["flashmla_decode"])
    with pytest.raises(InputError, match="'flashmla_decode' is not a planned kernel"):
        fanout.merge([stranger], BASE, HEAD, PR, planned=planned)
    wrong_domain = _part(tmp_path / "agent-deepgemm_tile", [], [AgentReport(status="ok", domain="flashmla")])
    good = _part(tmp_path / "part-x", ["deepgemm_tile"])
    good = good.model_copy(update={"kernel": "deepgemm_tile"})
    with pytest.raises(InputError, match="agent domain 'flashmla' is not deepgemm_tile's 'deepgemm'"):
        fanout.merge([good], BASE, HEAD, PR, agents=[wrong_domain], planned=planned)
    with pytest.raises(InputError, match="not a plan matrix"):
        fanout.read_plan(tmp_path / "part-x" / "report.json")


def test_agent_parts_replace_the_offline_agent_reviews_of_the_parts(tmp_path: Path) -> None:
    offline = AgentReport(status="offline", domain="deepgemm", reason="--offline")
    part = _part(tmp_path / "part-deepgemm_tile", ["deepgemm_tile"], [offline])
    asked = _part(tmp_path / "agent-deepgemm_tile", [], [AgentReport(status="ok", domain="deepgemm", total_tokens=42)])
    report, _ = fanout.merge([part], BASE, HEAD, PR, agents=[asked])
    assert [a.status for a in report.agents] == ["ok"] and report.agent.total_tokens == 42
