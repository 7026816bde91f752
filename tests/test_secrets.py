"""Secrets never leak: canary keys planted in every key variable, a gateway that echoes them back, and
every output file, log line and ledger row of review, summary, lint and export searched for them
(and for their base64)."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from werkzeug import Request

from bot.ledger import Ledger
from tests.conftest import REPO_CONFIG
from tests.gateway import Gateway, Step, completion
from tests.github_server import FakeGitHub

KEY_VARIABLES = [REPO_CONFIG.key_variable(d) for d in REPO_CONFIG.domains]  # this repository's domain keys
CANARIES = {name: f"sk-canary-{i}{'7f3a9c1e5b2d4f6a8c0e'[i:]}{i}" for i, name in enumerate(KEY_VARIABLES)}
CANARIES |= {
    "GITHUB_TOKEN": "ghs_canaryGithubToken7f3a9c1e5b2d4f6a",
    "TAOTOKEN_API_KEY": "sk-canary-generic-9e8d7c6b5a4f3e2d1c",
    "TAOTOKEN_CODEX_API_KEY": "sk-canary-codex-1a2b3c4d5e6f7a8b9c",
    "ANTHROPIC_AUTH_TOKEN": "sk-ant-canary-0f1e2d3c4b5a69788796",
}
REPO = "octo-org/kernels"


def forms(secret: str) -> list[str]:
    b64 = base64.b64encode(secret.encode()).decode()
    return [secret, b64, b64.rstrip("=")]


def leaks(text: str | bytes) -> list[str]:
    blob = text.decode("utf-8", "replace") if isinstance(text, bytes) else text
    return [f"{name} ({form[:6]}…)" for name, s in CANARIES.items() for form in forms(s) if form in blob]


def echoing_reply(request: Request) -> Step:
    """A hostile gateway: the bearer token and its base64 come back inside the review it returns."""
    auth = request.headers.get("Authorization", "")
    key = auth.removeprefix("Bearer ")
    review = {
        "candidate_patch": None,
        "risk_notes": [f"your header was {auth}", f"b64 {base64.b64encode(key.encode()).decode()}"],
        "local_commands": [f"export TAOTOKEN_API_KEY_DEEPGEMM_AGENT={key}"],
        "expected_metrics": {"echo": key},
    }
    return Step(body=completion(json.dumps(review)))


@pytest.mark.slow
def test_canary_keys_appear_in_no_output_log_or_ledger_row(opgate, kernel_repo, httpserver, tmp_path):
    gateway = Gateway(httpserver)
    gateway.push(Step(status=500, body={"error": {"message": f"upstream rejected {CANARIES[KEY_VARIABLES[0]]}"}}))
    gateway.fallback = echoing_reply
    kernel_repo.edit("kernels/deepgemm_tile/tile_config.json", '"tile_m": 128', '"tile_m": 96')
    head = kernel_repo.commit()
    dotenv = tmp_path / "planted" / ".env"  # the one input that holds the canaries on purpose
    dotenv.parent.mkdir()
    dotenv.write_text("".join(f"{name}={value}\n" for name, value in CANARIES.items()))
    runs = []
    with FakeGitHub(CANARIES["GITHUB_TOKEN"]) as github:
        github.add_repo(REPO)
        env = {
            **CANARIES,
            "TAOTOKEN_BASE_URL": gateway.url,
            "OPGATE_AGENT_BACKOFF_S": "0",
            "GITHUB_REPOSITORY": REPO,
            "GITHUB_API_URL": github.base_url,
            "OPGATE_GITHUB_LOGIN": github.bot_login,
        }
        review = ["review", "--repo", str(kernel_repo.path), "--base", kernel_repo.base, "--head", head]
        runs.append(opgate(*review, "--offline", "--out", str(tmp_path / "out-offline"), env=env))
        runs.append(opgate(*review, "--out", str(tmp_path / "out-agent"), env=env))
        runs.append(opgate(*review, "--out", str(tmp_path / "out-cached"), env=env))  # answered from the cache
        runs.append(opgate("summary", "--post", "--out-dir", str(tmp_path / "reports"), env=env))
        runs.append(opgate("lint", str(dotenv), env=env))
        runs.append(opgate("lint", "--repo", str(kernel_repo.path), env=env))
        runs.append(opgate("ledger", "export", "--csv", str(tmp_path / "reports" / "token_usage.csv"), env=env))
        runs.append(opgate("ledger", "budget", env=env))
        posted = [json.dumps(github.issues(REPO))] + [json.dumps(r.body) for r in github.writes()]
    assert [r.code for r in runs] == [1, 1, 1, 0, 1, 0, 0, 0], [r.stderr[-300:] for r in runs]
    prompts = [r.json["messages"][0]["content"] for r in gateway.requests]
    reviews = [p for p in prompts if p.startswith("You review a change")]
    assert len(reviews) == 2  # a 500, its retry; the third review came from the cache
    assert len(prompts) > len(reviews)  # the failing runs also asked for a CI summary: its replies are searched too
    agent = json.loads((tmp_path / "out-agent" / "report.json").read_text())["agent"]
    assert agent["status"] == "ok" and "***" in agent["risk_notes"][0]  # the echo arrived, masked

    found = {}
    for i, run in enumerate(runs):
        found[f"run {i} stdout"] = leaks(run.stdout)
        found[f"run {i} stderr"] = leaks(run.stderr)
    for path in tmp_path.rglob("*"):
        if path.is_file() and path != dotenv and ".git" not in path.parts:
            found[str(path.relative_to(tmp_path))] = leaks(path.read_bytes())
    for i, body in enumerate(posted):
        found[f"GitHub write {i}"] = leaks(body)
    with Ledger(tmp_path / "ledger.sqlite") as ledger:
        for table in ("operator_agent_usage", "reviews", "verdicts", "agent_response_cache", "agent_reservations"):
            found[f"table {table}"] = leaks(json.dumps(ledger.db.rows(f"SELECT * FROM {table}")))
    assert {where: what for where, what in found.items() if what} == {}
    assert Path(tmp_path / "out-agent" / "agent_candidates").is_dir()
    assert any(p.suffix == ".sqlite" for p in tmp_path.iterdir())  # the database file itself was searched


def test_the_agent_part_the_review_job_downloads_holds_no_secret(opgate, kernel_repo, httpserver, tmp_path):
    """CI's review job (PR code, no secret) downloads its kernel's agent part for the test matrix: the agent job
    wrote it holding the key, and a hostile gateway echoes the key into the matrix itself. No file of the part holds
    a canary in any form, and what `--agent-cases` takes from it is the masked matrix."""
    from bot.review.fanout import read_agent_cases

    key = CANARIES[REPO_CONFIG.key_variable("deepgemm")]

    def matrix_echo(request: Request) -> Step:
        step = echoing_reply(request)
        review = json.loads(step.body["choices"][0]["message"]["content"])
        echoed = request.headers.get("Authorization", "").removeprefix("Bearer ")
        review["test_matrix"] = [{"name": f"tail_{echoed}", "shape": {"m": 47, echoed: 1}, "params": {"k": echoed}}]
        return Step(body=completion(json.dumps(review)))

    gateway = Gateway(httpserver)
    gateway.fallback = matrix_echo
    kernel_repo.edit("kernels/deepgemm_tile/tile_config.json", '"tile_m": 128', '"tile_m": 96')
    head = kernel_repo.commit()
    part = tmp_path / "agent-deepgemm_tile"
    run = opgate(
        "review", "--repo", str(kernel_repo.path), "--base", kernel_repo.base, "--head", head,
        "--kernel", "deepgemm_tile", "--agent-only", "--out", str(part),
        env={**CANARIES, "TAOTOKEN_BASE_URL": gateway.url, "OPGATE_AGENT_BACKOFF_S": "0"},
    )  # fmt: skip
    assert run.code == 0, run.stderr
    assert len(gateway.requests) == 1 and key in gateway.requests[0].headers.get("Authorization", "")
    found = {str(p.relative_to(part)): leaks(p.read_bytes()) for p in part.rglob("*") if p.is_file()}
    assert "report.json" in found and {where: what for where, what in found.items() if what} == {}
    shas = json.loads((part / "report.json").read_text())
    matrix = read_agent_cases(part, "deepgemm_tile", shas["base_sha"], shas["head_sha"])
    [case] = matrix.cases
    assert "***" in case.name and not leaks(case.model_dump_json()) and matrix.proposer
