"""`tune.json` (schema opgate.tune/1) and `tune.md`: one tuning run's evidence, and the pull request's body."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from bot.models.report import Machine
from bot.present.render import render
from bot.text.safe import Safe
from bot.tune.analysis import Comparison, ShapeBest
from bot.tune.model import HANDOVER, MIN_GAIN_PCT, WORST_CASE_PCT, RoundEvent, Stop, Trial

TUNE_MARKER = Safe("<!-- opgate:tune -->")  # Safe: printed as is, the bot finds its comment by it


class TokenUse(BaseModel):
    """The run's agent requests (ledger rows of purpose `tune`) against its cap and the domain's week."""

    requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    limit: int = 0
    weekly_left: int | None = None


class Proposed(BaseModel):
    """The winner, re-verified: what the pull request carries."""

    key: str
    label: str
    config: dict[str, Any]
    patch: str
    speedup: float
    verified_speedup: float
    branch: str
    flags: list[str] = Field(default_factory=list, description="what a person must verify (implausible speedups)")


class PullOut(BaseModel):
    number: int
    url: str
    head_sha: str
    branch: str
    created: bool = True


class TuneResult(BaseModel):
    """Everything one `opgate tune` run found; `opgate tune --publish` reads it back (validated) to open the PR."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    schema_: Literal["opgate.tune/1"] = Field("opgate.tune/1", alias="schema")
    run_id: str
    kernel: str
    domain: str
    base_sha: str
    device_name: str
    strategy: Literal["agent", "exhaustive", "both", "policy"]  # policy: an offline proposer (benchmarks)
    resumed: bool = False
    config_path: str
    base_config: dict[str, Any]
    max_rounds: int
    rounds: int
    space_size: int
    seen: int
    stop: Stop
    sweep_stop: Stop | None = None
    events: list[RoundEvent] = Field(default_factory=list)
    trials: list[Trial] = Field(default_factory=list)
    best: Trial | None = None
    verified: Trial | None = None
    proposal: Proposed | None = None
    not_proposed: str = ""
    pass_rate: tuple[int, int] = (0, 0)
    per_shape: list[ShapeBest] = Field(default_factory=list)
    held_out: list[str] = Field(default_factory=list, description="cases the search never ran; the re-verification did")
    comparison: Comparison | None = None
    tokens: TokenUse = TokenUse()
    environment: Machine
    created_at: str
    opgate_version: str
    pull: PullOut | None = None

    def to_json(self) -> str:
        return self.model_dump_json(by_alias=True, indent=2) + "\n"

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for e in self.events:
            if e.source != "verify":
                out[e.outcome] = out.get(e.outcome, 0) + 1
        return out


def render_tune(result: TuneResult, *, pr_body: bool = False) -> str:
    """tune.md, or (pr_body) the pull request's body: the evidence table, the search, the tokens."""
    return render(
        "tune.md.j2",
        marker=TUNE_MARKER,
        r=result,
        pr_body=pr_body,
        counts=result.counts(),
        handover=HANDOVER,
        min_gain=f"{MIN_GAIN_PCT:g}",
        worst_case=f"{WORST_CASE_PCT:g}",
    )


def title(result: TuneResult) -> str:
    p = result.proposal
    assert p is not None
    flag = ", implausible speedup — verify" if p.flags else ""
    return f"opgate tune: {result.kernel} {p.label} (x{p.verified_speedup:.3f} re-verified{flag})"
