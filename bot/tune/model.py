"""The tuning loop's records: trials (a candidate judged like a pull request), their cases, rounds and stops."""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from bot.models.agent_report import ExpectationCheck, ProposedCase
from bot.verdict.plausible import IMPLAUSIBLE

Source = Literal["base", "agent", "exhaustive", "policy", "verify"]
Outcome = Literal["judged", "reused", "repeat", "invalid", "malformed", "no_candidate", "base", "over_budget"]
StopKind = Literal["budget", "rounds", "plateau", "space", "converged"]

MIN_GAIN_PCT = 1.0  # a plateau is "not improved by this much"; a proposal must beat base by this much
WORST_CASE_PCT = 2.0  # the config best across all cases may leave no case slower than this (Δp50, %)
HANDOVER = "hand over to a person: review the search space"
_BROKEN = frozenset({"incorrect", "crashed", "timeout", "tampered", "compile_fail", "implausible"})


class CaseResult(BaseModel):
    """One case of a judged candidate, as the review reported it (Δp50 of candidate against base)."""

    model_config = ConfigDict(frozen=True)

    name: str
    status: str = "ok"
    verdict: str
    regression_pct: float | None = None
    ci95_pct: tuple[float, float] | None = None
    p50_ms: float | None = None
    base_p50_ms: float | None = None
    max_abs_err: float | None = None
    reason: str = ""

    @property
    def speedup(self) -> float | None:
        """base p50 ÷ candidate p50 (1.10: 10 % faster)."""
        if self.regression_pct is None or self.regression_pct <= -100.0:
            return None
        return 100.0 / (100.0 + self.regression_pct)

    @property
    def faster(self) -> bool:
        """Measurably faster than base: the case passed and its whole 95 % CI of Δp50 lies below zero."""
        return self.verdict in ("pass", "inconclusive") and self.ci95_pct is not None and self.ci95_pct[1] < 0

    @property
    def correct(self) -> bool:
        return self.status not in _BROKEN


def config_label(config: dict[str, Any]) -> str:
    return " ".join(f"{k}={v}" for k, v in config.items())


def candidate_label(key: str, config: dict[str, Any]) -> str:
    """The config, and for a candidate that changes more than the config file, its files' tree (short)."""
    if key.startswith("tree:"):
        return f"{config_label(config)} + files {key[5:13]}".strip()
    return config_label(config) or key[:20]


class Trial(BaseModel):
    """One candidate and what the judge said about it (the base itself is the trial of source "base")."""

    key: str
    config: dict[str, Any] = Field(default_factory=dict)
    source: Source
    status: Literal["judged", "error"]  # error: the review could not judge it (a crash, a hang)
    verdict: Literal["pass", "fail", "error"]
    cases: list[CaseResult] = Field(default_factory=list)
    reasons: list[str] = Field(default_factory=list)
    resources: str = ""
    seconds: float = 0.0
    patch: str = ""
    run_id: str = ""
    verify_of: str = ""
    id: int | None = None
    expectations: list[ExpectationCheck] = Field(
        default_factory=list, description="the proposer's expected metrics beside this trial's measurement"
    )

    @property
    def timed(self) -> list[CaseResult]:
        return [c for c in self.cases if c.speedup is not None]

    @property
    def speedup(self) -> float | None:
        """Geometric mean over the timed cases of base ÷ candidate (base: 1 by definition)."""
        if self.source == "base":
            return 1.0
        values = [c.speedup for c in self.timed if c.speedup is not None]
        if self.verdict == "error" or not values:
            return None
        return math.exp(sum(math.log(v) for v in values) / len(values))

    @property
    def correct(self) -> bool:
        return self.source == "base" or (
            self.status == "judged" and self.verdict != "error" and all(c.correct for c in self.cases)
        )

    @property
    def qualifies(self) -> bool:
        """Every gate passed and no case slower than WORST_CASE_PCT: a config that may be used for every case."""
        if self.source == "base":
            return True
        timed = self.timed
        return (
            self.status == "judged"
            and self.verdict == "pass"
            and bool(timed)
            and all(c.regression_pct is not None and c.regression_pct <= WORST_CASE_PCT for c in timed)
        )

    @property
    def label(self) -> str:
        return candidate_label(self.key, self.config)

    @property
    def implausible(self) -> list[str]:
        """The review's "implausible speedup — verify" lines: a case far faster than base, for a person to check."""
        return [r for r in self.reasons if r.startswith(IMPLAUSIBLE)]

    @property
    def problems(self) -> list[str]:
        """Why it did not pass: the kernel's own reasons and each failed case's reason (not both for one case)."""
        echoed = {f"{c.name}: {c.verdict}" for c in self.cases}
        own = [r for r in self.reasons if r not in echoed]
        return own + [f"{c.name}: {c.reason}" for c in self.cases if c.verdict in ("fail", "error") and c.reason]


class RoundEvent(BaseModel):
    """What happened in one round (an agent request, a policy step, one config of the exhaustive sweep)."""

    seq: int
    round: int
    source: Source
    outcome: Outcome
    key: str = ""
    tokens: int = 0
    elapsed_s: float = 0.0
    detail: str = ""


class Proposal(BaseModel):
    """A proposer's answer for one round: a candidate patch, or why there is none (and the tokens it spent)."""

    outcome: Literal["ok", "no_candidate", "malformed", "over_budget", "done"]
    patch: str | None = None
    detail: str = ""
    tokens: int = 0
    cached: bool = False
    test_matrix: list[ProposedCase] = Field(default_factory=list, description="the agent's cases for this candidate")
    proposer: str = Field("", description="who proposed the test matrix (the task's model)")
    expected_metrics: dict[str, float | str] = Field(
        default_factory=dict, description="what the agent expects the candidate to measure (held against its trial)"
    )


class Stop(BaseModel):
    """Why the loop stopped, named in the output; `handover` is the users' rule (budget spent, no gain)."""

    kind: StopKind
    detail: str
    handover: bool = False

    def line(self) -> str:
        text = f"{self.kind}: {self.detail}"
        return f"{text}; {HANDOVER}" if self.handover else text
