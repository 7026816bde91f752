"""What the CI summary is told about a finished review: the measured facts, as data for a prompt (pydantic only)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

# A number in the facts: rounded, or a flag, a pair (a CI), a string (a stop reason).
Number = float | int | bool | str | list[float] | None


class _Facts(BaseModel):
    model_config = ConfigDict(extra="forbid")


class CaseFacts(_Facts):
    """One case that did not pass: what was measured, against which limit, and why the gate said so."""

    name: str
    device: str
    status: str
    verdict: str
    numbers: dict[str, Number] = Field(default_factory=dict, description="max_abs_err, tolerance, p50 … (set ones)")
    failure: dict[str, Any] | None = Field(None, description="the first limit head broke: metric, output, index …")
    failed_probes: list[dict[str, Any]] = Field(default_factory=list)
    reasons: list[str] = Field(default_factory=list)
    log_tail: str = Field("", description="the workers' last output (PR code)")


class ResourceChange(_Facts):
    """One compiled function whose resources differ between base and head (None: the side has no such function)."""

    function: str
    base: dict[str, Number] | None
    head: dict[str, Number] | None


class KernelFacts(_Facts):
    """One changed kernel: its verdict and reasons, the cases that did not pass, resources, logs, diff, notes."""

    name: str
    domain: str
    verdict: str
    reasons: list[str] = Field(default_factory=list)
    undecided: list[str] = Field(default_factory=list)
    accept_needed: list[str] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)
    diff: dict[str, Any] | None = None
    cases: list[CaseFacts] = Field(default_factory=list, description="the cases that did not pass")
    counts: dict[str, int] = Field(default_factory=dict, description="cases that passed, did not pass, did not run")
    passed: list[str] = Field(default_factory=list, description="names of the cases that passed")
    not_run: dict[str, list[str]] = Field(default_factory=dict, description="why -> the cases that did not run")
    resources: list[ResourceChange] = Field(default_factory=list)
    resource_check: str | None = Field(None, description="the compile-only ptxas check's status when not ok")
    logs: dict[str, str] = Field(default_factory=dict, description="build head/base and ptxas log tails (PR code)")
    agent: str | None = Field(None, description="the kernel's agent review when it did not answer: status, reason")
    risk_notes: list[str] = Field(default_factory=list, description="the kernel's agent review (another model)")


class CiSummaryFacts(_Facts):
    """The review as the CI summary's prompt carries it (every string untrusted, every secret masked)."""

    base_sha: str
    head_sha: str
    pr: int | None = None
    verdict: str
    error: str | None = None
    kernels: list[KernelFacts]
    unchanged: list[str] = Field(default_factory=list, description="kernels the change does not touch")
    coverage: str | None = Field(None, description="changed kernel sources no manifest claims")
    left_out: list[str] = Field(default_factory=list, description="what was shortened to fit the request budget")

    def case_names(self) -> dict[str, set[str]]:
        """Kernel -> every case name it has in these facts (failing, passed, not run)."""
        return {
            k.name: {c.name for c in k.cases} | set(k.passed) | {n for names in k.not_run.values() for n in names}
            for k in self.kernels
        }
