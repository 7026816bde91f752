"""Gateway replies as the providers document them, against the local gateway (tests/gateway.py): a reply cut off
at the token limit, a tool-call reply without text, DeepSeek's cache counts, and a domain's choice of the
completion cap's name and of sending a temperature."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bot.agent.run import ask
from bot.config.repo import RepoConfig, load_config
from bot.config.settings import load_settings
from bot.errors import InputError
from bot.ledger import Ledger
from bot.wording.messages import phrase
from tests.agent_world import CONFIG_DIFF, KERNEL, KEY, VARIABLE, Sleeps, change
from tests.conftest import REPO_CONFIG
from tests.gateway import CUT, Gateway, completion, deepseek, tool_calls, truncated
from tests.test_agent_client import GOOD


@pytest.fixture
def gateway(httpserver) -> Gateway:
    return Gateway(httpserver)


@pytest.fixture
def ledger(tmp_path: Path):
    with Ledger(tmp_path / "l.sqlite") as led:
        yield led


def domain_config(**keys: object) -> RepoConfig:
    """This repository's configuration with keys added to the deepgemm domain."""
    data = REPO_CONFIG.model_dump()
    data["domains"]["deepgemm"].update(keys)
    return RepoConfig.model_validate({**data, "root": REPO_CONFIG.root})


def run_ask(gateway: Gateway, ledger: Ledger, tmp_path: Path, config: RepoConfig = REPO_CONFIG, **env: str):
    settings = load_settings(
        {VARIABLE: KEY, "TAOTOKEN_BASE_URL": gateway.url, "OPGATE_AGENT_BACKOFF_S": "0", "GITHUB_TOKEN": "", **env},
        config,
    )
    report, _ = ask(
        KERNEL,
        [change("kernels/deepgemm_tile/tile_config.json", CONFIG_DIFF)],
        settings=settings,
        ledger=ledger,
        head_sha="f" * 40,
        pr=12,
        offline=False,
        candidates_dir=tmp_path / "agent_candidates",
        sleep=Sleeps(),
    )
    return report


def caps(gateway: Gateway) -> list[int]:
    return [b.get("max_tokens") or b.get("max_completion_tokens") for b in gateway.bodies]


# ---------------------------------------------------------------------------- finish_reason "length"


def test_a_truncated_reply_is_asked_again_with_twice_the_allowance_not_repaired(gateway, ledger, tmp_path) -> None:
    gateway.push(truncated(CUT, completion_tokens=2048), completion(json.dumps(GOOD)))
    report = run_ask(gateway, ledger, tmp_path)
    assert report.status == "ok" and report.requests == 2 and report.risk_notes == GOOD["risk_notes"]
    assert caps(gateway) == [2048, 4096]
    assert gateway.bodies[1]["messages"] == gateway.bodies[0]["messages"]  # the same question, no repair request
    assert report.completion_tokens == 2048 + 321  # the cut reply's tokens are spent and counted


def test_a_reply_cut_off_twice_stops_and_says_at_which_limits(gateway, ledger, tmp_path) -> None:
    gateway.push(truncated(CUT, completion_tokens=2048), truncated(CUT, completion_tokens=4096))
    report = run_ask(gateway, ledger, tmp_path)
    assert report.status == "error" and len(gateway.requests) == 2  # no repair request cut off the same way
    assert 'cut off at max_tokens 2048 (finish_reason "length"), and again at max_tokens 4096' in phrase(report.reason)
    assert "not valid JSON" not in phrase(report.reason) and "repair" not in phrase(report.reason)
    assert [r.total_tokens for r in ledger.usage()] == [1234 + 2048, 1234 + 4096]


def test_a_larger_allowance_that_does_not_fit_the_budget_is_not_sent(gateway, ledger, tmp_path) -> None:
    gateway.push(truncated(CUT, completion_tokens=20000))
    report = run_ask(gateway, ledger, tmp_path, OPGATE_AGENT_MAX_TOKENS="20000", OPGATE_BUDGET_WEEKLY_DEEPGEMM="50000")
    assert report.status == "error" and len(gateway.requests) == 1
    assert "cut off at max_tokens 20000" in phrase(report.reason)
    assert "max_tokens 40000 does not fit the budget" in phrase(report.reason)
    assert [r.status for r in ledger.usage()] == ["ok", "over_budget"]


def test_a_truncated_repair_reply_is_not_asked_again(gateway, ledger, tmp_path) -> None:
    gateway.push(completion("Sure! {risk_notes: [..."), truncated(CUT))
    report = run_ask(gateway, ledger, tmp_path)
    assert report.status == "error" and len(gateway.requests) == 2
    assert "not valid JSON" in phrase(
        report.reason
    ) and "the repair reply: the reply was cut off at max_tokens 2048" in (phrase(report.reason))


# ---------------------------------------------------------------------------- content null with tool_calls


def test_a_tool_call_reply_says_so_in_the_repair_and_the_report(gateway, ledger, tmp_path) -> None:
    gateway.push(tool_calls("run_shell"), tool_calls("run_shell", "read_file"))
    report = run_ask(gateway, ledger, tmp_path)
    assert report.status == "error"
    repair = gateway.bodies[1]["messages"][-1]["content"]
    assert "no text (content null) but 1 tool call(s) (run_shell)" in repair
    assert "2 tool call(s) (run_shell, read_file); opgate offers no tools" in phrase(report.reason)
    assert "not valid JSON" not in phrase(report.reason)


def test_a_tool_call_reply_then_an_answer_is_fine(gateway, ledger, tmp_path) -> None:
    gateway.push(tool_calls("run_shell"), completion(json.dumps(GOOD)))
    report = run_ask(gateway, ledger, tmp_path)
    assert report.status == "ok" and report.requests == 2


# ---------------------------------------------------------------------------- DeepSeek usage


def test_deepseek_cache_hits_are_recorded_as_cached_tokens(gateway, ledger, tmp_path) -> None:
    gateway.push(deepseek(json.dumps(GOOD), prompt=1500, completion_tokens=200, hit=1280))
    report = run_ask(gateway, ledger, tmp_path)
    assert report.status == "ok"
    (row,) = ledger.usage()
    assert (row.prompt_tokens, row.completion_tokens, row.cached_tokens, row.usage_source) == (
        1500,
        200,
        1280,
        "reported",
    )


# ---------------------------------------------------------------------------- per domain: the cap's name, temperature


def test_a_domain_sends_max_completion_tokens_and_no_temperature(gateway, ledger, tmp_path) -> None:
    gateway.push(completion(json.dumps(GOOD)))
    config = domain_config(max_tokens_field="max_completion_tokens", send_temperature=False)
    report = run_ask(gateway, ledger, tmp_path, config)
    assert report.status == "ok"
    (sent,) = gateway.bodies
    assert sent["max_completion_tokens"] == 2048 and "max_tokens" not in sent and "temperature" not in sent


def test_by_default_max_tokens_and_the_temperature_are_sent(gateway, ledger, tmp_path) -> None:
    gateway.push(completion(json.dumps(GOOD)))
    run_ask(gateway, ledger, tmp_path)
    (sent,) = gateway.bodies
    assert (sent["max_tokens"], sent["temperature"]) == (2048, 0.1) and "max_completion_tokens" not in sent


def test_a_bad_domain_key_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "opgate.toml").write_text(
        '[domains.moe]\nweekly_budget = 1000\nrequest_budget = 100\nmax_tokens_field = "max_output_tokens"\n'
    )
    with pytest.raises(InputError, match=r"domains\.moe\.max_tokens_field: Input should be 'max_tokens' or"):
        load_config(tmp_path)


# ---------------------------------------------------------------------------- the CI summary request, the same rules


def test_the_ci_summary_request_follows_the_same_rules(gateway, tmp_path) -> None:
    from tests.ci_summary_world import failing, reply_for
    from tests.test_ci_summary import ask as ask_summary
    from tests.test_ci_summary import settings_for

    settings = settings_for(gateway, tmp_path)
    gateway.push(truncated('{"summary": "cpu_seq_8192 is wr'), completion(json.dumps(reply_for(failing()))))
    r = ask_summary(failing(), settings, tmp_path)
    assert r.ci_summary is not None and r.ci_summary.agent.status == "ok" and caps(gateway) == [2048, 4096]
    gateway.push(tool_calls("search_logs"), tool_calls("search_logs"))
    again = ask_summary(failing().model_copy(update={"head_sha": "2" * 40}), settings, tmp_path)
    assert again.ci_summary is not None and again.ci_summary.agent.status == "error"
    assert "1 tool call(s) (search_logs)" in gateway.bodies[3]["messages"][-1]["content"]
