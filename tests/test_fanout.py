"""Fanning a review out (bot/review/fanout.py): parts merged, a missing one an error, each checked against the plan."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.errors import InputError
from bot.models.agent_report import AgentReport, ProposedCase
from bot.models.finding import Phrase
from bot.review import fanout
from bot.verdict.written import written
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
    assert "left no report" in written(report).kernels[1].reasons[0]
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
    offline = AgentReport(status="offline", domain="deepgemm", reason=Phrase.as_written("--offline"))
    part = _part(tmp_path / "part-deepgemm_tile", ["deepgemm_tile"], [offline])
    asked = _part(tmp_path / "agent-deepgemm_tile", [], [AgentReport(status="ok", domain="deepgemm", total_tokens=42)])
    report, _ = fanout.merge([part], BASE, HEAD, PR, agents=[asked])
    assert [a.status for a in report.agents] == ["ok"] and report.agent.total_tokens == 42


def _agent_part(folder: Path, agent: AgentReport | None, kernels: list[str] | None = None) -> Path:
    folder.mkdir()
    report = make_report()
    report.kernels = [k for k in report.kernels if k.name in (kernels if kernels is not None else ["deepgemm_tile"])]
    report.agents = [agent] if agent is not None else []
    (folder / "report.json").write_text(report.to_json())
    return folder


MATRIX = [ProposedCase(name="tail_15", shape={"m": 47, "n": 16}), ProposedCase(name="huge", shape={"m": 5000})]


def test_agent_cases_reads_only_the_parts_test_matrix_and_who_proposed_it(tmp_path: Path) -> None:
    """`opgate review --agent-cases agent-K/` (CI's review job): the matrix as proposed (base's bounds admit it later)
    and the agent's model; nothing else of the part reaches the review."""
    asked = AgentReport(
        status="ok", domain="deepgemm", kernel="deepgemm_tile", model="deepseek-v4", test_matrix=MATRIX,
        risk_notes=["not read by the review job"], candidate_patch="--- a/x\n+++ b/x\n",
    )  # fmt: skip
    part = _agent_part(tmp_path / "agent-deepgemm_tile", asked)
    matrix = fanout.read_agent_cases(part, "deepgemm_tile", BASE, HEAD)
    assert matrix == fanout.AgentMatrix(cases=MATRIX, proposer="deepseek-v4")
    assert set(fanout.AgentMatrix.model_fields) == {"cases", "proposer", "not_run"}  # data: no patch, no command
    empty = _agent_part(tmp_path / "agent-empty", asked.model_copy(update={"test_matrix": []}))
    assert fanout.read_agent_cases(empty, "deepgemm_tile", BASE, HEAD) == fanout.AgentMatrix(proposer="deepseek-v4")


def test_an_agent_that_did_not_answer_leaves_no_matrix_and_says_why(tmp_path: Path) -> None:
    failed = AgentReport(
        status="error", domain="deepgemm", kernel="deepgemm_tile", reason=Phrase.as_written("gateway 502 twice")
    )
    matrix = fanout.read_agent_cases(_agent_part(tmp_path / "agent-a", failed), "deepgemm_tile", BASE, HEAD)
    assert matrix.cases == [] and matrix.not_run == (
        "the agent's review did not answer (error: gateway 502 twice): no test matrix to run"
    )
    nobody = fanout.read_agent_cases(_agent_part(tmp_path / "agent-b", None), "deepgemm_tile", BASE, HEAD)
    assert nobody.not_run == "the agent part holds no agent review of deepgemm_tile: no test matrix to run"


def test_a_missing_or_foreign_agent_part_is_bad_input(tmp_path: Path) -> None:
    asked = AgentReport(status="ok", domain="deepgemm", kernel="deepgemm_tile", model="m", test_matrix=MATRIX)
    with pytest.raises(InputError, match=r"--agent-cases .*agent-none: no such folder \(the --out folder of"):
        fanout.read_agent_cases(tmp_path / "agent-none", "deepgemm_tile", BASE, HEAD)
    (tmp_path / "agent-empty").mkdir()
    with pytest.raises(InputError, match=r"not an agent part: it holds no report\.json"):
        fanout.read_agent_cases(tmp_path / "agent-empty", "deepgemm_tile", BASE, HEAD)
    garbled = tmp_path / "agent-garbled"
    garbled.mkdir()
    (garbled / "report.json").write_text('{"schema": "opgate.report/2", "kernels": 7}')
    with pytest.raises(InputError, match="not an agent part: its part agent-garbled holds no readable opgate report"):
        fanout.read_agent_cases(garbled, "deepgemm_tile", BASE, HEAD)
    part = _agent_part(tmp_path / "agent-deepgemm_tile", asked)
    with pytest.raises(InputError, match=r"the agent part is of b2b2b2b2b2\.\.\.a1a1a1a1a1, not b2b2b2b2b2\.\.\.c3c3"):
        fanout.read_agent_cases(part, "deepgemm_tile", BASE, OLD)
    with pytest.raises(InputError, match="an agent part of deepgemm_tile, not of flashmla_decode"):
        fanout.read_agent_cases(part, "flashmla_decode", BASE, HEAD)
    big = asked.model_copy(update={"test_matrix": [ProposedCase(name=f"c{i}") for i in range(31)]})
    with pytest.raises(InputError, match="its test matrix holds 31 entries"):
        fanout.read_agent_cases(_agent_part(tmp_path / "agent-big", big), "deepgemm_tile", BASE, HEAD)


def test_the_review_refuses_a_bad_agent_cases_input_before_anything_is_built(opgate, kernel_repo, tmp_path) -> None:
    """Exit 2 with one clear line, and no report: a missing part, a part without --offline --kernel, a part beside
    --merge; nothing was checked out or built (the review never started)."""
    kernel_repo.edit("kernels/deepgemm_tile/tile_config.json", '"tile_n": 128', '"tile_n": 256')
    head = kernel_repo.commit()
    review = ["review", "--repo", str(kernel_repo.path), "--base", kernel_repo.base, "--head", head]
    missing = opgate(*review, "--offline", "--kernel", "deepgemm_tile", "--agent-cases", str(tmp_path / "agent-x"))
    assert missing.code == 2 and "--agent-cases" in missing.stderr and "no such folder" in missing.stderr
    online = opgate(*review, "--kernel", "deepgemm_tile", "--agent-cases", str(tmp_path / "agent-x"))
    assert online.code == 2 and "give --offline and --kernel K" in online.stderr
    merged = opgate(*review, "--merge", "--agent-cases", str(tmp_path / "agent-x"))
    assert merged.code == 2 and "not with --plan, --agent-only or --merge" in merged.stderr
    both = opgate(*review, "--agent-cases", "a", "--no-agent-cases", "why")
    assert both.code == 2 and "not allowed with argument" in both.stderr
    assert not (tmp_path / "out" / "report.json").exists()


def test_without_an_agent_part_the_comment_says_the_agent_cases_were_not_run_and_why(opgate, kernel_repo) -> None:
    """CI's review job whose kernel's agent job left no part: `--no-agent-cases WHY` puts WHY on the kernel's agent
    cases (report.json and the comment), never a silent drop. A change that fails statically: nothing is built."""
    kernel_repo.edit("kernels/deepgemm_tile/tile_config.json", '"tile_m": 128', '"tile_m": 96')
    head = kernel_repo.commit()
    why = "the agent jobs ended failure and left no agent part for deepgemm_tile: the agent's test matrix is not run"
    run = opgate(
        "review", "--repo", str(kernel_repo.path), "--base", kernel_repo.base, "--head", head, "--offline",
        "--kernel", "deepgemm_tile", "--no-agent-cases", why,
    )  # fmt: skip
    assert run.code == 1, run.stdout + run.stderr
    block = run.kernel("deepgemm_tile")["agent_cases"]
    assert (block["proposed"], block["cases"], block["refused"], block["note"]) == (0, [], [], why)
    assert f"{why}." in run.comment and "**Agent cases**" in run.comment
