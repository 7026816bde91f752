"""Ask the ci_summary domain once per review, after the gates: facts → prompt → cache → budget → gateway → reply."""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import requests
from pydantic import BaseModel, ConfigDict

from bot.agent import estimate
from bot.agent.ci_summary_reply import CiSummaryReply, contradictions, parse_ci_summary
from bot.agent.client import validate_base_url
from bot.agent.exchange import Cache, Reader, exchange, sanitise
from bot.agent.prompt import render_prompt
from bot.agent.run import Call, Said, cache_key, cached, said
from bot.config.repo import CI_SUMMARY_DOMAIN
from bot.config.settings import Settings
from bot.config.task import AgentTask, load_task
from bot.errors import InputError
from bot.ledger import Ledger
from bot.models.agent_report import AgentReport, CiSummary, CiSummaryCause
from bot.models.ci_summary import CaseFacts, CiSummaryFacts, KernelFacts
from bot.models.finding import Phrase
from bot.text.i18n import LANGUAGES
from bot.text.safe import one_line

log = logging.getLogger(__name__)

# The prompt's DATA markers: untrusted text that holds one is changed so that it cannot end the data block.
MARKERS = {"DATA>>>": "DATA> >>", "<<<DATA": "<< <DATA"}


class Level(BaseModel):
    """How much of the facts one prompt carries: log tail characters, cases, list items and case names per kernel,
    characters per text."""

    model_config = ConfigDict(frozen=True)

    log_chars: int
    cases: int
    items: int
    names: int
    text_chars: int
    note: str = ""


LEVELS = (
    Level(log_chars=2_000, cases=50, items=20, names=100, text_chars=1_000),
    Level(
        log_chars=600, cases=20, items=10, names=30, text_chars=500, note="log tails cut to their last 600 characters"
    ),
    Level(
        log_chars=150,
        cases=8,
        items=5,
        names=10,
        text_chars=300,
        note="log tails cut to 150 characters; per kernel 8 cases, 5 notes, 10 names of the others",
    ),
    Level(
        log_chars=0,
        cases=3,
        items=2,
        names=0,
        text_chars=200,
        note="log tails and the names of passed and not-run cases left out; per kernel 3 cases, 2 notes",
    ),
)


def clean(value: Any, secrets: list[str]) -> Any:
    """Every string of `value` (nested) with each known secret masked, terminal escapes removed and no DATA marker."""
    if isinstance(value, str):
        text = sanitise(value, secrets)
        for marker, inert in MARKERS.items():
            text = text.replace(marker, inert)
        return text
    if isinstance(value, dict):
        return {clean(k, secrets): clean(v, secrets) for k, v in value.items()}
    if isinstance(value, list):
        return [clean(v, secrets) for v in value]
    return value


def facts_json(facts: CiSummaryFacts, secrets: list[str]) -> str:
    """The facts as the prompt's data: compact JSON (empty fields left out), secrets masked."""
    data = clean(facts.model_dump(exclude_defaults=True, exclude={"left_out"}), secrets)
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"))


def messages(task: AgentTask, facts: CiSummaryFacts, secrets: list[str], locale: str = "en") -> list[dict[str, str]]:
    """System and user messages for these facts (nothing shortened here), asking for an answer in `locale`."""
    kernels = [(k.name, k.verdict) for k in facts.kernels]
    system = render_prompt("ci_summary_system.md.j2", task=task, kernels=kernels, language=LANGUAGES.get(locale))
    user = render_prompt(
        "ci_summary_user.md.j2",
        task=task,
        task_json=task.model_dump_json(),
        kernels=kernels,
        left_out=facts.left_out,
        facts=facts_json(facts, secrets),
    )
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def _tail(text: str, chars: int) -> str:
    return "" if chars <= 0 else text[-chars:]


def shaped(facts: CiSummaryFacts, level: Level) -> CiSummaryFacts:
    """The facts at one level: log tails clipped to their end, the first cases and list items of each kernel."""
    n, chars = level.items, level.text_chars

    def texts(items: list[str], count: int) -> list[str]:
        return [t if len(t) <= chars else t[: chars - 1] + "…" for t in items[:count]]

    def case(c: CaseFacts) -> CaseFacts:
        return c.model_copy(update={"log_tail": _tail(c.log_tail, level.log_chars), "reasons": texts(c.reasons, n)})

    def kernel(k: KernelFacts) -> KernelFacts:
        return k.model_copy(
            update={
                "cases": [case(c) for c in k.cases[: level.cases]],
                "passed": k.passed[: level.names],
                "not_run": {texts([why], 1)[0]: names[: level.names] for why, names in k.not_run.items()},
                "logs": {name: t for name, text in k.logs.items() if (t := _tail(text, level.log_chars))},
                "reasons": texts(k.reasons, max(n, level.cases)),
                "undecided": texts(k.undecided, n),
                "accept_needed": texts(k.accept_needed, n),
                "notes": texts(k.notes, n),
                "resources": k.resources[: 2 * n],
                "risk_notes": texts(k.risk_notes, n),
            }
        )

    left_out = [*facts.left_out, *([level.note] if level.note else [])]
    return facts.model_copy(update={"kernels": [kernel(k) for k in facts.kernels], "left_out": left_out})


class Prompt(BaseModel):
    """The messages sent, the facts they carry and their estimated size."""

    messages: list[dict[str, str]]
    facts: CiSummaryFacts
    tokens: int


def trim(task: AgentTask, facts: CiSummaryFacts, budget: int, secrets: list[str], locale: str = "en") -> Prompt:
    """The first level whose prompt fits `budget` tokens; the smallest one when none fits (the caller refuses it)."""
    prompt = None
    for level in LEVELS:
        used = shaped(facts, level)
        msgs = messages(task, used, secrets, locale)
        prompt = Prompt(messages=msgs, facts=used, tokens=estimate.count_messages(msgs))
        if prompt.tokens <= budget:
            break
    assert prompt is not None
    return prompt


def _task(settings: Settings, variable: str) -> tuple[AgentTask | None, Said | None]:
    """The summary's task file, or None and why it cannot be used."""
    where = f"[domains.{CI_SUMMARY_DOMAIN}] task in {settings.repo_config.where()}"
    path = settings.repo_config.task_path(CI_SUMMARY_DOMAIN)
    if path is None:
        return None, Phrase(key="ci.no_task", params={"domain": CI_SUMMARY_DOMAIN, "where": where})
    if not path.is_file():
        return None, Phrase(key="ci.task_missing", params={"path": str(path), "where": where})
    try:
        task = load_task(path)
        validate_base_url(task.provider.base_url)
    except InputError as exc:
        return None, refused(exc)
    if task.provider.api_key_env != variable:
        named = task.provider.api_key_env
        params = {"variable": named, "domain": CI_SUMMARY_DOMAIN, "expected": variable}
        return None, Phrase(key="ci.key_mismatch", params=params)
    return task, None


def refused(exc: InputError) -> Said:
    """A task file or base URL the input checks refused: its message, as written."""
    return Phrase(key="agent.gateway_error", params={"error": one_line(exc, limit=400)})


def not_configured() -> Said:
    return Phrase(key="ci.no_domain", params={"domain": CI_SUMMARY_DOMAIN})


OFFLINE: Said = Phrase(key="ci.offline")  # --offline given


def key_unset(variable: str) -> Said:
    return Phrase(key="ci.key_unset", params={"variable": variable})


def prompt_over_budget(tokens: int, limit: int) -> Said:
    variable = f"OPGATE_BUDGET_REQUEST_{CI_SUMMARY_DOMAIN.upper()}"
    return Phrase(key="ci.prompt_over_budget", params={"tokens": tokens, "limit": limit, "variable": variable})


def rejected(error: str, *, repaired: bool, why: Phrase | None = None) -> Said:
    """The reply failed validation or was cut off; `why`: `error` as a phrase of the catalog where opgate wrote it
    (AgentOutputError.why), else `error` is shown as written."""
    key = "ci.rejected_repair" if repaired else "ci.rejected"
    return Phrase(key=key, phrases={"error": [why]}) if why is not None else Phrase(key=key, params={"error": error})


def ask(
    facts: CiSummaryFacts,
    *,
    settings: Settings,
    ledger: Ledger,
    offline: bool,
    candidates_dir: Path,
    session: requests.Session | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> CiSummary:
    """One summary of the review the facts describe. Never raises for the gateway or the reply: the summary
    says what happened (not asked, over budget, failed), and the review is otherwise unchanged."""
    agent = AgentReport(status="offline", domain=CI_SUMMARY_DOMAIN)
    out = CiSummary(agent=agent)
    variable = settings.key_variable(CI_SUMMARY_DOMAIN)
    if variable is None:
        agent.status = "skipped"
        said(agent, not_configured())
        return out
    if offline:
        said(agent, OFFLINE)
        return out
    key = settings.agent_key_for(variable)
    if key is None:
        said(agent, key_unset(variable))
        return out
    task, unusable = _task(settings, variable)
    if task is None:
        agent.status = "skipped"
        if unusable is not None:
            said(agent, unusable)
        return out
    agent.model = task.model
    try:
        validate_base_url(settings.base_url_override or task.provider.base_url)
    except InputError as exc:
        agent.status = "skipped"
        said(agent, refused(exc))
        return out
    secrets = settings.secrets()
    limit = settings.budget_request.get(CI_SUMMARY_DOMAIN)
    prompt = trim(task, facts, limit, secrets, settings.locale)
    out.prompt_estimate, out.left_out = prompt.tokens, prompt.facts.left_out
    if prompt.tokens > limit:
        agent.status = "over_budget"
        said(agent, prompt_over_budget(prompt.tokens, limit))
        return out
    key_of_prompt = cache_key(settings.agent_wire, task.model, prompt.messages, settings.agent_max_tokens)
    call = Call(
        task, CI_SUMMARY_DOMAIN, settings, ledger, key=key, head_sha=facts.head_sha, pr=facts.pr, session=session,
        sleep=sleep,
    )  # fmt: skip
    answer = exchange(
        call,
        prompt.messages,
        reader(facts, settings.locale),
        keep_as=candidates_dir / f"{facts.head_sha[:12]}_{CI_SUMMARY_DOMAIN}",
        cache=Cache(ledger, key_of_prompt, settings.agent_wire),
    )
    answer.spend.onto(agent)
    if answer.outcome == "cached":
        agent.cached, agent.model = True, answer.model
        said(agent, cached(answer.cached_at))
    elif answer.outcome == "over_budget":
        agent.status = "over_budget"
        said(agent, answer.why or Phrase.as_written(answer.reason))
        return out
    elif answer.outcome == "gateway_error":
        agent.status = "error"
        said(agent, Phrase(key="agent.gateway_error", params={"error": answer.reason}))
        log.warning("the %s request failed: %s; the review is otherwise unchanged", CI_SUMMARY_DOMAIN, answer.reason)
        return out
    elif answer.outcome in ("cut", "rejected"):
        agent.status = "error"
        said(agent, rejected(answer.reason, repaired=answer.outcome == "rejected", why=answer.why))
        return out
    assert answer.reply is not None
    agent.status = "ok"
    return _filled(out, answer.reply, facts)


def reader(facts: CiSummaryFacts, locale: str = "en") -> Reader[CiSummaryReply]:
    """How the CI summary's reply is validated (CiSummaryReply, against the facts, in `locale`: a reply in another
    language is refused and repaired like any other) and repaired."""
    kernels = [k.name for k in facts.kernels]
    language = LANGUAGES.get(locale)
    return Reader(
        parse=lambda content: parse_ci_summary(content, facts, locale),
        repair=lambda error: render_prompt("ci_summary_repair.md.j2", error=error, kernels=kernels, language=language),
        what=f"{CI_SUMMARY_DOMAIN} reply",
    )


def _filled(out: CiSummary, reply: CiSummaryReply, facts: CiSummaryFacts) -> CiSummary:
    out.summary = reply.summary
    out.likely_cause = [CiSummaryCause(kernel=c.kernel, cases=c.cases, text=c.text) for c in reply.likely_cause]
    out.look_next, out.cannot_tell = list(reply.look_next), list(reply.cannot_tell)
    out.contradictions = contradictions(reply, facts)
    return out
