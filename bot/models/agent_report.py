"""The agent's part of report.json: each domain's agent (`AgentReport`: asked or not, tokens, its reply's risk notes,
candidate patch, expected metrics held against the measurements, test matrix) and the CI summary's reading."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from bot.models.before3 import READ_AS, UNPHRASED, phrase_of, phrases_of, speedup_read
from bot.models.finding import Phrase


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ProposedCase(BaseModel):
    """One entry of the agent's test matrix as its reply gives it (untrusted: base's [agent_cases] admits it or not)."""

    model_config = ConfigDict(extra="allow")  # an unknown key is refused with its reason, never dropped unseen

    name: str  # any text: the reply's size bounds it, a refusal shows its first 64 characters
    shape: dict[str, Any] = Field(default_factory=dict, max_length=16)
    params: dict[str, Any] = Field(default_factory=dict, max_length=16)


class ExpectationCheck(_Model):
    """One `expected_metrics` entry of the agent held against what the review measured (bot/verdict/expectations.py).

    inside: the expected value lies in the measured 95 % interval (a p50 change), equals the exact figure ptxas or the
    occupancy table gives (registers, spills, shared memory, occupancy), or bounds the measured error from above
    (max_abs_err); outside: it does not; not_measured: no measurement of this review matches the name (or the value
    is not a number)."""

    metric: str = Field(description="the agent's name for it (untrusted text)")
    expected: float | str = Field(description="the agent's value, as it sent it")
    quantity: str = Field("", description="what it was matched to: p50 change, p50, max_abs_err, registers, …")
    subject: str = Field("", description="the case, or the function (and architecture), whose figure it is")
    expected_value: float | None = Field(None, description="the expected value in the measured figure's unit")
    measured: float | None = None
    low: float | None = Field(None, description="the measured 95 % interval's low end (a p50 change or p50)")
    high: float | None = None
    unit: str = Field("", description="% (a change), ms, bytes, registers, % occupancy")
    outcome: Literal["inside", "outside", "not_measured"]
    note: Phrase | None = Field(None, description="why it was not measured, or how the value was read")

    @model_validator(mode="before")
    @classmethod
    def _before_3(cls, data: Any) -> Any:
        """/1, /2: `note` in English, its phrase beside it under `why` where it had one (why it was not measured);
        how a value was read had none: read back as the catalog's message for it."""
        note = data.get("note") if isinstance(data, dict) and data.get("why") is None else None
        read = (READ_AS.get(note) or speedup_read(note)) if isinstance(note, str) else None
        return phrase_of({**data, "why": read} if read is not None else data, "note")


class InlineNote(_Model):
    """A risk note that names a file and a line of the diff (head's side): posted on that line, in opgate's pull-request
    review of the head commit (bot/review/notes.py places it; the note's text is the agent's, untrusted)."""

    path: str = Field(description="the repository path the diff names")
    line: int = Field(description="the line in head's file, inside a hunk of the diff")
    note: str = Field(description="the risk note as the agent wrote it")


class AgentReport(_Model):
    status: Literal["ok", "offline", "skipped", "over_budget", "error"]
    domain: str | None = None
    kernel: str | None = Field(None, description="the kernel whose change it reviewed (None: a sum, or the summary)")
    model: str | None = None
    reason: Phrase | None = Field(None, description="why the agent was not asked or gave no reply")
    requests: int = 0
    cached: bool = False
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    usage_estimated: int = Field(
        0, description="answered requests whose usage the gateway did not report usably: tokens are estimated"
    )
    risk_notes: list[str] = Field(default_factory=list)
    candidate_patch: str | None = None
    local_commands: list[str] = Field(default_factory=list)
    expected_metrics: dict[str, float | str] = Field(default_factory=dict)
    inline_notes: list[InlineNote] = Field(
        default_factory=list, description="the risk notes that name a line inside the diff (posted on that line)"
    )
    expectations: list[ExpectationCheck] = Field(
        default_factory=list, description="each expected_metrics entry beside what was measured (the kernel's agent)"
    )
    test_matrix: list[ProposedCase] = Field(default_factory=list, description="cases the agent asks the judge to run")
    inputs: list[Phrase] = Field(default_factory=list, description="what the prompt carried besides the task and diff")
    inputs_missing: list[Phrase] = Field(
        default_factory=list, description="materials the domain asks for that were not available or left out for size"
    )

    @model_validator(mode="before")
    @classmethod
    def _before_3(cls, data: Any) -> Any:
        """/1, /2: `reason`, `inputs` and `inputs_missing` in English, their phrases beside them (`why`, `*_why`);
        the reasons they wrote without one read back as the catalog's message for them."""
        reason = data.get("reason") if isinstance(data, dict) and data.get("why") is None else None
        if isinstance(reason, str) and reason in UNPHRASED:
            data = {**data, "why": Phrase(key=UNPHRASED[reason])}
        data = phrase_of(data, "reason")
        for name in ("inputs", "inputs_missing"):
            data = phrases_of(data, name, f"{name}_why")
        return data


def _joined(reasons: list[Phrase]) -> Phrase | None:
    """Several agents' reasons as one phrase (joined by "; "); one as itself."""
    if len(reasons) < 2:
        return next(iter(reasons), None)
    return Phrase(key="agent.reasons", phrases={"reasons": reasons})


def aggregate_agents(agents: list[AgentReport]) -> AgentReport:
    """The report's `agent` block: the sum over every domain asked in this review."""
    if not agents:
        return AgentReport(status="skipped", reason=Phrase(key="agent.no_kernel_changed"))
    statuses = [a.status for a in agents]
    status = next((s for s in ("error", "over_budget", "ok", "offline") if s in statuses), "skipped")
    return AgentReport(
        status=status,  # type: ignore[arg-type]
        domain=",".join(sorted({a.domain or "" for a in agents})),
        model=",".join(sorted({a.model for a in agents if a.model})) or None,
        reason=_joined([a.reason for a in agents if a.reason is not None]),
        requests=sum(a.requests for a in agents),
        prompt_tokens=sum(a.prompt_tokens for a in agents),
        completion_tokens=sum(a.completion_tokens for a in agents),
        total_tokens=sum(a.total_tokens for a in agents),
        usage_estimated=sum(a.usage_estimated for a in agents),
        risk_notes=[n for a in agents for n in a.risk_notes],
        candidate_patch=next((a.candidate_patch for a in agents if a.candidate_patch), None),
    )


class CiSummaryCause(_Model):
    """One likely cause the CI summary names, tied to a kernel and its cases (agent text: untrusted)."""

    kernel: str | None = None
    cases: list[str] = Field(default_factory=list)
    text: str


class CiSummary(_Model):
    """The ci_summary domain's reading of what was measured: asked after the gates, never gating. `agent` says
    whether it was asked (status, reason, tokens); the rest is the validated reply, shown as untrusted text."""

    agent: AgentReport
    summary: str = ""
    likely_cause: list[CiSummaryCause] = Field(default_factory=list)
    look_next: list[str] = Field(default_factory=list)
    cannot_tell: list[str] = Field(default_factory=list, description="what the data cannot tell, as the reply says")
    contradictions: list[str] = Field(
        default_factory=list, description="where the reply contradicts a measured verdict (opgate's check)"
    )
    prompt_estimate: int = Field(0, description="the prompt's offline token estimate (cl100k_base)")
    left_out: list[str] = Field(default_factory=list, description="what the prompt left out or shortened for size")
