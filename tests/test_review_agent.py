"""The agent path of `opgate review` against a local OpenAI-compatible server (pytest-httpserver)."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest
from werkzeug import Request, Response

from bot.ledger import Ledger
from bot.models.finding import Phrase
from bot.wording.messages import phrase
from tests.conftest import KernelRepo, make_repo
from tests.gateway import Gateway, completion

pytestmark = pytest.mark.slow

CANARY = "sk-canary-7f3a9c1e5b2d4f6a8c0e"
CONFIG = "kernels/deepgemm_tile/tile_config.json"

REVIEW_JSON = {
    "candidate_patch": "--- a/kernels/deepgemm_tile/tile_config.json\n+++ b/kernels/deepgemm_tile/tile_config.json\n",
    "risk_notes": ["tile_n=256 doubles the accumulator; watch ![pixel](https://evil.example/p.png) registers"],
    "local_commands": ["opgate review --base main --head HEAD --offline"],
    "expected_metrics": {"latency_p50_ms": 0.2, "max_abs_err": 0.001},
}


def said(written: dict) -> str:
    """A phrase report.json holds (schema /3: the phrase, no English twin), in English."""
    return phrase(Phrase.model_validate(written))


def with_key(
    opgate, kernel_repo, head: str, base_url: str, *extra: str, key_variable: str = "TAOTOKEN_API_KEY_DEEPGEMM_AGENT"
):
    """`opgate review` of base..head with a canary key in `key_variable` and the gateway at `base_url`."""
    return opgate(
        "review",
        "--repo",
        str(kernel_repo.path),
        "--base",
        kernel_repo.base,
        "--head",
        head,
        *extra,
        env={key_variable: CANARY, "TAOTOKEN_BASE_URL": base_url},
    )


def run_with_agent(opgate, kernel_repo, httpserver, reply: dict):
    seen: list[Request] = []

    def handler(request: Request) -> Response:
        seen.append(request)
        return Response(json.dumps(reply), content_type="application/json")

    httpserver.expect_request("/v1/chat/completions", method="POST").respond_with_handler(handler)
    kernel_repo.edit(CONFIG, '"tile_m": 128', '"tile_m": 96')  # fails statically: no build needed
    head = kernel_repo.commit()
    run = with_key(opgate, kernel_repo, head, httpserver.url_for("/").rstrip("/"))
    return run, seen, head


@pytest.mark.untimed  # a static failure: nothing is built or timed
def test_agent_usage_reaches_the_ledger_and_the_comment(opgate, kernel_repo, httpserver, tmp_path):
    reply = completion(json.dumps(REVIEW_JSON))
    run, seen, head = run_with_agent(opgate, kernel_repo, httpserver, reply)
    assert run.code == 1, run.stderr  # the gate decides, whatever the agent says
    assert len(seen) == 1
    request = seen[0]
    assert request.headers["Authorization"] == f"Bearer {CANARY}"
    body = request.get_json()
    assert body["model"] == "YOUR_MODEL_ID" and body["temperature"] == pytest.approx(0.1)
    assert 'tile_m": 96' in body["messages"][1]["content"]  # the diff travels as data
    agent = run.report["agent"]
    assert agent["status"] == "ok" and agent["requests"] == 1
    assert (agent["prompt_tokens"], agent["completion_tokens"], agent["total_tokens"]) == (1234, 321, 1555)
    assert agent["risk_notes"] == REVIEW_JSON["risk_notes"]
    assert "| **this review** | 1 | 1234 | 321 | 1555 |" in run.comment
    assert "![pixel]" not in run.comment and "https://evil" not in run.comment  # no tracking image
    db = sqlite3.connect(tmp_path / "ledger.sqlite")
    db.row_factory = sqlite3.Row
    row = dict(db.execute("SELECT * FROM operator_agent_usage").fetchone())
    db.close()
    assert row["task_id"] == "deepgemm_tile_acceptance_001" and row["model_name"] == "deepseek-v4"
    assert (row["prompt_tokens"], row["completion_tokens"], row["total_tokens"]) == (1234, 321, 1555)
    assert row["request_id"] == reply["id"] and row["domain"] == "deepgemm"
    assert row["head_sha"] == head and row["key_fingerprint"].startswith("sha256:")
    for text in (run.stdout, run.stderr, run.comment, json.dumps(run.report), json.dumps(row)):
        assert CANARY not in text
    candidate = run.out / "agent_candidates" / f"{head[:12]}_deepgemm_tile.json"
    assert json.loads(candidate.read_text())["expected_metrics"]["max_abs_err"] == 0.001


@pytest.mark.untimed  # a static failure: nothing is built or timed
def test_a_reply_that_is_not_json_is_an_agent_error_and_the_gates_still_decide(opgate, kernel_repo, httpserver):
    run, _, head = run_with_agent(opgate, kernel_repo, httpserver, completion("Sure! The tile looks fine."))
    assert run.code == 1
    assert run.report["agent"]["status"] == "error"
    assert "not valid JSON" in said(run.report["agent"]["reason"])
    assert run.kernel("deepgemm_tile")["verdict"] == "fail"
    assert run.report["agent"]["total_tokens"] == 2 * 1555  # the reply and its one repair request are counted
    kept = run.out / "agent_candidates" / f"{head[:12]}_deepgemm_tile.rejected.txt"
    assert kept.read_text() == "Sure! The tile looks fine."


@pytest.mark.untimed  # a static failure: nothing is built or timed
def test_without_a_key_the_agent_is_offline_and_the_comment_says_which_variable(opgate, kernel_repo):
    kernel_repo.edit(CONFIG, '"tile_m": 128', '"tile_m": 96')
    run = opgate("review", "--repo", str(kernel_repo.path), "--base", kernel_repo.base, "--head", kernel_repo.commit())
    assert run.report["agent"]["status"] == "offline"
    assert "TAOTOKEN_API_KEY_DEEPGEMM_AGENT is not set" in run.comment


@pytest.mark.untimed  # the same build: never timed
def test_an_unreachable_gateway_exits_3_with_the_local_verdict_written(opgate, kernel_repo):
    kernel_repo.write("kernels/deepgemm_tile/NOTES.md", "a note\n")  # touches the kernel, passes
    head = kernel_repo.commit()
    run = with_key(opgate, kernel_repo, head, "http://127.0.0.1:9")
    assert run.code == 3, run.stdout + run.stderr
    assert run.report["verdict"] == "pass" and run.report["agent"]["status"] == "error"
    assert "unreachable" in said(run.report["agent"]["reason"])
    assert CANARY not in run.stdout + run.stderr + run.comment


@pytest.mark.untimed  # a static failure: nothing is built or timed
def test_a_pr_cannot_choose_which_key_the_agent_uses(opgate, kernel_repo, httpserver):
    """The task file is read from base: pointing api_key_env at another domain's key changes nothing."""
    kernel_repo.edit(
        "kernels/deepgemm_tile/agent_task.json", "TAOTOKEN_API_KEY_DEEPGEMM_AGENT", "TAOTOKEN_API_KEY_FLASHMLA_AGENT"
    )
    kernel_repo.edit(CONFIG, '"tile_m": 128', '"tile_m": 96')
    run = with_key(
        opgate,
        kernel_repo,
        kernel_repo.commit(),
        httpserver.url_for("/").rstrip("/"),
        key_variable="TAOTOKEN_API_KEY_FLASHMLA_AGENT",
    )
    assert run.report["agent"]["status"] == "offline"
    assert "TAOTOKEN_API_KEY_DEEPGEMM_AGENT is not set" in said(run.report["agent"]["reason"])
    assert len(httpserver.log) == 0


@pytest.mark.untimed  # the same build; the candidate fails statically
def test_try_candidates_gates_the_agents_patch_on_top_of_head(opgate, kernel_repo, httpserver):
    patch = (
        "--- a/kernels/deepgemm_tile/tile_config.json\n"
        "+++ b/kernels/deepgemm_tile/tile_config.json\n"
        "@@ -1 +1 @@\n"
        '-{"tile_m": 128, "tile_n": 128, "tile_k": 64}\n'
        '+{"tile_m": 128, "tile_n": 128, "tile_k": 96}\n'
    )
    reply = {**REVIEW_JSON, "candidate_patch": patch}
    httpserver.expect_request("/v1/chat/completions", method="POST").respond_with_json(completion(json.dumps(reply)))
    kernel_repo.write("kernels/deepgemm_tile/NOTES.md", "try a deeper k tile\n")
    run = with_key(opgate, kernel_repo, kernel_repo.commit(), httpserver.url_for("/").rstrip("/"), "--try-candidates")
    assert run.code == 0, run.stdout + run.stderr  # the head itself passes; the candidate never decides
    candidate = run.kernel("deepgemm_tile")["candidate"]
    # the runner, not the agent, decides: tile_k=96 is outside the allowed set, so the proposal fails
    assert candidate["verdict"] == "fail"
    assert "tile_config.json: tile_k=96 not in {32,64,128}" in candidate["reasons"]
    assert "**Agent candidate**" in run.comment and "tile_k=96 not in" in run.comment
    assert run.report["agent"]["requests"] == 1  # the candidate pass does not ask the agent again


@pytest.mark.untimed  # nothing built
def test_agent_only_asks_the_agent_and_builds_nothing(opgate, kernel_repo, httpserver, tmp_path):
    """CI's agent job: the key and the ledger, the diff as data, no build and no run of the change."""
    httpserver.expect_request("/v1/chat/completions", method="POST").respond_with_json(
        completion(json.dumps(REVIEW_JSON))
    )
    kernel_repo.edit(CONFIG, '"tile_n": 128', '"tile_n": 256')  # a valid change that would be built and timed
    head = kernel_repo.commit()
    url = httpserver.url_for("/").rstrip("/")
    run = with_key(opgate, kernel_repo, head, url, "--agent-only", "--kernel", "deepgemm_tile")
    assert run.code == 0, run.stderr
    [kernel] = run.report["kernels"]
    assert kernel["name"] == "deepgemm_tile" and kernel["build"] is None and kernel["cases"] == []
    assert kernel["resource_check"] is None and "agent only" in " ".join(kernel["notes"])
    assert run.report["agent"]["status"] == "ok" and run.report["agent"]["total_tokens"] == 1555
    db = sqlite3.connect(tmp_path / "ledger.sqlite")
    assert db.execute("SELECT COUNT(*) FROM operator_agent_usage").fetchone() == (1,)  # spend recorded here
    assert db.execute("SELECT COUNT(*) FROM reviews").fetchone() == (0,)  # the verdict is the publish job's
    db.close()


@pytest.mark.untimed  # bad input, nothing built
def test_require_isolation_refuses_to_run_pr_code_without_a_sandbox(opgate, kernel_repo):
    kernel_repo.edit(CONFIG, '"tile_n": 128', '"tile_n": 256')
    head = kernel_repo.commit()
    run = opgate(
        "review", "--repo", str(kernel_repo.path), "--base", kernel_repo.base, "--head", head, "--offline",
        "--require-isolation", env={"OPGATE_SANDBOX": "none"},
    )  # fmt: skip
    assert run.code == 2 and "Traceback" not in run.stderr
    assert "--require-isolation: OPGATE_SANDBOX=none" in run.stderr
    assert not (run.out / "report.json").exists()


@pytest.mark.untimed  # a static failure: nothing is built or timed
def test_a_note_on_a_diff_line_is_placed_and_expectations_are_held_against_the_review(
    opgate, kernel_repo, httpserver, tmp_path
):
    """The agent's note naming tile_config.json line 1 (the changed line) is placed there; a note naming no line
    stays in the comment; expected metrics the review could not measure (a static failure: nothing built or run)
    say "not measured", in report.json, the comment and the ledger."""
    reply = dict(
        REVIEW_JSON,
        risk_notes=[f"{CONFIG}:1: tile_m 96 is off the allowed grid", "the rest of the change looks fine"],
        expected_metrics={"latency_p50_regression": "-2%"},
    )
    run, _, _head = run_with_agent(opgate, kernel_repo, httpserver, completion(json.dumps(reply)))
    assert run.code == 1, run.stderr
    (agent,) = run.report["agents"]
    assert agent["inline_notes"] == [{"path": CONFIG, "line": 1, "note": reply["risk_notes"][0]}]
    assert "risk: the rest of the change looks fine" in run.comment
    assert "tile_m 96 is off the allowed grid" not in run.comment
    assert f"`{CONFIG}:1`" in run.comment
    (check,) = agent["expectations"]
    assert (check["metric"], check["outcome"]) == ("latency_p50_regression", "not_measured")
    assert "`latency_p50_regression`: expected -2%, not measured (no case's p50 was timed against base)" in run.comment
    db = sqlite3.connect(tmp_path / "ledger.sqlite")
    assert db.execute("SELECT metric, outcome FROM agent_expectations").fetchall() == [
        ("latency_p50_regression", "not_measured")
    ]
    db.close()


ROW_SCALE = Path(__file__).parent / "fixtures" / "row_scale"
BODY = "kernels/row_scale/row_scale_cpu.cpp"
RIGHT_TAIL = "  for (; i < m; ++i) row(x, w, y, i, n);\n"
# The head bug: the tail (at most 15 rows) unrolled in pairs, its odd last row only when the tail is under 15 rows.
# m % 16 == 15 loses row m - 1; no manifest case (m = 64, 40) and no probe (the reference defines none) has that tail.
BROKEN_TAIL = (
    "  const int64_t tail = m - i;\n"
    "  for (int64_t r = 0; r + 1 < tail; r += 2) {\n"
    "    row(x, w, y, i + r, n);\n"
    "    row(x, w, y, i + r + 1, n);\n"
    "  }\n"
    "  if (tail % 2 == 1 && tail < ROWS - 1) row(x, w, y, m - 1, n);\n"
)
MATRIX = {
    **REVIEW_JSON,
    "candidate_patch": None,
    "test_matrix": [
        {"name": "tail_15", "shape": {"m": 47, "n": 16}},  # 2 blocks and a 15-row tail
        {"name": "huge", "shape": {"m": 5000, "n": 16}},  # outside [agent_cases.shape] m = [1, 256]
    ],
}


def row_scale_repo(path: Path) -> KernelRepo:
    """A scratch repository whose one kernel is tests/fixtures/row_scale (right on every tail) at `base`."""
    repo = make_repo(path, [])
    shutil.copytree(ROW_SCALE, path / "kernels" / "row_scale")
    repo.base = repo.commit("row_scale")
    return repo


@pytest.mark.untimed  # what is asserted is correctness; the latency of agent cases is reported, never gated
def test_the_agents_test_matrix_fails_a_head_bug_no_manifest_case_reaches_and_spares_one_base_shares(
    opgate, tmp_path, httpserver
):
    """First as CI's fan-out runs it: the agent job (key, no build) writes agent-K/; the review job (no key) runs
    `--offline --agent-cases agent-K/`, taking only the part's test matrix and the agent's model; the merge shows
    and records them. Then in one process with the key, where base shares the bug, with --try-candidates."""
    # the second review's reply carries a candidate (a note beside the kernel, so head's build is reused)
    note = "--- /dev/null\n+++ b/kernels/row_scale/NOTES.md\n@@ -0,0 +1 @@\n+tails: see tail_15\n"
    candidate = {**MATRIX, "candidate_patch": note}
    gateway = Gateway(httpserver, [completion(json.dumps(MATRIX)), completion(json.dumps(candidate))])
    repo = row_scale_repo(tmp_path / "repo")
    repo.edit(BODY, RIGHT_TAIL, BROKEN_TAIL)
    broken = repo.commit("tail rows in pairs")
    revs = ["--repo", str(repo.path), "--base", repo.base, "--head", broken]
    agent_dir, part_dir = tmp_path / "agent-row_scale", tmp_path / "part-row_scale"
    asked = with_key(
        opgate, repo, broken, gateway.url, "--agent-only", "--kernel", "row_scale", "--out", str(agent_dir)
    )
    assert asked.code == 0, asked.stderr
    assert not any(CANARY.encode() in p.read_bytes() for p in agent_dir.rglob("*") if p.is_file())  # test_secrets too
    part = opgate("review", *revs, "--offline", "--kernel", "row_scale", "--agent-cases", str(agent_dir),
                  "--out", str(part_dir))  # fmt: skip
    assert part.code == 1, part.stdout + part.stderr
    assert len(gateway.bodies) == 1  # the review job asked nobody: the matrix came from the part
    [kernel] = json.loads((part_dir / "report.json").read_text())["kernels"]
    assert {c["name"]: c["status"] for c in kernel["cases"]} == {"rows_64": "ok", "rows_40": "ok"}  # right on them
    block = kernel["agent_cases"]
    assert block["agent"] == "deepseek-v4" and block["proposed"] == 2
    [tail] = block["cases"]
    assert tail["name"] == "tail_15" and tail["verdict"] == "fail" and tail["case"]["base_correct"] is True
    assert tail["case"]["failure"]["index"][0] == 46  # the last row, never written
    assert [(r["name"], said(r["reason"])) for r in block["refused"]] == [
        ("huge", "shape.m = 5000 is outside [1, 256]")
    ]
    assert block["refused"][0]["reason"]["key"] == "agent.bound"  # the catalog's message, in the comment's language
    reason = next(r for r in kernel["reasons"] if "agent case" in r)
    assert reason.startswith("correctness: agent case tail_15 (proposed by deepseek-v4)")
    assert '"test_matrix"' in gateway.bodies[0]["messages"][0]["content"]  # the prompt asks for it, with bounds
    assert "shape.m in [1, 256]" in gateway.bodies[0]["messages"][0]["content"]

    run = opgate("review", *revs, "--offline", "--merge", str(part_dir), "--agents", str(agent_dir))
    assert run.code == 1, run.stdout + run.stderr
    assert run.kernel("row_scale")["agent_cases"] == block and run.report["agent"]["status"] == "ok"  # the agent job's
    assert "**Agent cases** proposed by `deepseek-v4`" in run.comment
    assert "| `tail_15` | `m=47, n=16` | ❌ fail |" in run.comment
    assert "refused `huge`: shape.m = 5000 is outside \\[1, 256\\]" in run.comment
    with Ledger(tmp_path / "ledger.sqlite") as ledger:  # the merge records it: the summary's agent_case pass rate
        found = [(p.kind, p.kernel, p.name, p.verdict, p.passed) for p in ledger.proposals()]
    assert found == [("agent_case", "row_scale", "tail_15", "fail", True)]  # it found head's own bug

    # Base carries the same bug (head adds an unused function): the agent's case shows it, and does not fail the change.
    repo.base = broken
    # an unused function: other bytes than base's ext.so (a comment alone would be the same binary, not run twice)
    repo.edit(BODY, "// The kernel body", 'extern "C" int opgate_no_op_marker() { return 40; }\n// The kernel body')
    run = with_key(opgate, repo, repo.commit("a comment"), gateway.url, "--try-candidates")
    kernel = run.kernel("row_scale")
    [tail] = kernel["agent_cases"]["cases"]
    assert tail["verdict"] == "base_fails" and tail["case"]["base_correct"] is False
    # --try-candidates: the agent's candidate is judged with the same agent cases as head (base's bounds admit them)
    tried = kernel["candidate"]
    assert tried["agent_cases"]["agent"] == "deepseek-v4", tried
    assert [(c["name"], c["verdict"]) for c in tried["agent_cases"]["cases"]] == [("tail_15", "base_fails")]
    assert kernel["verdict"] != "fail" and not any("agent case" in r for r in kernel["reasons"]), kernel["reasons"]
    assert run.code != 1, run.stdout + run.stderr
    assert "⚠️ base fails too" in run.comment and "base fails too (base is wrong on it)" in run.comment


@pytest.mark.untimed
def test_the_agent_job_sends_the_changed_function_whole_from_base_and_head(opgate, kernel_repo, httpserver, tmp_path):
    """The review reads both checkouts for the enclosing function of a hunk; with no main history in the ledger the
    prompt and the report say base's figures are not available."""
    seen: list[Request] = []

    def handler(request: Request) -> Response:
        seen.append(request)
        return Response(json.dumps(completion(json.dumps(REVIEW_JSON))), content_type="application/json")

    httpserver.expect_request("/v1/chat/completions", method="POST").respond_with_handler(handler)
    source = "kernels/deepgemm_tile/gemm_cpu.cpp"
    kernel_repo.edit(source, "void gemm_tiled(", "// the tail rows, reviewed\nvoid gemm_tiled(")
    kernel_repo.edit(source, "  for (int64_t", "  // head's own line\n  for (int64_t")
    head = kernel_repo.commit()
    url = httpserver.url_for("/").rstrip("/")
    run = with_key(opgate, kernel_repo, head, url, "--agent-only", "--kernel", "deepgemm_tile")
    assert run.code == 0, run.stderr
    [request] = seen
    user = json.loads(request.get_data(as_text=True))["messages"][1]["content"]
    functions = user[user.index("<<<DATA: every function the diff changes") :]
    assert f"head `{source}` lines" in functions and f"base `{source}` lines" in functions
    assert functions.count("void gemm_tiled(") == 2 and functions.count("// head's own line") == 1
    assert "base figures: not available — main's history in this ledger holds no figures of deepgemm_tile" in user
    [agent] = run.report["agents"]
    assert "2 changed function(s) whole" in [said(p) for p in agent["inputs"]]
    assert any(said(m).startswith("base figures: not available") for m in agent["inputs_missing"])
