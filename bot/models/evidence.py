"""What the review measured of one kernel, before anything is decided: the gate's one input (`judge_kernel`)."""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from bot.models.agent_report import ProposedCase
from bot.models.cost import SimulatedCost
from bot.models.finding import Finding, Phrase
from bot.models.judging import CaseRun
from bot.models.report import AgentCaseRefusal, Build, DiffStat, ResourceCheckReport


class Peak(BaseModel):
    """What one device can do at most: compute in TFLOP/s and memory traffic in GB/s, and whose figures."""

    model_config = ConfigDict(frozen=True)

    tflops: float = Field(gt=0)
    gbps: float = Field(gt=0)
    of: Phrase = Field(description="whose: a data-sheet row (a GPU), or how this CPU runner measured itself")


class NotRun(StrEnum):
    """Why the review did not hand a case to the judge (the gate says what that means for the case)."""

    held_out = "held_out"  # left out of the tuning search (its re-verification runs it)
    other_job = "other_job"  # another architecture's job of the fan-out runs it
    wrong_gpu = "wrong_gpu"  # it names an architecture this runner's GPU is not
    no_gpu = "no_gpu"  # a cuda case on a machine without a GPU
    no_build = "no_build"  # kernel.toml has no build for its device
    head_build_failed = "head_build_failed"  # head's build for its device failed (base's may have too)
    artifact_refused = "artifact_refused"  # a build's artifact failed its hash check before the load


class CaseEvidence(BaseModel):
    """One case of `rules`: the judge's run, or why there was none; what the review measured around it."""

    model_config = ConfigDict(extra="forbid")

    name: str
    run: CaseRun | None = None
    not_run: NotRun | None = None
    detail: str = Field("", description="the facts behind `not_run` (which job runs it, why an artifact was refused)")
    log_tail: str = Field("", description="the workers' last output, secrets masked (PR code: untrusted)")
    simulated: SimulatedCost | None = Field(None, description="head and base counted under callgrind, when asked")
    identical_build: bool = Field(False, description="base and head built to the same key: one binary, not timed")
    prior_base_p50_ms: float | None = Field(
        None, description="the first p50 the ledger kept of the same base binary on this device (runner drift)"
    )


class AdmittedCase(BaseModel):
    """One entry of the agent's test matrix that base's [agent_cases] admitted, as the judge runs it: the manifest's
    device, the dtype [agent_cases] names (else that of its first case on the device), the entry's shape and params."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    device: Literal["cpu", "cuda"]
    dtype: str
    shape: dict[str, int] = Field(default_factory=dict)
    params: dict[str, Any] = Field(default_factory=dict)


class AgentAdmission(BaseModel):
    """Base's [agent_cases] applied once to the agent's test matrix (`bot/verdict/agent_cases.admit`): how many
    entries were proposed, the cases admitted (in the reply's order), every refused entry with its reason, and why
    none may run at all (no [agent_cases], a new kernel). The review runs the admitted cases; the gate judges them."""

    model_config = ConfigDict(extra="forbid")

    proposed: int = 0
    cases: list[AdmittedCase] = Field(default_factory=list)
    refused: list[AgentCaseRefusal] = Field(default_factory=list)
    note: str = ""


class Lineage(BaseModel):
    """The base kernel a head kernel new by name comes from (git's rename and copy detection), and how."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    base: str
    how: Literal["renamed", "copied"]
    share: float = Field(ge=0, le=1, description="the share of the head folder's bytes that come from base's")


class KernelEvidence(BaseModel):
    """Everything the review gathered of one kernel: what changed, the static findings, the builds, the resource
    checks, every case's run or why it was not run, and the machine. The review fills it; only the gate decides."""

    model_config = ConfigDict(extra="forbid")

    name: str
    domain: str
    changed: bool = False
    gathered: bool = Field(
        False, description="the review reached the gates (False: untouched, removed in head, or gated in another job)"
    )
    invalid: str = Field("", description="head's kernel.toml could not be read: the loader's error")
    new_kernel: bool = Field(False, description="base has no such kernel: judged by the manifest this change wrote")
    removed: bool = Field(False, description="head has no such kernel (renamed_to: where it went)")
    renamed_to: str = Field("", description="the head kernel this base kernel was renamed to")
    origin: Lineage | None = Field(None, description="the base kernel a kernel new by name was renamed or copied from")
    rules_changed: list[str] = Field(
        default_factory=list, description="changed files of base's rules (kernel.toml, the reference): base's hold"
    )
    gated_elsewhere: bool = Field(False, description="the agent was asked here; another job builds, runs and gates")
    unread: list[Finding] = Field(default_factory=list, description="changed files no gate reads, each with its reason")
    diff: DiffStat | None = None
    static: list[str | Finding] = Field(
        default_factory=list, description="tunable and flag findings (nothing was built)"
    )
    builds: dict[str, dict[str, Build]] = Field(default_factory=dict, description="head/base -> device -> its build")
    resource_checks: list[ResourceCheckReport] = Field(
        default_factory=list, description="the compile-only check of every architecture, the first one first"
    )
    cases: list[CaseEvidence] = Field(default_factory=list, description="every case of rules, in the manifest's order")
    device: Literal["cpu", "cuda"] = Field("cpu", description="what this machine runs: cuda when it has a GPU")
    arch: str | None = Field(None, description="this machine's GPU architecture (sm_90)")
    gpu: str | None = Field(None, description="this machine's GPU model")
    cpu_peak: Peak | None = Field(None, description="this CPU runner's measured peak, when a CPU case declares work")
    agent_matrix: list[ProposedCase] = Field(default_factory=list, description="the agent's test matrix, as proposed")
    agent_proposer: str = Field("", description="who proposed it (the agent's model)")
    agent_admission: AgentAdmission = Field(
        default_factory=AgentAdmission, description="what base's [agent_cases] admitted of the matrix (admitted once)"
    )
    agent_runs: list[CaseEvidence] = Field(
        default_factory=list, description="the admitted agent cases' runs, after the manifest's (base's bounds)"
    )

    def case(self, name: str) -> CaseEvidence | None:
        return next((c for c in self.cases if c.name == name), None)
