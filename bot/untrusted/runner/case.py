"""One case as the judge sees it: what is known about it so far, and a side's outputs compared with the reference's."""

from __future__ import annotations

import time

import torch

from bot.config.manifest_tables import Limits
from bot.models.cost import CpuUse
from bot.models.finding import Phrase
from bot.models.judging import CaseRun, Check, Spot, Timing
from bot.phases import Phases
from bot.verdict import metrics
from bot.wording.messages import phrase

Input = torch.Tensor | None  # one of make_inputs' tensors; None: an optional tensor argument the case leaves out

PHASES = {"start": "phase.start", "check": "phase.check", "exit": "phase.exit", "timing": "phase.timing",
          "timing (loading inputs)": "phase.loading", "spot check": "phase.spot_check"}  # fmt: skip


def compare(
    outs: list[torch.Tensor],
    refs: list[torch.Tensor],
    names: list[str] | None = None,
    limits: Limits | None = None,
) -> Check:
    """Every metric of every output (bot/metrics.py); NaN/Inf must sit exactly where the reference has them.

    `max_abs_err` is the worst over all outputs (the users' gate); given `limits`, `failure` is the first one
    broken, with its first bad element."""
    if len(outs) != len(refs):
        return Check(error=f"returned {len(outs)} tensors, the reference {len(refs)}")
    for i, (o, r) in enumerate(zip(outs, refs, strict=True)):
        if tuple(o.shape) != tuple(r.shape):
            return Check(error=f"output {i} has shape {tuple(o.shape)}, the reference {tuple(r.shape)}")
    names = names if names is not None and len(names) == len(refs) else metrics.output_names(len(refs))
    outputs, failure = metrics.evaluate(outs, refs, names, limits)
    worst = max((m.max_abs_err or 0.0 for m in outputs), default=0.0)
    return Check(max_abs_err=worst, nan_inf=any(m.nan_inf for m in outputs), outputs=outputs, failure=failure)


def right(check: Check) -> bool:
    return check.error is None and not check.nan_inf and check.failure is None


def what_failed(check: Check) -> str:
    if check.error:
        return check.error
    if check.nan_inf:
        return "NaN/Inf where the reference has none"
    return f"max_abs_err {check.max_abs_err:.3g}"


class CaseState:
    """What is known about a case so far; where it was when something went wrong."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.label, self.phase = "setup", "setup"
        self.checks: dict[str, Check] = {}
        self.probes: dict[str, list[Check]] = {}
        self.probe_count: int | None = None
        self.probe_seconds: float | None = None
        self.started = time.perf_counter()
        self.timings: dict[str, Timing] = {}
        self.spots: dict[str, Spot] = {}
        self.cpu: dict[str, CpuUse] = {}
        self.notes: list[str] = []
        self.files: list[str] = []
        self.seed: int | None = None
        self.stop_reason: str | None = None
        self.tampered: Phrase | None = None  # why the measurement is rejected (bot/wording/messages.py measurement.*)
        self.other_cores: float | None = None
        self.noisy: Phrase | None = None
        self.phases = Phases()

    def enter(self, label: str, phase: str) -> None:
        self.label, self.phase = label, phase

    def where(self) -> str:
        return phrase(self.where_phrase())

    def where_phrase(self) -> Phrase:
        """Where the case was ("head timing (loading inputs)") as a phrase of the findings' catalog."""
        if self.label == "setup":
            return Phrase(key="where.setup")
        if self.phase.startswith("probe "):
            step = Phrase(key="phase.probe", params={"probe": self.phase.removeprefix("probe ")})
        elif self.phase in PHASES:
            step = Phrase(key=PHASES[self.phase])
        else:
            step = Phrase.as_written(self.phase)
        return Phrase(key="where.side", params={"side": self.label}, phrases={"phase": [step]})

    def result(self, status: str, detail: str | Phrase, output: str) -> CaseRun:
        """The case's run; `detail` why it did not finish (a phrase of the catalog; text without one, as written)."""
        why = detail if isinstance(detail, Phrase) else Phrase.as_written(detail) if detail else None
        if status == "ok" and self.tampered:
            status, why = "tampered", self.tampered
        if output and why is not None:
            last = output.splitlines()[-1][:300]
            why = Phrase(key="run.with_output", params={"worker_output": last}, phrases={"detail": [why]})
        return CaseRun(
            status=status,  # type: ignore[arg-type]
            detail=why,
            failed_label=self.label if status in ("timeout", "crashed") else None,
            checks=self.checks,
            probes=self.probes,
            probe_count=self.probe_count,
            probe_seconds=self.probe_seconds,
            case_seconds=round(time.perf_counter() - self.started, 4),
            timings=self.timings,
            spots=self.spots,
            cpu=self.cpu,
            stop_reason=self.stop_reason,
            seed=str(self.seed) if self.seed is not None else None,
            notes=self.notes,
            output_tail=output[-2000:],
            other_cores=self.other_cores,
            noisy=self.noisy,
            phases={
                **{k: round(v, 3) for k, v in self.phases.items()},
                "total": round(time.perf_counter() - self.started, 3),
            },
        )
