"""What one review is asked, built once: from `opgate review`'s flags, a tuning trial or a bisection step."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from bot.models.agent_report import ProposedCase


@dataclass(frozen=True, kw_only=True)
class ReviewRequest:
    """What to review and what to do with the result."""

    base: str
    head: str
    out: Path
    repo: Path = Path(".")
    offline: bool = False
    pr: int | None = None
    only_kernel: str | None = None
    # opgate history bisect: one case, against a given latency limit, without the compile-only resource check
    only_case: str | None = None
    latency_limit_pct: float | None = None
    resource_check: bool = True
    try_candidates: bool = False
    require_isolation: bool = False
    agent_only: bool = False  # ask the agent and stop: nothing is built or run (CI's agent job)
    held_out: frozenset[str] = frozenset()  # cases not run (the tuning search leaves its held-out shapes out)
    arch: str | None = None  # --arch: run only this architecture's cases (one GPU job of the fan-out)
    merge: list[Path] | None = None  # --merge: the parts' folders, merged instead of reviewed
    agents: list[Path] = field(default_factory=list)  # with --merge: the agent parts' folders
    planned: Path | None = None  # with --merge: the --plan matrix
    agent_part: Path | None = None  # --agent-cases: an agent part whose test matrix this review runs
    # a test matrix proposed outside the review (opgate tune's agent, or the agent part's), run when no agent is asked
    agent_cases: tuple[ProposedCase, ...] = ()
    agent_name: str = ""
    # why no matrix came from outside (CI: the kernel's agent job left no part, --no-agent-cases): the comment says it
    agent_cases_not_run: str = ""
