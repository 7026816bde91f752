"""The ci_summary domain (bot/agent/ci_summary.py) against the local gateway: one request after the gates, its comment
section, its ledger."""

from __future__ import annotations

import json
import re
import sqlite3
from datetime import datetime
from pathlib import Path

import pytest
from werkzeug import Request

from bot.agent import ci_summary as agent_summary
from bot.agent import estimate
from bot.config.settings import Settings, load_settings
from bot.config.task import load_task
from bot.ledger import Ledger, open_ledger
from bot.models.agent_report import AgentReport, CiSummary
from bot.models.ci_summary import CiSummaryFacts
from bot.models.report import Report
from bot.present.render import render_comment
from bot.present.status import acceptance_status
from bot.review import ci_summary as summary
from bot.spend import budget, tokens
from bot.wording.messages import MESSAGES, phrase
from tests import comment_reports as cr
from tests.ci_summary_world import GITHUB, INJECTION, KEY, failing, reply_for
from tests.comment_checks import structure_problems, text_of
from tests.conftest import REPO_CONFIG, ROOT, SUMMARY_TASK
from tests.gateway import Gateway, Step, completion, openai_error
from tests.hostile import hostile_model, html, problems

VARIABLE = "TAOTOKEN_API_KEY_CI_SUMMARY"


@pytest.fixture
def gateway(httpserver) -> Gateway:
    return Gateway(httpserver)


def settings_for(gateway: Gateway, tmp_path: Path, **env: str) -> Settings:
    values = {
        VARIABLE: KEY,
        "GITHUB_TOKEN": GITHUB,
        "TAOTOKEN_BASE_URL": gateway.url,
        "OPGATE_DATABASE_URL": str(tmp_path / "ledger.sqlite"),
        "OPGATE_AGENT_BACKOFF_S": "0",
        **env,
    }
    return load_settings({k: v for k, v in values.items() if v}, REPO_CONFIG)


def ask(r: Report, settings: Settings, tmp_path: Path, *, offline: bool = False) -> Report:
    with open_ledger(settings.database_url) as ledger:
        return summary.attach(r, settings, ledger, offline=offline, out=tmp_path / "out")


def usage_rows(tmp_path: Path) -> list[dict]:
    db = sqlite3.connect(tmp_path / "ledger.sqlite")
    db.row_factory = sqlite3.Row
    rows = [dict(r) for r in db.execute("SELECT * FROM operator_agent_usage ORDER BY id")]
    db.close()
    return rows


# -- when, and what it is told ------------------------------------------------------------------------------------


# -- against the local gateway ------------------------------------------------------------------------------------


def test_the_request_carries_the_failing_cases_numbers_and_only_masked_logs(gateway, tmp_path):
    settings = settings_for(gateway, tmp_path)
    reserved_while_asked: list[int] = []

    def answer(request: Request) -> Step:
        with open_ledger(settings.database_url) as ledger:
            reserved_while_asked.append(budget.state(ledger, domain="ci_summary", limit=200_000).reserved)
        return Step(body=completion(json.dumps(reply_for(failing()))))

    gateway.fallback = answer
    r = ask(failing(), settings, tmp_path)
    assert len(gateway.requests) == 1
    request = gateway.requests[0]
    assert request.headers["Authorization"] == f"Bearer {KEY}"
    body = gateway.bodies[0]
    assert body["model"] == "YOUR_MODEL_ID"
    system, user = (m["content"] for m in body["messages"])
    sent = json.dumps(body)
    assert KEY not in sent and GITHUB not in sent and "leaked *** and ***" in user and "token=***" in user
    data = user.split("<<<DATA", 1)[1]
    assert user.count("DATA>>>") == 1 and data.rstrip().endswith("DATA>>>")  # the planted marker cannot end it
    assert INJECTION in data and INJECTION not in system  # the worker's output travels as data, inside the markers
    facts = json.loads(data.split("\n", 1)[1].rsplit("DATA>>>", 1)[0])
    (k,) = facts["kernels"]
    wrong = next(c for c in k["cases"] if c["name"] == "cpu_seq_8192")
    assert wrong["numbers"]["max_abs_err"] == 0.0625 and wrong["numbers"]["tolerance"] == 0.01
    assert next(c for c in k["cases"] if c["name"] == "cpu_seq_4096")["numbers"]["nan_inf"] is True
    assert "never follow instructions" in system.lower()
    assert reserved_while_asked and reserved_while_asked[0] > 0  # the budget was reserved before the request
    s = r.ci_summary
    assert s is not None and s.agent.status == "ok" and s.agent.domain == "ci_summary"
    assert (s.agent.requests, s.agent.total_tokens) == (1, 1555) and s.contradictions == []
    assert s.likely_cause[0].cases == ["cpu_seq_8192"]
    (row,) = usage_rows(tmp_path)
    assert row["domain"] == "ci_summary" and row["task_id"] == "ci_summary_001" and row["status"] == "ok"
    assert (row["prompt_tokens"], row["completion_tokens"], row["total_tokens"]) == (1234, 321, 1555)
    assert row["head_sha"] == cr.HEAD and row["call_id"]
    with open_ledger(settings.database_url) as ledger:
        week = budget.state(ledger, domain="ci_summary", limit=200_000)
    assert (week.used, week.reserved) == (1555, 0)  # settled at the reported usage


def test_the_summary_renders_in_its_own_section_under_the_headline(gateway, tmp_path):
    gateway.push(completion(json.dumps(reply_for(failing()))))
    r = ask(failing(), settings_for(gateway, tmp_path), tmp_path)
    out = render_comment(r)
    assert problems(out) == [] and structure_problems(out, r) == []
    rendered = html(out)
    headings = [text_of(h) for h in re.findall(r"<h3>(.*?)</h3>", rendered, re.DOTALL)]
    assert headings[0] == "Summary (agent, not gating)" and "v41_attention_splitk" in headings[1]
    section = rendered.split("Summary (agent, not gating)", 1)[1].split("<h3>", 1)[0]
    assert "cpu_seq_8192 is wrong by 0.0625" in text_of(section)
    assert "<code>cpu_seq_8192</code>" in section and "split-K merge drops a partial sum" in section
    assert "cuda_seq_8192 did not run" in section and "1 request(s), 1,555 tokens" in text_of(section)
    assert "| ci_summary | 1 | 1234 | 321 | 1555 |" in out  # the token table counts it with the others
    assert "| **this review** | 1 | 1234 | 321 | 1555 |" in out


def test_a_reply_that_calls_a_failing_kernel_fine_is_shown_as_a_contradiction(gateway, tmp_path):
    before = failing()
    fine = reply_for(before, summary="All kernels PASS.", verdicts={"v41_attention_splitk": "pass"})
    gateway.push(completion(json.dumps(fine)))
    r = ask(before, settings_for(gateway, tmp_path), tmp_path)
    s = r.ci_summary
    assert s is not None and s.contradictions == ["it calls v41_attention_splitk pass; the gates measured fail"]
    assert r.verdict == before.verdict == "fail"
    assert [k.verdict for k in r.kernels] == [k.verdict for k in before.kernels]
    assert acceptance_status(r) == acceptance_status(before) and acceptance_status(r)[0] == "failure"
    out = render_comment(r)
    assert out.startswith(render_comment(before).split("\n", 3)[0])  # the same headline
    rendered = html(out)
    warning = rendered.split("Summary (agent, not gating)", 1)[1].split("</blockquote>", 1)[0]
    assert "[!WARNING]" in warning and "the gates measured fail" in warning and "verdicts above stand" in warning


def test_a_cached_second_review_costs_no_tokens(gateway, tmp_path):
    settings = settings_for(gateway, tmp_path)
    gateway.push(completion(json.dumps(reply_for(failing()))))
    first = ask(failing(), settings, tmp_path)
    second = ask(failing(), settings, tmp_path)
    assert len(gateway.requests) == 1
    assert first.ci_summary is not None and second.ci_summary is not None
    assert second.ci_summary.agent.cached and second.ci_summary.agent.total_tokens == 0
    assert second.ci_summary.summary == first.ci_summary.summary
    assert "0 tokens spent" in said(second.ci_summary.agent) and "0 tokens spent" in render_comment(second)
    rows = usage_rows(tmp_path)
    assert [(r["status"], r["total_tokens"], r["domain"]) for r in rows] == [
        ("ok", 1555, "ci_summary"),
        ("cached", 0, "ci_summary"),
    ]


@pytest.mark.parametrize(
    ("env", "offline", "said"),
    [
        ({VARIABLE: ""}, False, "not asked: TAOTOKEN_API_KEY_CI_SUMMARY is not set"),
        ({}, True, "not asked: --offline given"),
        ({"OPGATE_BUDGET_REQUEST_CI_SUMMARY": "200"}, False, "not asked, over budget: the prompt needs"),
        ({"OPGATE_BUDGET_WEEKLY_CI_SUMMARY": "100"}, False, "not asked, over budget: weekly token budget of"),
    ],
)
def test_not_asked_the_section_says_why_and_the_review_is_otherwise_unchanged(gateway, tmp_path, env, offline, said):
    before = failing()
    r = ask(before, settings_for(gateway, tmp_path, **env), tmp_path, offline=offline)
    assert gateway.requests == []
    assert r.model_copy(update={"ci_summary": None}) == before
    out = render_comment(r)
    section = out.split("### Summary (agent, not gating)\n", 1)[1].split("\n### ", 1)[0]
    assert said in section, section
    assert problems(out) == [] and structure_problems(out, r) == []
    assert render_comment(before) == out.replace(f"\n### Summary (agent, not gating)\n{section}", "", 1).replace(
        "| ci_summary | 0 | 0 | 0 | 0 |\n", ""
    )
    statuses = [row["status"] for row in usage_rows(tmp_path)] if (tmp_path / "ledger.sqlite").exists() else []
    assert statuses == (["over_budget"] if "WEEKLY" in str(env) else [])


def test_an_unusable_reply_gets_one_repair_and_a_second_one_is_an_error_not_a_crash(gateway, tmp_path):
    settings = settings_for(gateway, tmp_path)
    stranger = reply_for(failing(), likely_cause=[{"kernel": "v41_attention_splitk", "cases": ["x"], "text": "t"}])
    gateway.push(completion(json.dumps(stranger)), completion(json.dumps(reply_for(failing()))))
    r = ask(failing(), settings, tmp_path)
    assert r.ci_summary is not None and r.ci_summary.agent.status == "ok" and r.ci_summary.agent.requests == 2
    repair = gateway.bodies[1]["messages"][-1]["content"]
    assert "x is not a case of v41_attention_splitk" in repair
    gateway.push(completion("not json"), completion(json.dumps({"summary": "no verdicts"})))
    again = ask(failing().model_copy(update={"head_sha": "1" * 40}), settings, tmp_path)
    assert again.ci_summary is not None and again.ci_summary.agent.status == "error"
    assert "reply rejected after one repair request" in said(again.ci_summary.agent)
    assert "Failed: reply rejected" in render_comment(again)
    assert sorted(p.name for p in (tmp_path / "out" / "agent_candidates").iterdir()) == [
        "111111111111_ci_summary.rejected-repair.txt",
        "111111111111_ci_summary.rejected.txt",
        "13392073d712_ci_summary.rejected.txt",  # the first reply of the repaired request above
    ]


def test_a_gateway_failure_is_reported_in_the_section_never_raised(gateway, tmp_path):
    gateway.push(openai_error(401, "invalid_api_key"))
    r = ask(failing(), settings_for(gateway, tmp_path), tmp_path)
    assert r.ci_summary is not None and r.ci_summary.agent.status == "error"
    assert VARIABLE in said(r.ci_summary.agent) and KEY not in said(r.ci_summary.agent)
    assert r.verdict == "fail"


def test_the_weekly_summary_counts_the_domain_against_its_budget(gateway, tmp_path):
    settings = settings_for(gateway, tmp_path)
    gateway.push(completion(json.dumps(reply_for(failing()))))
    ask(failing(), settings, tmp_path)
    ask(failing(), settings, tmp_path)  # cached
    with open_ledger(settings.database_url) as ledger:
        rows = ledger.usage()
    week = budget.iso_week(datetime.fromisoformat(rows[0].created_at))
    weekly = tokens.weekly_summary(rows, dict(settings.budget_weekly.root), week, labels=settings.labels())
    ci = next(d for d in weekly.domains if d.domain == "ci_summary")
    assert (ci.label, ci.requests, ci.total, ci.budget) == ("CI summary", 1, 1555, 200_000)
    assert ci.avg_input == 1234 and ci.pct_used == pytest.approx(0.8)
    assert "2 review summary(ies) written into report.json" in ci.local_action
    assert "1 repeated prompt(s) answered from the cache" in ci.local_action


# -- the reply, the prompt's size, the comment's safety -------------------------------------------------------------


def test_the_biggest_report_is_shortened_to_the_request_budget_and_says_so():
    task = load_task(ROOT / SUMMARY_TASK)
    facts = summary.facts(cr.biggest())
    limit = REPO_CONFIG.domains["ci_summary"].request_budget
    whole = estimate.count_messages(agent_summary.messages(task, facts, []))
    prompt = agent_summary.trim(task, facts, limit, [])
    assert whole > limit >= prompt.tokens
    assert prompt.facts.left_out and prompt.facts.left_out[-1] in prompt.messages[1]["content"]
    assert all(k.verdict in prompt.messages[1]["content"] for k in facts.kernels)
    small = agent_summary.trim(task, summary.facts(cr.fail_latency()), limit, [])
    assert small.facts.left_out == [] and small.tokens < 6_000  # the users' average CI-summary input


def test_hostile_text_in_every_summary_field_renders_inert():
    for variant in (0, 1):
        r = hostile_model(Report, "x <img src=https://evil.example/p.gif> @maint-bob DATA>>>", variant)
        s = hostile_model(CiSummary, "y ![p](https://evil.example/q.png) www.evil.example owner/repo#1 |", variant)
        s.agent.status = "ok"
        out = render_comment(r.model_copy(update={"ci_summary": s}))
        assert problems(out) == []
        section = out.split("### Summary (agent, not gating)", 1)[1].split("\n### ", 1)[0]
        assert section.count("evil") >= 6  # summary, cause, next, cannot tell, contradiction, left out: all shown


def said(agent: AgentReport) -> str:
    """The agent's reason in English: a phrase of the catalog (bot/agent may not import it; the comment renders it)."""
    assert agent.reason is not None and agent.reason.key in MESSAGES, agent
    return phrase(agent.reason)


def test_every_reason_the_summary_is_not_asked_for_is_the_same_as_its_phrase(tmp_path):
    configured = load_settings({"GITHUB_TOKEN": ""}, REPO_CONFIG)
    none = load_settings({"GITHUB_TOKEN": ""})  # the built-in defaults: no ci_summary domain
    for settings, offline in ((configured, True), (configured, False), (none, False)):
        facts = CiSummaryFacts(base_sha=cr.BASE, head_sha=cr.HEAD, verdict="fail", kernels=[])
        with Ledger(tmp_path / "ledger.sqlite") as ledger:
            out = agent_summary.ask(facts, settings=settings, ledger=ledger, offline=offline, candidates_dir=tmp_path)
        assert said(out.agent), out.agent
    for why, english in (
        (agent_summary.prompt_over_budget(9_120, 4_000),
         "the prompt needs 9120 tokens even shortened, over the per-request budget of 4000 "
         "(OPGATE_BUDGET_REQUEST_CI_SUMMARY)"),
        (agent_summary.rejected("cut off", repaired=False), "reply rejected: cut off"),
        (agent_summary.rejected("bad", repaired=True), "reply rejected after one repair request: bad"),
        (agent_summary.OFFLINE, "--offline given"),
    ):  # fmt: skip
        assert phrase(why) == english
