"""What each command's `--json` prints, as models: one JSON object per command, its keys pinned by docs/cli.md."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class Output(BaseModel):
    """A command's `--json` object; `text()` is the one line it prints."""

    model_config = ConfigDict(extra="forbid")

    def text(self) -> str:
        return self.model_dump_json()


class ReviewKernel(BaseModel):
    name: str
    domain: str
    verdict: str


class Posted(BaseModel):
    url: str
    status: str


class ReviewOutput(Output):
    """`opgate review --json`."""

    verdict: str
    summary: str
    kernels: list[ReviewKernel]
    unclaimed: str | None
    report: str
    comment: str
    service_errors: list[str]
    posted: Posted | None


class SlashOutput(Output):
    """`opgate accept --json`, `opgate ok-to-test --json`: ignored (why) or the decision; whether it was posted."""

    ignored: str | None = None
    granted: bool | None = None
    reason: str | None = None
    inputs: dict[str, str] | None = None
    posted: bool


class TrustOutput(Output):
    """`opgate trust --json`: whether the dispatched review runs, why, and the trust job's outputs."""

    run: bool
    moved_on: bool
    reason: str
    outputs: dict[str, str]


class RecordOutput(Output):
    """`opgate history record --json`."""

    branch: str
    head_sha: str
    base_sha: str
    pr: int | None
    cases: int
    functions: int
    kernels: list[str]
    carried: list[str] = Field(
        default_factory=list,
        description="what main already had of an absolute rule, noted 'in base too' by the review: `kernel: line`",
    )


class BisectSummary(Output):
    """`opgate bisect --json` (and each bisection of `history drift --json`)."""

    kernel: str
    case: str
    verdict: str
    first_bad: str | None
    suspects: list[str]
    probes: int
    measurements: int
    skipped: list[str]
    seconds: float
    reproduce: str
    path: str | None


class DriftKernel(BaseModel):
    kernel: str
    drift_pct: float | None
    case: str | None
    device: str | None
    flagged: bool
    gaps: list[str]
    issue: str | None
    bisections: list[dict[str, Any]] = Field(description="a bisection's summary, or why none ran and its command")


class Reference(BaseModel):
    label: str
    sha: str


class DriftOutput(Output):
    """`opgate history drift --json`."""

    reference: Reference
    commits: int
    limit_pct: float
    path: str
    kernels: list[DriftKernel]


class BudgetDomain(BaseModel):
    domain: str
    used: int
    reserved: int
    left: int
    budget: int
    pct_used: float
    anomaly: str
    flagged: bool


class BudgetOutput(Output):
    """`opgate ledger budget --json`."""

    week: str
    ledger: str
    domains: list[BudgetDomain]


class ExportOutput(Output):
    """`opgate ledger export --json`."""

    rows: int
    csv: str


class DashboardOutput(Output):
    """`opgate dashboard --json`."""

    index: str
    pages: list[str]
    bytes: int


class Issue(BaseModel):
    number: int
    url: str


class PayoffLine(Output):
    """One domain's payoff in `opgate summary --json`: expectations held, the pass rate now and a week before."""

    domain: str
    expectations_inside: float | None
    pass_rate: float | None
    pass_rate_before: float | None
    stop: bool


class SummaryOutput(Output):
    """`opgate summary --json`."""

    week: str
    path: str
    domains: list[dict[str, Any]]
    anomalies: list[str]
    payoff: list[PayoffLine]
    drift: list[dict[str, Any]]
    issue: Issue | None


class InitOutput(Output):
    """`opgate init --json`."""

    written: list[str]
    kept: list[str]
    skipped: list[dict[str, str]]
    notes: list[str]
    ignored: list[str]
    findings: list[dict[str, Any]]
    next: list[str]
