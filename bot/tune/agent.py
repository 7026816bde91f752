"""Ask the agent for the next tuning candidate: the task, the space and every measurement so far, within budgets."""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import requests
from pydantic import BaseModel

from bot.agent import estimate, prompt
from bot.agent.client import validate_base_url
from bot.agent.exchange import Cache, OverBudget, exchange
from bot.agent.materials import Piece
from bot.agent.prompt import render_prompt
from bot.agent.review import AgentReview
from bot.agent.run import Call, cache_key, reader
from bot.config.manifest import Kernel
from bot.config.repo import Material
from bot.config.settings import Settings
from bot.errors import InputError
from bot.ledger import Ledger
from bot.spend import budget
from bot.text.safe import one_line
from bot.tune.model import WORST_CASE_PCT, Proposal, RoundEvent, Trial
from bot.tune.space import config_path

log = logging.getLogger(__name__)
MAX_CELL = 240  # characters of untrusted text (errors) per table cell


class TableRow(BaseModel):
    round: int
    label: str
    verdict: str
    speedup: str
    cases: str
    resources: str
    errors: str


class View(BaseModel):
    """What one round's prompt shows besides the task: where the search stands."""

    round: int
    max_rounds: int | None
    tokens_left: int
    seen: int
    space_size: int
    rows: list[TableRow]
    notes: list[str]


def _cell(text: str) -> str:
    return one_line(text, MAX_CELL).replace("|", "/")


def table(events: Sequence[RoundEvent], trials: dict[str, Trial]) -> tuple[list[TableRow], list[str]]:
    """The measured candidates in the order they were first proposed (pure), and notes on the other rounds."""
    rows: list[TableRow] = []
    notes: list[str] = []
    shown: dict[str, int] = {}
    for e in events:
        t = trials.get(e.key)
        if e.outcome in ("malformed", "no_candidate", "over_budget", "invalid") and t is None:
            what = {
                "malformed": "your reply could not be used",
                "no_candidate": "you proposed no candidate",
                "over_budget": "the token budget refused the request",
                "invalid": "the candidate was refused",
            }
            why = f": {_cell(e.detail)}" if e.detail else ""
            notes.append(f"round {e.round}: {what[e.outcome]}{why}")
            continue
        if t is None:
            continue
        if e.key in shown:
            notes.append(f"round {e.round}: {t.label} again, answered from round {shown[e.key]} (not measured twice)")
            continue
        shown[e.key] = e.round
        if e.outcome == "base":
            notes.append(f"round {e.round}: {t.label} is the current config (speed x1.000 by definition)")
            continue
        cases = "; ".join(
            f"{c.name} {c.regression_pct:+.1f}%"
            + (f" [{c.ci95_pct[0]:+.1f}, {c.ci95_pct[1]:+.1f}]" if c.ci95_pct else "")
            + f" {c.verdict}"
            for c in t.timed
        )
        errors = "; ".join(t.problems)
        rows.append(
            TableRow(
                round=e.round,
                label=t.label,
                verdict=t.verdict,
                speedup=f"x{t.speedup:.3f}" if t.speedup is not None else "—",
                cases=cases or "—",
                resources=_cell(t.resources) or "—",
                errors=_cell(errors) or "—",
            )
        )
    return rows, notes


TUNE_LEAVES_OUT: frozenset[Material] = frozenset({"functions", "tunables"})  # no diff; the space is always shown


def messages(
    kernel: Kernel,
    view: View,
    *,
    config_text: str,
    example: tuple[str, str],
    limit: int,
    pieces: Sequence[Piece] = (),
    not_available: Sequence[str] = (),
) -> list[dict[str, str]]:
    """A round's system and user messages (pure), within `limit` tokens (the domain's per-request prompt budget):
    the task, the space and the trials so far first (the oldest rows, never the best, left out while even they are
    over it), then the domain's material `pieces` (the review's, through the same `prompt.fill`) in its order, as
    many as fit; `not_available`: the materials that could not be read, each with why."""
    task = kernel.task
    assert task is not None
    system = render_prompt(
        "tune_system.md.j2", task=task, config_path=config_path(kernel), **prompt.matrix_bounds(kernel)
    )

    def render(
        rows: list[TableRow], left_out: int, kept: Sequence[Piece], dropped: Sequence[str]
    ) -> list[dict[str, str]]:
        user = render_prompt(
            "tune_user.md.j2",
            task=task,
            task_json=task.model_dump_json(indent=2),
            kernel=kernel.name,
            config_path=config_path(kernel),
            config_text=config_text,
            tunables=kernel.manifest.tunables,
            space_size=view.space_size,
            seen=view.seen,
            worst_case_pct=f"{WORST_CASE_PCT:g}",
            round=view.round,
            max_rounds=view.max_rounds,
            tokens_left=view.tokens_left,
            example_patch=example[0],
            example_label=example[1],
            rows=rows,
            left_out=left_out,
            notes=view.notes,
            trusted=[p.text for p in kept],
            not_available=list(not_available),
            pieces_left_out=list(dropped),
        )
        return [{"role": "system", "content": system}, {"role": "user", "content": user}]

    rows, left_out = list(view.rows), 0
    best_label = best_row_label(view.rows)
    every_label = [p.label for p in pieces]
    while True:
        # the frame with every piece listed as left out: an upper bound on the final listing
        frame = estimate.count_messages(render(rows, left_out, (), every_label))
        droppable = [i for i, r in enumerate(rows) if r.label != best_label]
        if frame <= limit or not droppable:
            break
        rows.pop(droppable[0])
        left_out += 1
    kept, dropped = prompt.fill(pieces, limit - frame, estimate.count_messages)
    return render(rows, left_out, kept, dropped)


class _CappedCall(Call):
    """A gateway call that also respects the run's own token cap (`--tokens`), checked before the reservation."""

    def __init__(self, *args: Any, cap: Callable[[int], str | None], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.cap = cap

    def chat(self, messages: list[dict[str, str]], max_tokens: int | None = None) -> Any:
        estimated = estimate.count_messages(messages)
        need = budget.reservation_size(
            estimated, max_tokens or self.settings.agent_max_tokens, self.ledger.estimate_ratios(self.domain)
        )
        refused = self.cap(need)
        if refused is not None:
            self.record(self.row(f"local-{uuid.uuid4().hex}", status="over_budget", error_type="over_budget"))
            raise OverBudget(refused)
        return super().chat(messages, max_tokens)


class TuneAgent:
    """The agent as a proposer: one request per round (and at most one repair), every token in the ledger
    as a `tune` row of this run; a reply already given to the same prompt is reused (0 tokens)."""

    def __init__(
        self,
        kernel: Kernel,
        *,
        settings: Settings,
        ledger: Ledger,
        run_id: str,
        base_sha: str,
        config_text: str,
        example: tuple[str, str],
        token_limit: int,
        spent: Callable[[], int],
        candidates_dir: Path,
        materials: tuple[Sequence[Piece], Sequence[str]] = ((), ()),
        session: requests.Session | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if kernel.task is None:
            raise InputError(f"{kernel.name} has no agent task file: use --strategy exhaustive")
        key = settings.agent_key_for(kernel.task.provider.api_key_env)
        if key is None:
            raise InputError(
                f"{kernel.task.provider.api_key_env} is not set: the agent cannot be asked (--strategy exhaustive "
                "needs no key)"
            )
        validate_base_url(settings.base_url_override or kernel.task.provider.base_url)
        self.kernel, self.settings, self.ledger = kernel, settings, ledger
        self.run_id, self.config_text, self.example = run_id, config_text, example
        self.token_limit, self.spent = token_limit, spent
        self.candidates_dir = candidates_dir
        self.pieces, self.not_available = materials
        self.call = _CappedCall(
            kernel.task, kernel.manifest.domain, settings, ledger, key=key, head_sha=base_sha, pr=None,
            session=session, sleep=sleep, purpose="tune", tuning_run=run_id, cap=self._cap,
        )  # fmt: skip

    def _cap(self, need: int) -> str | None:
        spent = self.spent()
        if spent + need <= self.token_limit:
            return None
        return (
            f"the run's token budget of {self.token_limit:,} (--tokens) is spent: {spent:,} used, the next request "
            f"needs up to {need:,}"
        )

    def messages(self, view: View) -> list[dict[str, str]]:
        limit = self.settings.budget_request.get(self.kernel.manifest.domain)
        return messages(
            self.kernel, view, config_text=self.config_text, example=self.example, limit=limit, pieces=self.pieces,
            not_available=self.not_available,
        )  # fmt: skip

    def propose(self, view: View, stem: str) -> Proposal:
        """Ask once (one repair request for an unusable reply). GatewayError propagates (an outside service)."""
        messages = self.messages(view)
        task = self.kernel.task
        assert task is not None
        key = cache_key(self.settings.agent_wire, task.model, messages, self.settings.agent_max_tokens)
        answer = exchange(
            self.call,
            messages,
            reader(self.kernel),
            keep_as=self.candidates_dir / stem,
            cache=Cache(self.ledger, key, self.settings.agent_wire),
        )
        tokens = answer.spend.total_tokens
        if answer.outcome == "cached":
            log.info("round %s: the same prompt was answered before (%s): 0 tokens", view.round, answer.cached_at)
        elif answer.outcome == "gateway_error":
            assert answer.error is not None
            raise answer.error
        elif answer.outcome == "over_budget":
            return Proposal(outcome="over_budget", detail=answer.reason, tokens=tokens)
        elif answer.outcome in ("cut", "rejected"):
            return Proposal(outcome="malformed", detail=answer.reason, tokens=tokens)
        assert answer.reply is not None
        return _proposal(
            answer.reply, tokens=tokens, cached=answer.outcome == "cached", proposer=answer.model or task.model
        )


def _proposal(review: AgentReview, *, tokens: int, cached: bool = False, proposer: str = "") -> Proposal:
    if review.candidate_patch is None:
        return Proposal(
            outcome="no_candidate", tokens=tokens, cached=cached, detail="the reply's candidate_patch is null"
        )
    return Proposal(
        outcome="ok", patch=review.candidate_patch, tokens=tokens, cached=cached, test_matrix=review.test_matrix,
        proposer=proposer, expected_metrics=review.expected_metrics,
    )  # fmt: skip


def best_row_label(rows: Sequence[TableRow]) -> str | None:
    """The label of the fastest row (kept when the table is trimmed)."""
    scored = [(float(r.speedup[1:]), r.label) for r in rows if r.speedup.startswith("x") and r.verdict == "pass"]
    return max(scored)[1] if scored else None


__all__ = ["Proposal", "TableRow", "TuneAgent", "View", "messages", "table"]
