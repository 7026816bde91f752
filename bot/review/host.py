"""Where a review builds and runs, detected at the command's edge: machine, sandbox, load, case runner."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from bot.config.manifest import Kernel
from bot.config.settings import Settings
from bot.edges.machine import detect
from bot.errors import InputError
from bot.models.evidence import KernelEvidence
from bot.models.report import KernelReport, Machine, RunnerHealth
from bot.review.cases import Builds, KernelCases
from bot.untrusted.runner.health import snapshot
from bot.untrusted.sandbox import Sandbox
from bot.wording.messages import phrase


class CaseRunner(Protocol):
    """One changed kernel's builds and cases as evidence (`KernelCases`): nothing it does sets a verdict."""

    def build(self, head_k: Kernel, base_k: Kernel | None) -> Builds: ...

    def run(
        self,
        rules: Kernel,
        builds: Builds,
        evidence: KernelEvidence,
        *,
        trusted_reference: bool,
        held_out: frozenset[str] = frozenset(),
        looks: bool = True,
    ) -> None: ...

    def record_baselines(self, rules: Kernel, report: KernelReport) -> None: ...


@dataclass(frozen=True)
class Host:
    """`here` detects this machine's; a test passes a machine it names and a case runner that replays a record."""

    machine: Machine
    sandbox: Sandbox
    health: RunnerHealth  # the load, clocks and throttling as the review began (report.json's `health`)
    # makes one kernel's case runner, called as KernelCases is (settings, machine, ledger, sandbox, steps, *, secret,
    # base_sha, arch)
    cases: Callable[..., CaseRunner] = KernelCases


def here(settings: Settings, *, agent_only: bool = False, require_isolation: bool = False) -> Host:
    """This machine, its sandbox and load. Bad input (exit 2) where a review that builds lacks the runner extra, or
    where isolation is required (`--require-isolation`, the settings') and the sandbox cannot start."""
    machine = detect()
    if not agent_only and (missing := missing_runner()):
        raise InputError(
            f"opgate review builds and runs kernels, which needs {missing}: pip install 'opgate[runner]' "
            "(or use --plan, --agent-only or --merge, which do not)"
        )
    sandbox = Sandbox.detect()
    if (require_isolation or settings.require_isolation) and not sandbox.isolated:
        why = sandbox.isolation.reason
        raise InputError(f"--require-isolation: {phrase(why) if why is not None else 'no sandbox'}")
    return Host(machine, sandbox, snapshot())


def missing_runner() -> str | None:
    """What the runner extra provides and this environment lacks (torch, ninja), or None."""
    missing = [m for m in ("torch", "ninja") if importlib.util.find_spec(m) is None]
    return " and ".join(missing) or None
