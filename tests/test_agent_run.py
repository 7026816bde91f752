"""One agent run (bot/agent/run.py) against the local gateway: invalid replies, a quota 429, keys of another domain."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from bot.agent import run
from bot.agent.run import AgentFailed, ask, sanitise
from bot.config.settings import load_settings
from bot.spend import budget
from bot.wording.messages import phrase
from tests import agent_world
from tests.agent_world import CONFIG_DIFF, KERNEL, KEY, VARIABLE, change, run_ask
from tests.conftest import REPO_CONFIG
from tests.gateway import QUOTA_429, Step, completion

gateway = agent_world.gateway  # the fixture
ledger = agent_world.ledger  # the fixture
sqlite_ledger = agent_world.sqlite_ledger  # the fixture


def test_a_second_invalid_reply_is_an_error_with_both_replies_kept_sanitised(gateway, sqlite_ledger, tmp_path):
    gateway.push(completion(f"\x1b[31mno JSON\x1b[0m, your key is {KEY}"), completion("still no JSON"))
    report, _ = run_ask(gateway, sqlite_ledger, tmp_path)
    assert report.status == "error" and report.reason is not None
    assert "after one repair request" in phrase(report.reason)  # what the comment renders, in English
    kept = tmp_path / "agent_candidates"
    first = (kept / f"{'f' * 12}_deepgemm_tile.rejected.txt").read_text()
    assert first == "no JSON, your key is ***"
    assert (kept / f"{'f' * 12}_deepgemm_tile.rejected-repair.txt").read_text() == "still no JSON"
    assert sanitise(f"a\x07b{KEY}", [KEY]) == "ab***"


def test_a_quota_429_fails_the_agent_fast_and_releases_its_reservation(gateway, sqlite_ledger, tmp_path):
    gateway.push(Step(status=429, body=QUOTA_429))
    with pytest.raises(AgentFailed) as err:
        run_ask(gateway, sqlite_ledger, tmp_path)
    why = err.value.report.reason
    assert err.value.report.status == "error" and why is not None and VARIABLE in phrase(why)
    assert why.key == "agent.gateway_error" and phrase(why) == str(err.value)
    assert len(gateway.requests) == 1
    (reservation,) = sqlite_ledger.reservations(week=datetime.now(UTC).strftime("%G-W%V"))
    assert reservation.state == "released"
    assert [r.error_type for r in sqlite_ledger.usage()] == ["quota"]


def test_a_task_file_naming_another_domains_key_is_not_sent(gateway, sqlite_ledger, tmp_path):
    assert KERNEL.task is not None
    provider = KERNEL.task.provider.model_copy(update={"api_key_env": "TAOTOKEN_API_KEY_FLASHMLA_AGENT"})
    stray = KERNEL.model_copy(update={"task": KERNEL.task.model_copy(update={"provider": provider})})
    settings = load_settings({"TAOTOKEN_API_KEY_FLASHMLA_AGENT": KEY, "TAOTOKEN_BASE_URL": gateway.url}, REPO_CONFIG)
    report, _ = ask(
        stray,
        [change("kernels/deepgemm_tile/tile_config.json", CONFIG_DIFF)],
        settings=settings,
        ledger=sqlite_ledger,
        head_sha="f" * 40,
        pr=12,
        offline=False,
        candidates_dir=tmp_path / "agent_candidates",
    )
    assert report.status == "offline" and gateway.requests == []
    assert report.reason is not None and phrase(report.reason) == (
        "the task file names TAOTOKEN_API_KEY_FLASHMLA_AGENT, but the deepgemm domain's key is "
        "TAOTOKEN_API_KEY_DEEPGEMM_AGENT ([tool.opgate.domains.deepgemm] key): the agent was not asked"
    )


def test_every_reason_the_agent_room_gives_is_a_phrase_of_the_catalog_with_its_english():
    """bot/agent may not import the catalog: it stores each reason as a phrase (report.json's `reason`), which the
    comment renders in the team's language; in English each says what the agent room wrote before schema /3."""
    refused = budget.check(budget.BudgetState(domain="d", week="2026-W48", limit=10, used=9, reserved=1), 5)
    assert refused.why is not None and phrase(refused.why) == refused.reason
    not_asked = "the agent was not asked, the gates still run"
    reasons = [
        (run.no_task("k"), "k has no agent task file"),
        (run.key_mismatch("A_KEY", "d", "B_KEY"),
         "the task file names A_KEY, but the d domain's key is B_KEY ([tool.opgate.domains.d] key): the agent was "
         "not asked"),
        (run.key_unset("A_KEY"), "A_KEY is not set: the agent was not asked"),
        (run.prompt_over_budget(41_234, 32_000, "d"),
         f"the prompt needs 41234 tokens without any diff, over the per-request budget of 32000 "
         f"(OPGATE_BUDGET_REQUEST_D); {not_asked}"),
        (run.cached("2026-11-30T20:22:21+00:00"),
         "cached reply of 2026-11-30T20:22:21+00:00 for the same model and prompt: 0 tokens spent"),
        (run.over_budget(refused.reason, refused.why), f"{refused.reason}; {not_asked}"),
        (run.over_budget("the run's --tokens cap of 100 is spent", None),
         f"the run's --tokens cap of 100 is spent; {not_asked}"),
        (run.rejected("reply field x: bad", repaired=True),
         "agent reply rejected after one repair request: reply field x: bad"),
        (run.rejected("cut off", repaired=False), "agent reply rejected: cut off"),
        (run.OFFLINE, "--offline given: the agent was not asked"),
    ]  # fmt: skip
    assert [phrase(why) for why, _ in reasons] == [english for _, english in reasons]
    assert run.over_budget(refused.reason, refused.why).phrases["why"] == [refused.why]
