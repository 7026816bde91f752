"""The ledger's rows as pydantic models: agent usage, acceptances, verdicts, reservations, cached replies, the
agent's expectations and proposals."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from bot.models.finding import Phrase


class BaselineRow(BaseModel):
    """Base latency of one case, keyed by (base SHA, base build key, case, device, torch, driver)."""

    cache_key: str
    base_sha: str
    kernel: str
    case_name: str
    device_name: str
    p50_ms: float
    samples: int
    max_abs_err: float | None = None
    created_at: str = ""


class UsageRow(BaseModel):
    """One row of `operator_agent_usage`: one attempt at the gateway (or a cache hit, or a refusal).

    The first six columns are the users' own; the rest is what an audit needs. Never a key: only
    its fingerprint (a sha256 prefix).
    """

    task_id: str
    model_name: str
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    request_id: str
    domain: str
    key_fingerprint: str
    pr: int | None
    head_sha: str
    status: str  # ok | error | cached | over_budget
    status_code: int | None = None
    latency_ms: float | None = None
    usage_source: str = "reported"  # reported | estimated | missing | cache | none
    created_at: str = ""
    call_id: str | None = None
    attempt: int = 1
    error_type: str | None = None
    wire: str = "openai"
    cached: bool = False
    cached_tokens: int = 0
    reasoning_tokens: int = 0
    estimated_prompt_tokens: int | None = None
    estimate_ratio: float | None = None
    purpose: Literal["review", "tune"] = "review"  # what asked: a review, or an `opgate tune` round
    tuning_run: str | None = None  # the tuning run it belongs to (purpose "tune")


class AcceptanceRow(BaseModel):
    """One `/accept` that was granted, bound to the head SHA it was given for."""

    pr: int
    head_sha: str
    login: str
    role: str
    kernels: list[str]
    override: bool = False
    reason: str = ""
    comment_id: int
    created_at: str = ""


class VerdictRow(BaseModel):
    """One kernel's verdict in one recorded review (what the runner decided locally)."""

    review_id: int
    kernel: str
    domain: str
    changed: bool
    verdict: str
    created_at: str


class ReservationRow(BaseModel):
    """Tokens held against a domain's weekly budget for one gateway call, until settled or released."""

    call_id: str
    domain: str
    week: str
    reserved_tokens: int
    settled_tokens: int | None = None
    state: Literal["reserved", "settled", "released"]
    created_at: str
    updated_at: str


class CachedReply(BaseModel):
    """A stored gateway reply, keyed by sha256 of (wire, model, request body)."""

    cache_key: str
    model: str
    wire: str
    content: str
    prompt_tokens: int
    completion_tokens: int
    created_at: str


class ExpectationRow(BaseModel):
    """One row of `agent_expectations`: an agent's expected metric beside what the review measured (a report's
    ExpectationCheck, with the review, kernel and domain it belongs to), or what a tune candidate's trial measured."""

    review_id: int | None = Field(None, description="the review's; None for an `opgate tune` candidate's")
    tuning_run: str = Field("", description="the `opgate tune` run whose agent proposed the candidate")
    candidate_key: str = Field("", description="the tune candidate the expectation is of (its config key)")
    created_at: str = ""
    head_sha: str = ""
    pr: int | None = None
    kernel: str
    domain: str
    metric: str
    expected: str = Field(description="the agent's value as JSON (a number or a string)")
    quantity: str = ""
    subject: str = ""
    expected_value: float | None = None
    measured: float | None = None
    low: float | None = None
    high: float | None = None
    unit: str = ""
    outcome: Literal["inside", "outside", "not_measured"]
    note: str = Field(
        "",
        description="the check's note (ExpectationCheck.note), its phrase as JSON; in a row written before report "
        "schema /3 its English",
    )

    @field_validator("note", mode="before")
    @classmethod
    def _as_json(cls, note: Any) -> Any:
        """A check's phrase (or its dump) as JSON; none as ""."""
        if note is None:
            return ""
        return Phrase.model_validate(note).model_dump_json() if isinstance(note, Phrase | dict) else note

    def said(self) -> dict[str, Any] | str:
        """The note as ExpectationCheck reads it: its phrase, or an older row's English (read as report /2's)."""
        return Phrase.model_validate_json(self.note).model_dump() if self.note.startswith("{") else self.note


ProposalKind = Literal["candidate", "tune", "agent_case"]


class ProposalRow(BaseModel):
    """Something the agent proposed and the local runner judged: a candidate patch (`--try-candidates`), an
    `opgate tune` candidate the agent proposed, a case of its test matrix. `passed`: the candidate passed its gates,
    or the agent's case found a bug (head fails where base passes)."""

    created_at: str
    domain: str
    kernel: str
    kind: ProposalKind
    name: str = ""
    verdict: str
    passed: bool


def p50_band(base_p50_ms: float | None, low_pct: float | None, high_pct: float | None) -> tuple[float, float] | None:
    """A paired interval of head/base as a p50 band in ms (base p50 × (1 + the interval)); None without all three."""
    if base_p50_ms is None or low_pct is None or high_pct is None:
        return None
    return base_p50_ms * (1 + low_pct / 100), base_p50_ms * (1 + high_pct / 100)


class CaseFigure(BaseModel):
    """One case of one kernel at one main commit, on one device: head (this commit) against base (the one before).
    A row of the ledger's main_figures: `opgate history record` writes it (bot/mainline), the dashboard and the drift
    watch read it, and the agent's prompt reads base's (`Ledger.main_case_figures`)."""

    model_config = ConfigDict(frozen=True)

    sha: str
    base_sha: str
    kernel: str
    domain: str
    case_name: str
    device: str  # cpu | cuda
    device_name: str  # the GPU's model and architecture ("NVIDIA H100 80GB HBM3 · sm_90"), or "cpu"
    p50_ms: float
    base_p50_ms: float | None = None
    regression_pct: float | None = None
    ci_low_pct: float | None = None
    ci_high_pct: float | None = None
    max_abs_err: float | None = None
    verdict: str
    committed_at: str

    @property
    def ratio(self) -> float | None:
        """head ÷ base p50 as measured interleaved in the same process; None without a base."""
        if self.regression_pct is not None:
            return 1.0 + self.regression_pct / 100.0
        if self.base_p50_ms:
            return self.p50_ms / self.base_p50_ms
        return None

    @property
    def band_ms(self) -> tuple[float, float] | None:
        """The p50's 95 % interval in ms (its parent's p50 × (1 + the paired interval)); None without both."""
        return p50_band(self.base_p50_ms, self.ci_low_pct, self.ci_high_pct)


class MainResourceRow(BaseModel):
    """One compiled function of main's history as the agent's prompt reads it (main_resources)."""

    sha: str
    function: str
    arch: str
    registers: int
    spill_bytes: int = 0
    smem_bytes: int = 0
    stack_bytes: int = 0
    threads: int | None = None
