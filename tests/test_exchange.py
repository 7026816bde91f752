"""The one ask-and-repair path (bot/agent/exchange.py) of the review, the CI summary and tune, on the local gateway."""

from __future__ import annotations

import json

from bot.agent.exchange import Cache, exchange
from bot.agent.run import Call, reader
from bot.config.settings import load_settings
from tests import agent_world
from tests.agent_world import KERNEL, KEY, VARIABLE, Sleeps
from tests.conftest import REPO_CONFIG
from tests.gateway import completion

gateway = agent_world.gateway  # the fixture
sqlite_ledger = agent_world.sqlite_ledger  # the fixture

MESSAGES = [{"role": "system", "content": "answer in JSON"}, {"role": "user", "content": "review this"}]
GOOD = json.dumps({"candidate_patch": None, "risk_notes": ["tail rows"], "local_commands": [], "expected_metrics": {}})
BAD_FIELD = json.dumps({"risk_notes": "one string, not a list"})


def _call(gateway, ledger):
    settings = load_settings(
        {VARIABLE: KEY, "TAOTOKEN_BASE_URL": gateway.url, "OPGATE_AGENT_BACKOFF_S": "0", "GITHUB_TOKEN": ""},
        REPO_CONFIG,
    )
    assert KERNEL.task is not None
    call = Call(
        KERNEL.task, "deepgemm", settings, ledger, key=KEY, head_sha="a" * 40, pr=7, session=None, sleep=Sleeps()
    )
    return call, Cache(ledger, "sha256:test-prompt", settings.agent_wire)


def test_a_bad_reply_is_repaired_once_with_its_validation_error_and_the_spend_recorded(
    gateway, sqlite_ledger, tmp_path
):
    gateway.push(completion(BAD_FIELD, prompt=1000, completion_tokens=50), completion(GOOD, prompt=1100))
    call, cache = _call(gateway, sqlite_ledger)
    answer = exchange(call, MESSAGES, reader(KERNEL), keep_as=tmp_path / "stem", cache=cache)
    assert answer.outcome == "ok" and answer.reply is not None and answer.reply.risk_notes == ["tail rows"]
    assert len(gateway.bodies) == 2
    repair = gateway.bodies[1]["messages"]
    assert repair[:2] == MESSAGES and repair[2] == {"role": "assistant", "content": BAD_FIELD}
    assert "reply field risk_notes" in repair[3]["content"]
    assert (answer.spend.requests, answer.spend.prompt_tokens, answer.spend.completion_tokens) == (2, 2100, 371)
    assert [r.prompt_tokens for r in sqlite_ledger.usage()] == [1000, 1100]
    assert (tmp_path / "stem.rejected.txt").read_text() == BAD_FIELD
    again = exchange(call, MESSAGES, reader(KERNEL), keep_as=tmp_path / "stem", cache=cache)
    assert again.outcome == "cached" and again.spend.total_tokens == 0 and len(gateway.bodies) == 2
    assert [r.status for r in sqlite_ledger.usage()] == ["ok", "ok", "cached"]


def test_a_second_bad_reply_is_a_clear_failure_and_nothing_is_cached(gateway, sqlite_ledger, tmp_path):
    gateway.push(completion("no JSON at all"), completion(BAD_FIELD))
    call, cache = _call(gateway, sqlite_ledger)
    answer = exchange(call, MESSAGES, reader(KERNEL), keep_as=tmp_path / "stem", cache=cache)
    assert answer.outcome == "rejected" and answer.reply is None
    assert answer.reason == "reply field risk_notes: Input should be a valid list"
    assert len(gateway.bodies) == 2 and answer.spend.requests == 2
    assert (tmp_path / "stem.rejected-repair.txt").read_text() == BAD_FIELD
    assert sqlite_ledger.cached_reply(cache.key) is None
