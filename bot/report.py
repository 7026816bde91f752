"""The `report.json` contract (schema opgate.report/1) as pydantic models."""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

SCHEMA = "opgate.report/1"


class CaseStatus(StrEnum):
    """What happened when a case ran (the measurement, not the judgement)."""

    ok = "ok"
    compile_fail = "compile_fail"
    incorrect = "incorrect"
    timeout = "timeout"
    crashed = "crashed"
    skipped = "skipped"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Resource(_Model):
    """One compiled GPU function as ptxas reports it."""

    function: str
    registers: int
    spill_bytes: int = 0
    spill_store_bytes: int = 0
    spill_load_bytes: int = 0
    smem_bytes: int = 0
    stack_bytes: int = 0


class Build(_Model):
    ok: bool
    seconds: float
    cached: bool
    device: Literal["cpu", "cuda"]
    resources: list[Resource] = Field(default_factory=list)
    key: str = ""
    log_tail: str = ""


class ResourceCheckReport(_Model):
    """The compile-only ptxas check of the kernel's .cu files (runs wherever nvcc is, GPU or not)."""

    status: Literal["ok", "no_nvcc", "compile_fail"]
    arch: str = "sm_90a"
    head: list[Resource] = Field(default_factory=list)
    base: list[Resource] = Field(default_factory=list)
    base_status: Literal["ok", "no_nvcc", "compile_fail"] | None = None
    threads: dict[str, int] = Field(default_factory=dict, description="function -> max threads per block")
    seconds: float = 0.0
    cached: bool = False
    log_tail: str = ""


class CaseReport(_Model):
    name: str
    device: Literal["cpu", "cuda"] = "cpu"
    status: CaseStatus = CaseStatus.ok
    max_abs_err: float | None = None
    tolerance: float
    nan_inf: bool = False
    p50_ms: float | None = None
    base_p50_ms: float | None = None
    regression_pct: float | None = None
    ci95_pct: list[float] | None = None
    samples: int = 0
    base_samples: int = 0
    stop_reason: str | None = None
    attempts: int = Field(1, description="measurements in fresh processes (2 after an inconclusive first)")
    base_drift_pct: float | None = Field(
        None, description="base p50 now vs the first measurement of the same base binary on this device"
    )
    verdict: Literal["pass", "fail", "inconclusive", "skipped", "error"]
    reasons: list[str] = Field(default_factory=list)


class KernelReport(_Model):
    name: str
    domain: str
    changed: bool
    verdict: Literal["pass", "fail", "skipped", "error"]
    reasons: list[str] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list, description="reported, never fatal (rollback size…)")
    build: Build | None = None
    base_build: Build | None = None
    resource_check: ResourceCheckReport | None = None
    cases: list[CaseReport] = Field(default_factory=list)
    candidate: KernelReport | None = Field(
        None, description="--try-candidates: the agent's patch on top of head, through the same gates"
    )


class AgentReport(_Model):
    status: Literal["ok", "offline", "skipped", "over_budget", "error"]
    domain: str | None = None
    model: str | None = None
    reason: str = ""
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


class Listed(_Model):
    """Some changed files: how many, and the first of their names (a PR can change thousands)."""

    total: int = 0
    names: list[str] = Field(default_factory=list, description="the first LISTED_NAMES, in diff order")


class Coverage(_Model):
    """What no gate read: changed files that are binary, over the size limit, or in no kernel's globs."""

    files: int = Field(0, description="files the diff changes")
    size_limit_bytes: int
    binary: Listed = Field(default_factory=Listed)
    large: Listed = Field(default_factory=Listed, description="over size_limit_bytes in head")
    unmatched: Listed = Field(default_factory=Listed, description="matched by no kernel's globs: no gate ran")


class Environment(_Model):
    device: Literal["cpu", "cuda"]
    gpu: str | None = None
    torch: str | None = None
    nvcc: str | None = None
    python: str


class Report(_Model):
    schema_: Literal["opgate.report/1"] = Field("opgate.report/1", alias="schema")
    base_sha: str
    head_sha: str
    pr: int | None = None
    verdict: Literal["pass", "fail", "error"]
    kernels: list[KernelReport]
    agents: list[AgentReport] = Field(default_factory=list)
    agent: AgentReport
    environment: Environment
    created_at: str
    opgate_version: str
    coverage: Coverage | None = None
    error: str | None = Field(None, description="why the review itself could not run (verdict error)")

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    def to_json(self) -> str:
        return self.model_dump_json(by_alias=True, indent=2) + "\n"
