"""A gate's finding as data: which gate, where, the measured value and its limit, and a message id with parameters."""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

Param = str | int | float


class Gate(StrEnum):
    """The gate that made a finding (the users' checklist names them: 正确性, 稳定性, 性能, 资源 …)."""

    correctness = "correctness"  # the head's outputs against the reference (random inputs, probes, timed calls)
    stability = "stability"  # NaN/Inf where the reference has none
    performance = "performance"  # latency and CPU time against base, and the simulated cost
    resources = "resources"  # ptxas resources, shared memory, occupancy, launches, per architecture
    plausibility = "plausibility"  # above the hardware's peak, or an implausible speed-up
    static = "static"  # tunables and compiler flags, before any build
    build = "build"  # head (or base) does not build
    coverage = "coverage"  # what was not run or not read: no case, no probes, files no gate read
    measurement = "measurement"  # the measurement was rejected (a worker broke its rules)
    run = "run"  # a side crashed, hung, produced nothing, or the case was not run
    manifest = "manifest"  # the kernel's kernel.toml or reference is unusable
    acceptance = "acceptance"  # only a person's /accept can pass it (a new kernel)
    review = "review"  # anything else the review reports beside the gates (a rename, a removed kernel)


class Outcome(StrEnum):
    """What a finding does to its kernel: fails it, errors it, leaves it undecided, asks for /accept, or informs."""

    fail = "fail"
    error = "error"
    undecided = "undecided"
    accept = "accept"
    note = "note"


class Phrase(BaseModel):
    """A piece of a message with its own message id (an element `out[1, 5]: got 0.1, reference 0.9`); its own
    `phrases` name sub-phrases its text holds like parameters (a skip reason inside "7 cuda cases (…)")."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    key: str
    params: dict[str, Param] = Field(default_factory=dict)
    phrases: dict[str, list[Phrase]] = Field(default_factory=dict)

    @classmethod
    def as_written(cls, text: str) -> Phrase:
        """Text made elsewhere that has no message of its own, shown as it was written (the message `text`)."""
        return cls(key="text", params={"text": text})


class Finding(BaseModel):
    """One thing a gate found, rendered through the catalog (bot/wording/messages.py) by every output.

    `key` names the message, `params` fill it; `phrases` are named lists of sub-messages (joined by "; ") that
    the message's text names like a parameter; `tail` are sub-messages appended after it (a boundary probe,
    the architecture). Nothing reads the rendered text back: a program reads these fields."""

    model_config = ConfigDict(extra="forbid")

    gate: Gate
    outcome: Outcome
    key: str = Field(description="the message id in bot/wording/messages.py (`correctness.max_abs_err`)")
    params: dict[str, Param] = Field(default_factory=dict)
    phrases: dict[str, list[Phrase]] = Field(default_factory=dict)
    tail: list[Phrase] = Field(default_factory=list)
    kernel: str | None = None
    case: str | None = None
    arch: str | None = None
    function: str | None = Field(None, description="the GPU function (ptxas) the finding is about")
    family: str | None = Field(
        None, description="the template (short name) of `function`, by which a line names it with its instantiations"
    )
    functions: list[str] = Field(
        default_factory=list,
        description="every instantiation of `family` the finding is about, full names, when it is about several",
    )
    file: str | None = Field(None, description="a repository path, where the finding has a place")
    line: int | None = Field(None, description="its line in `file` (1-based)")
    value: float | None = Field(None, description="the measured value")
    limit: float | None = Field(None, description="the limit it was held to")
    unit: str | None = Field(None, description="the unit of value and limit (%, B, registers, warps/SM …)")
