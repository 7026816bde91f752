"""The gateway client and the agent path against a local gateway with injected faults (429, 5xx, timeouts,
quota, invalid JSON), with a real ledger: retries, ledger rows per attempt, repair, cache, budget, trimming."""

from __future__ import annotations

import json
import random
import time
from datetime import UTC, datetime

import pytest

from bot.agent.client import GatewayClient, GatewayError, validate_base_url
from bot.agent.retry import Failure, RetryPolicy
from bot.agent.review import PatchError, parse_review, validate_patch
from bot.errors import InputError
from bot.wording.messages import phrase
from tests import agent_world
from tests.agent_world import CONFIG_DIFF, KEY, VARIABLE, Sleeps, change, run_ask
from tests.gateway import QUOTA_429, RATE_429, Gateway, Step, completion, message
from tests.pg import pg_cluster, pg_url  # noqa: F401  (fixtures)

gateway = agent_world.gateway  # the fixture
ledger = agent_world.ledger  # the fixture
sqlite_ledger = agent_world.sqlite_ledger  # the fixture

GOOD = {
    "candidate_patch": None,
    "risk_notes": ["tile_n=256 doubles the accumulator tile"],
    "local_commands": ["opgate review --base main --head HEAD"],
    "expected_metrics": {"max_abs_err": 0.001},
}


def client(gateway: Gateway, sleeps: Sleeps, **kw) -> GatewayClient:
    options = {"timeout_s": 5.0, "session": None, "policy": RetryPolicy(retries=4, base_s=0.5), "sleep": sleeps}
    options.update(kw)
    return GatewayClient(gateway.url, KEY, VARIABLE, rng=random.Random(7), **options)  # type: ignore[arg-type]


@pytest.fixture
def sleeps() -> Sleeps:
    return Sleeps()


# -- the client against the local gateway ----------------------------------------------------


def test_a_429_with_retry_after_is_retried_after_the_asked_pause(gateway, sleeps):
    gateway.push(Step(status=429, body=RATE_429, headers={"Retry-After": "3"}), completion("{}"))
    seen = []
    result = client(gateway, sleeps, on_attempt=seen.append).chat("m", [{"role": "user", "content": "hi"}])
    assert result.attempts == 2 and result.total_tokens == 1555
    assert sleeps == [3.0]
    assert [(a.number, a.status_code, a.failure) for a in seen] == [(1, 429, Failure.rate_limited), (2, 200, None)]


@pytest.mark.parametrize("status", [500, 502, 503, 529])
def test_server_errors_are_retried_with_exponential_backoff(gateway, sleeps, status):
    gateway.push(*[Step(status=status, body={"error": {"type": "x"}})] * 3, completion("{}"))
    result = client(gateway, sleeps).chat("m", [{"role": "user", "content": "hi"}])
    assert result.attempts == 4 and len(sleeps) == 3
    assert 0.25 <= sleeps[0] <= 0.5 and 0.5 <= sleeps[1] <= 1.0 and 1.0 <= sleeps[2] <= 2.0


def test_a_timeout_is_retried(gateway, sleeps):
    gateway.push(Step(stall_s=0.5, body=completion("{}")), completion("{}"))

    def wait_out_the_stall(seconds: float) -> None:  # the test server answers one request at a time
        sleeps.append(seconds)
        time.sleep(0.5)

    result = client(gateway, sleeps, timeout_s=0.2, sleep=wait_out_the_stall).chat("m", [])
    assert result.attempts == 2 and len(sleeps) == 1 and len(gateway.requests) == 2


def test_retries_give_up_with_a_service_error_after_the_last_attempt(gateway, sleeps):
    gateway.push(*[Step(status=503, body={})] * 10)
    with pytest.raises(GatewayError, match=r"HTTP 503.*after 3 attempts") as err:
        client(gateway, sleeps, policy=RetryPolicy(retries=2, base_s=0)).chat("m", [])
    assert err.value.exit_code == 3 and len(gateway.requests) == 3


@pytest.mark.parametrize(
    ("step", "failure", "words"),
    [
        (Step(status=429, body=QUOTA_429), Failure.quota, "quota or spend limit"),
        (Step(status=401, body={"error": {"message": f"Incorrect API key provided: {KEY}"}}), Failure.auth, "refused"),
        (Step(status=403, body={}), Failure.auth, "refused"),
    ],
)
def test_quota_and_auth_failures_fail_fast_naming_the_variable_never_the_key(gateway, sleeps, step, failure, words):
    gateway.push(step, completion("{}"))
    with pytest.raises(GatewayError) as err:
        client(gateway, sleeps).chat("m", [])
    assert err.value.failure is failure and len(gateway.requests) == 1 and sleeps == []
    assert VARIABLE in str(err.value) and words in str(err.value) and KEY not in str(err.value)


def test_a_retry_after_beyond_the_cap_is_not_waited_for(gateway, sleeps):
    gateway.push(Step(status=429, body=RATE_429, headers={"Retry-After": "3600"}))
    with pytest.raises(GatewayError, match="asked to wait 3600 s"):
        client(gateway, sleeps).chat("m", [])
    assert sleeps == []


def test_the_anthropic_wire_posts_to_v1_messages_with_the_system_prompt_apart(gateway, sleeps):
    gateway.push(message('{"risk_notes": []}', input_tokens=900, output_tokens=100, cache_read=50))
    c = client(gateway, sleeps, wire_name="anthropic")
    result = c.chat("claude-test", [{"role": "system", "content": "rules"}, {"role": "user", "content": "diff"}])
    request, body = gateway.requests[0], gateway.bodies[0]
    assert request.path == "/v1/messages" and request.headers["anthropic-version"] == "2023-06-01"
    assert request.headers["Authorization"] == f"Bearer {KEY}"
    assert body["system"] == "rules" and body["messages"] == [{"role": "user", "content": "diff"}]
    assert (result.prompt_tokens, result.completion_tokens, result.cached_tokens) == (950, 100, 50)
    assert result.request_id.startswith("msg_test_")


def test_openai_usage_details_are_kept(gateway, sleeps):
    gateway.push(
        completion(
            "{}",
            prompt=100,
            completion_tokens=40,
            prompt_tokens_details={"cached_tokens": 64},
            completion_tokens_details={"reasoning_tokens": 12},
        )
    )
    result = client(gateway, sleeps).chat("m", [])
    assert (result.cached_tokens, result.reasoning_tokens, result.usage_reported) == (64, 12, True)
    assert gateway.requests[0].path == "/v1/chat/completions"


# -- candidate patches -----------------------------------------------------------------------


def test_a_candidate_patch_must_be_a_small_unified_diff_inside_the_kernel_folder():
    assert validate_patch("```diff\n" + CONFIG_DIFF + "```", "deepgemm_tile") == CONFIG_DIFF
    for bad, words in [
        (CONFIG_DIFF.replace("kernels/deepgemm_tile/", ".github/workflows/"), "outside"),
        (CONFIG_DIFF.replace("kernels/deepgemm_tile/", "kernels/deepgemm_tile/../../"), "outside"),
        (CONFIG_DIFF.replace("kernels/deepgemm_tile/", "kernels/flashmla_decode/"), "outside"),
        ("just some text\n", "not a unified diff"),
    ]:
        with pytest.raises(PatchError, match=words):
            validate_patch(bad, "deepgemm_tile")
    big = CONFIG_DIFF.replace("@@ -1 +1 @@", "@@ -1 +1,401 @@").replace(
        '+{"tile_m": 256}\n', "".join(f"+line {i}\n" for i in range(401))
    )
    with pytest.raises(PatchError, match="changes 402 lines"):
        validate_patch(big, "deepgemm_tile")


def test_a_reply_whose_patch_leaves_the_kernel_folder_is_an_output_error():
    reply = json.dumps({**GOOD, "candidate_patch": CONFIG_DIFF.replace("kernels/deepgemm_tile/", "bot/")})
    with pytest.raises(ValueError, match="outside kernels/deepgemm_tile/"):
        parse_review(reply, "deepgemm_tile")


# -- offline token estimates and trimming ----------------------------------------------------


# -- ask(): the whole agent path with a real ledger -------------------------------------------


def test_every_attempt_is_a_ledger_row_and_the_reservation_settles_to_the_usage(gateway, ledger, tmp_path):
    gateway.push(
        Step(status=429, body=RATE_429, headers={"Retry-After": "0"}),
        Step(status=500, body={}),
        completion(json.dumps(GOOD), prompt=700, completion_tokens=80),
    )
    report, unseen = run_ask(gateway, ledger, tmp_path)
    assert (report.status, report.requests, report.total_tokens, unseen) == ("ok", 1, 780, [])
    rows = ledger.usage()
    assert [(r.attempt, r.status, r.status_code, r.error_type, r.total_tokens) for r in rows] == [
        (1, "error", 429, "rate_limited", 0),
        (2, "error", 500, "server_error", 0),
        (3, "ok", 200, None, 780),
    ]
    assert len({r.call_id for r in rows}) == 1 and all(r.key_fingerprint.startswith("sha256:") for r in rows)
    last = rows[-1]
    assert last.usage_source == "reported" and last.estimated_prompt_tokens
    assert last.estimate_ratio == pytest.approx(700 / last.estimated_prompt_tokens, rel=1e-3)
    (reservation,) = ledger.reservations(week=datetime.now(UTC).strftime("%G-W%V"))
    assert (reservation.state, reservation.settled_tokens) == ("settled", 780)
    assert KEY not in json.dumps([r.model_dump() for r in rows])


def test_invalid_json_gets_one_repair_request(gateway, sqlite_ledger, tmp_path):
    gateway.push(completion("Sure! Here you go: {risk_notes: [..."), completion(json.dumps(GOOD)))
    report, _ = run_ask(gateway, sqlite_ledger, tmp_path)
    assert report.status == "ok" and report.requests == 2 and report.total_tokens == 2 * 1555
    repair = gateway.bodies[1]["messages"]
    assert repair[-2]["role"] == "assistant" and "not valid JSON" in repair[-1]["content"]
    assert (tmp_path / "agent_candidates" / f"{'f' * 12}_deepgemm_tile.rejected.txt").exists()


def test_the_same_prompt_is_answered_from_the_cache_for_0_tokens(gateway, ledger, tmp_path):
    gateway.push(completion(json.dumps(GOOD)))
    first, _ = run_ask(gateway, ledger, tmp_path)
    second, _ = run_ask(gateway, ledger, tmp_path)
    assert len(gateway.requests) == 1
    assert first.total_tokens == 1555 and second.total_tokens == 0 and second.requests == 0
    assert second.status == "ok" and second.cached and "cached reply" in phrase(second.reason)
    assert second.risk_notes == GOOD["risk_notes"]
    rows = ledger.usage()
    assert [(r.status, r.cached, r.total_tokens, r.usage_source) for r in rows][-1] == ("cached", True, 0, "cache")


def test_over_budget_the_agent_is_not_asked_and_the_row_says_so(gateway, ledger, tmp_path):
    report, _ = run_ask(gateway, ledger, tmp_path, OPGATE_BUDGET_WEEKLY_DEEPGEMM="1000")
    assert (
        report.status == "over_budget"
        and "gates still run" in phrase(report.reason)
        and "of 1000" in phrase(report.reason)
    )
    assert gateway.requests == []
    assert [(r.status, r.total_tokens) for r in ledger.usage()] == [("over_budget", 0)]


def test_usage_a_gateway_does_not_report_is_estimated_and_marked(gateway, sqlite_ledger, tmp_path):
    body = completion(json.dumps(GOOD))
    del body["usage"]
    gateway.push(body)
    report, _ = run_ask(gateway, sqlite_ledger, tmp_path)
    (row,) = sqlite_ledger.usage()
    assert row.usage_source == "estimated" and row.total_tokens == report.total_tokens > 0
    assert row.prompt_tokens == row.estimated_prompt_tokens


def test_a_per_request_budget_leaves_files_out_and_returns_them(gateway, sqlite_ledger, tmp_path):
    gateway.push(completion(json.dumps(GOOD)))
    big = change("kernels/deepgemm_tile/reference.py", "+# padding\n" * 4000)
    config = change("kernels/deepgemm_tile/tile_config.json", CONFIG_DIFF)
    report, unseen = run_ask(gateway, sqlite_ledger, tmp_path, [big, config])
    assert report.status == "ok" and unseen == ["kernels/deepgemm_tile/reference.py"]
    sent = gateway.bodies[0]["messages"][1]["content"]
    assert "tile_m" in sent and "# padding" not in sent


def test_a_frame_over_the_per_request_budget_is_over_budget_without_a_call(gateway, sqlite_ledger, tmp_path):
    report, _ = run_ask(gateway, sqlite_ledger, tmp_path, OPGATE_BUDGET_REQUEST_DEEPGEMM="50")
    assert report.status == "over_budget" and "OPGATE_BUDGET_REQUEST_DEEPGEMM" in phrase(report.reason)
    assert gateway.requests == []


# -- --try-candidates: the agent's patch applied in a scratch worktree -----------------------


def test_the_one_domain_key_of_a_ci_agent_job_serves_when_the_domain_variable_is_unset(
    gateway, sqlite_ledger, tmp_path
):
    """CI's agent job holds its kernel's domain key as OPGATE_AGENT_KEY (environment opgate-<domain>)."""
    agent_key = "sk-ci-agent-9a8b7c6d5e4f3a2b1c0d"
    gateway.push(completion(json.dumps(GOOD), prompt=700, completion_tokens=80))
    report, _ = run_ask(gateway, sqlite_ledger, tmp_path, **{VARIABLE: "", "OPGATE_AGENT_KEY": agent_key})
    assert report.status == "ok" and gateway.requests[0].headers["Authorization"] == f"Bearer {agent_key}"
    assert [r.domain for r in sqlite_ledger.usage()] == ["deepgemm"]


@pytest.mark.parametrize(
    "url",
    [
        "https://taotoken.net/api?utm_source=x",
        "https://taotoken.net/api?x=1",
        "ftp://taotoken.net/api",
        "https://user:pw@taotoken.net/api",
        "taotoken.net/api",
    ],
)
def test_gateway_base_url_must_be_bare(url):
    with pytest.raises(InputError):
        validate_base_url(url)


def test_gateway_base_url_is_normalised():
    assert validate_base_url("https://taotoken.net/api/") == "https://taotoken.net/api"
