"""`opgate tune` against a scripted agent on the local gateway: feedback, repeats, malformed replies and each stop.

Every candidate here is refused by the static checks or never reaches the judge, so nothing is built; the
slow tests in test_tune_e2e.py judge real candidates.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from bot.ledger import Ledger
from bot.mainline.record import CaseFigure, MainCommit, ResourceFigure
from bot.mainline.store import History
from bot.tune.space import file_patch
from tests.conftest import KERNELS, git
from tests.gateway import Gateway, Step, completion

CONFIG = "kernels/deepgemm_tile/tile_config.json"
BASE_TEXT = (KERNELS / "deepgemm_tile" / "tile_config.json").read_text()
BASE = json.loads(BASE_TEXT)
KEY = "sk-canary-tune-1f2e3d4c5b6a"


def reply(config: dict | None, *, pretty: bool = False, prompt: int = 1234) -> dict:
    """A well-formed answer proposing `config` (None: no candidate)."""
    patch = None
    if config is not None:
        text = json.dumps(config, indent=2) + "\n" if pretty else json.dumps(config) + "\n"
        patch = file_patch(CONFIG, BASE_TEXT, text)
    body = {"candidate_patch": patch, "risk_notes": ["tile sizes change smem"], "local_commands": [],
            "expected_metrics": {"speedup": 1.05}}  # fmt: skip
    return completion(json.dumps(body), prompt=prompt)


@pytest.fixture
def gateway(httpserver) -> Gateway:
    return Gateway(httpserver)


def tune(opgate, repo, gateway: Gateway, *args: str, env: dict[str, str] | None = None, tmp: Path):
    full = {"TAOTOKEN_API_KEY_DEEPGEMM_AGENT": KEY, "TAOTOKEN_BASE_URL": gateway.url, "OPGATE_AGENT_BACKOFF_S": "0"}
    return opgate("tune", "deepgemm_tile", "--repo", str(repo.path), "--out", str(tmp / "tune"), *args,
                  env={**full, **(env or {})}, timeout=600)  # fmt: skip


def result(tmp: Path) -> dict:
    return json.loads((tmp / "tune" / "tune.json").read_text())


def ledger_rows(tmp: Path, sql: str) -> list[dict]:
    db = sqlite3.connect(tmp / "ledger.sqlite")
    db.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in db.execute(sql)]
    finally:
        db.close()


def test_the_agent_sees_every_measurement_and_repeats_are_answered_from_the_table(
    opgate, kernel_repo, gateway, tmp_path
):
    invalid = {**BASE, "tile_m": 96}
    gateway.push(
        reply(invalid),  # round 1: an invalid tile, refused by the static checks (no build)
        completion("I would try tile_n=256 next."),  # round 2: not JSON
        completion('{"candidate_patch": "not a diff"}'),  # its repair: still unusable
        reply(invalid, pretty=True),  # round 3: the same candidate written differently
        reply(BASE, pretty=True),  # round 4: the current config
        reply(None),  # round 5: nothing to propose
    )
    run = tune(opgate, kernel_repo, gateway, "--rounds", "5", env={"OPGATE_TUNE_PLATEAU_ROUNDS": "9"}, tmp=tmp_path)
    assert run.code == 0, run.stderr
    r = result(tmp_path)
    assert r["stop"] == {"kind": "rounds", "detail": "--rounds 5 reached", "handover": False}
    assert "stop: rounds: --rounds 5 reached" in run.stdout
    assert [e["outcome"] for e in r["events"]] == ["judged", "malformed", "repeat", "base", "no_candidate"]
    [refused] = r["trials"]
    assert refused["config"]["tile_m"] == 96 and refused["verdict"] == "fail" and refused["cases"] == []
    assert any("tile_m=96 not in {64,128,256}" in reason for reason in refused["reasons"])
    assert r["proposal"] is None and "no candidate beat base" in r["not_proposed"]
    # one request per round and one repair; each later prompt carries what the judge said
    prompts = [b["messages"][1]["content"] for b in gateway.bodies]
    assert len(prompts) == 6
    assert "tile_m=96 tile_n=128 tile_k=64 | fail" in prompts[1] and "not in {64,128,256}" in prompts[1]
    assert "round 2: your reply could not be used" in prompts[3]
    assert "tile_m=96 tile_n=128 tile_k=64 again, answered from round 1" in prompts[4]
    assert "<<<DATA" in prompts[0] and "(none yet)" in prompts[0]
    # the review's materials, with an empty ledger: base's figures are not available, and the prompt says why
    assert "base figures: not available — main's history in this ledger holds no figures of deepgemm_tile" in prompts[0]
    assert "Gate limits (base's kernel.toml [constraints])" in prompts[0] and "- square_512: cpu" in prompts[0]
    # tokens: every request a `tune` row of this run, distinguishable from review rows
    rows = ledger_rows(tmp_path, "SELECT purpose, tuning_run, total_tokens, status FROM operator_agent_usage")
    assert len(rows) == 6 and {(x["purpose"], x["tuning_run"]) for x in rows} == {("tune", r["run_id"])}
    assert r["tokens"]["total_tokens"] == 6 * 1555 and r["tokens"]["requests"] == 6
    assert "round 3/5 (agent) repeat tile_m=96" in run.stderr and "tokens left" in run.stderr
    tables = ledger_rows(tmp_path, "SELECT outcome FROM tuning_rounds ORDER BY seq")
    assert [t["outcome"] for t in tables] == [e["outcome"] for e in r["events"]]
    assert (tmp_path / "tune" / "tune.md").read_text().count("| 1 | agent | `tile_m=96 tile_n=128 tile_k=64` |") == 1


@pytest.mark.parametrize(
    ("args", "env", "why"),
    [
        (("--tokens", "100000"), {"OPGATE_BUDGET_WEEKLY_DEEPGEMM": "6000"}, "weekly token budget of deepgemm"),
        (("--tokens", "3000"), {"OPGATE_AGENT_MAX_TOKENS": "256"}, "the run's token budget of 3,000 (--tokens)"),
    ],
    ids=["weekly", "run"],
)
def test_a_budget_refusal_mid_loop_stops_cleanly_and_hands_over_to_a_person(
    opgate, kernel_repo, gateway, tmp_path, args, env, why
):
    prompt = 5000 if "OPGATE_BUDGET_WEEKLY_DEEPGEMM" in env else 1234
    gateway.push(reply({**BASE, "tile_m": 96}, prompt=prompt), reply({**BASE, "tile_n": 256}))
    run = tune(opgate, kernel_repo, gateway, *args, env=env, tmp=tmp_path)
    assert run.code == 0, run.stderr
    r = result(tmp_path)
    assert len(gateway.requests) == 1  # the second round was refused before any request
    assert r["stop"]["kind"] == "budget" and why in r["stop"]["detail"] and r["stop"]["handover"]
    assert "hand over to a person: review the search space" in run.stdout
    assert [e["outcome"] for e in r["events"]] == ["judged", "over_budget"]
    refused = ledger_rows(
        tmp_path, "SELECT purpose, total_tokens FROM operator_agent_usage WHERE status = 'over_budget'"
    )
    assert refused == [{"purpose": "tune", "total_tokens": 0}]
    open_ = ledger_rows(tmp_path, "SELECT COUNT(*) AS n FROM agent_reservations WHERE state = 'reserved'")
    assert open_ == [{"n": 0}]  # nothing left reserved
    assert ledger_rows(tmp_path, "SELECT state, stop, handover FROM tuning_runs") == [
        {"state": "done", "stop": "budget", "handover": 1}
    ]


def test_a_plateau_stops_the_loop(opgate, kernel_repo, gateway, tmp_path):
    gateway.push(reply(None), reply(None), reply(None))
    run = tune(opgate, kernel_repo, gateway, env={"OPGATE_TUNE_PLATEAU_ROUNDS": "2"}, tmp=tmp_path)
    assert run.code == 0, run.stderr
    stop = result(tmp_path)["stop"]
    assert stop["kind"] == "plateau" and "has not improved by ≥ 1% over the last 2 rounds" in stop["detail"]
    assert len(gateway.requests) == 2


def test_a_gateway_failure_is_exit_3_and_the_run_resumes_later(opgate, kernel_repo, gateway, tmp_path):
    gateway.push(Step(status=401, body={"error": {"message": "bad key", "type": "auth"}}))
    run = tune(opgate, kernel_repo, gateway, tmp=tmp_path)
    assert run.code == 3 and "TAOTOKEN_API_KEY_DEEPGEMM_AGENT" in run.stderr and KEY not in run.stderr + run.stdout
    assert ledger_rows(tmp_path, "SELECT state FROM tuning_runs") == [{"state": "running"}]
    gateway.push(reply(None), reply(None), reply(None))
    again = tune(opgate, kernel_repo, gateway, tmp=tmp_path)
    assert again.code == 0, again.stderr
    assert "resuming run" in again.stderr and result(tmp_path)["resumed"] is True


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        ((), {"TAOTOKEN_API_KEY_DEEPGEMM_AGENT": ""}, "TAOTOKEN_API_KEY_DEEPGEMM_AGENT is not set"),
        (
            ("--strategy", "exhaustive"),
            {"OPGATE_TUNE_MAX_SPACE": "8"},
            "27 allowed configs, over OPGATE_TUNE_MAX_SPACE=8",
        ),
        (("--rounds", "0"), {}, "--rounds must be at least 1"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(opgate, kernel_repo, gateway, tmp_path, args, env, message):
    run = tune(opgate, kernel_repo, gateway, *args, env=env, tmp=tmp_path)
    assert run.code == 2 and message in run.stderr and "Traceback" not in run.stderr


def test_an_unknown_kernel_names_the_kernels_there_are(opgate, kernel_repo, tmp_path):
    run = opgate("tune", "no_such", "--repo", str(kernel_repo.path))
    assert run.code == 2 and "no kernel 'no_such'" in run.stderr and "deepgemm_tile" in run.stderr


def test_a_new_run_on_the_same_base_replays_cached_replies_and_known_trials_for_free(
    opgate, kernel_repo, gateway, tmp_path
):
    gateway.push(reply({**BASE, "tile_m": 96}))
    first = tune(opgate, kernel_repo, gateway, "--rounds", "1", tmp=tmp_path)
    assert first.code == 0, first.stderr
    again = tune(opgate, kernel_repo, gateway, "--rounds", "1", tmp=tmp_path)
    assert again.code == 0, again.stderr
    assert len(gateway.requests) == 1  # the same prompt was answered from the ledger's reply cache
    r = result(tmp_path)
    assert not r["resumed"] and [e["outcome"] for e in r["events"]] == ["reused"]
    assert r["tokens"]["total_tokens"] == 0 and "judging" not in again.stderr
    cached = ledger_rows(tmp_path, "SELECT status, purpose, tuning_run FROM operator_agent_usage WHERE cached = 1")
    assert cached == [{"status": "cached", "purpose": "tune", "tuning_run": r["run_id"]}]


def test_a_candidates_test_matrix_reaches_its_review_and_base_decides_whether_it_runs(
    opgate, kernel_repo, gateway, tmp_path
):
    """The tune agent's reply carries a test matrix: the candidate's review holds it as its agent cases (deepgemm_tile
    declares no [agent_cases], so none run and the trial's report says why)."""
    body = json.loads(reply({**BASE, "tile_m": 96})["choices"][0]["message"]["content"])
    body["test_matrix"] = [{"name": "edge_m", "shape": {"m": 255, "n": 256, "k": 64}}]
    gateway.push(completion(json.dumps(body)), reply(None))
    run = tune(opgate, kernel_repo, gateway, "--rounds", "2", tmp=tmp_path)
    assert run.code == 0, run.stderr
    [report] = [json.loads(p.read_text()) for p in (tmp_path / "tune" / "trials").glob("*/report.json")]
    [kernel] = report["kernels"]
    assert kernel["agent_cases"]["agent"] == "deepseek-v4" and kernel["agent_cases"]["proposed"] == 1
    assert kernel["agent_cases"]["note"].startswith("base's kernel.toml declares no [agent_cases]")


def test_the_tune_prompt_holds_the_cases_and_bases_figures_from_main_history_on_every_turn(
    opgate, kernel_repo, gateway, tmp_path
):
    """The review's materials through the same code (bot/agent/materials.py, prompt.fill): base's limits, the cases
    with their probes, base's per-case p50 and interval and resources from main's history, and on the later turn the
    trials so far beside them."""
    head = git(kernel_repo.path, "rev-parse", "HEAD")
    with Ledger(tmp_path / "ledger.sqlite") as ledger:
        commit = MainCommit(sha=head, base_sha="c" * 40, committed_at="2026-12-01T10:00:00+00:00")
        figures = [
            CaseFigure(
                sha=head, base_sha="c" * 40, kernel="deepgemm_tile", domain="deepgemm", case_name="square_512",
                device="cpu", device_name="cpu", p50_ms=13.1, base_p50_ms=13.0, regression_pct=0.8, ci_low_pct=-1.0,
                ci_high_pct=2.0, max_abs_err=0.0039, verdict="pass", committed_at=commit.committed_at,
            )
        ]  # fmt: skip
        resources = [
            ResourceFigure(sha=head, kernel="deepgemm_tile", function="gemm_bf16_kernel", arch="sm_90a",
                           registers=96, threads=256, committed_at=commit.committed_at)
        ]  # fmt: skip
        History(ledger).record(commit, figures, resources)
    gateway.push(reply({**BASE, "tile_m": 96}), reply(None))
    run = tune(opgate, kernel_repo, gateway, "--rounds", "2", env={"OPGATE_TUNE_PLATEAU_ROUNDS": "9"}, tmp=tmp_path)
    assert run.code == 0, run.stderr
    first, second = (b["messages"][1]["content"] for b in gateway.bodies)
    for text in (first, second):
        assert f"Base's measured figures for deepgemm_tile (main at {head[:12]}, base's own commit" in text
        assert "- square_512 on cpu: p50 13.1 ms (95% interval 12.87..13.26 ms), max_abs_err 0.0039, pass" in text
        assert "- gemm_bf16_kernel: 96 registers" in text and "resources on sm_90a" in text
        assert "Cases the judge runs" in text and "- ragged_200x328x264: cpu" in text and "Boundary probes" in text
        assert "not available" not in text and "Left out of this prompt" not in text
    assert "(none yet)" in first and "tile_m=96 tile_n=128 tile_k=64 | fail" in second  # the trials so far
