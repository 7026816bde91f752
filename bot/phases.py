"""Wall time per named phase, and CPU seconds beside it: one small timer the review, the judge and the benchmarks
share."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator


def cpu_seconds() -> float:
    """CPU seconds of this process and of every child it has waited for (builds, the judge and its workers)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


class Phases(dict[str, float]):
    """Seconds per phase, accumulated: `with phases.timed("build"): …`; `cpu` holds the CPU seconds of the phases
    timed that way: this process and the children it waited for in them (the load of other processes is not in it,
    nor the processes of a sandbox: bubblewrap's pid namespace reaps them — the judge reads its workers' CPU time from
    their own accounting, `sandbox_cpu` in report.json)."""

    def __init__(self) -> None:
        super().__init__()
        self.cpu: dict[str, float] = {}

    @contextlib.contextmanager
    def timed(self, name: str) -> Iterator[None]:
        started, cpu = time.perf_counter(), cpu_seconds()
        try:
            yield
        finally:
            self.add(name, time.perf_counter() - started)
            self.cpu[name] = self.cpu.get(name, 0.0) + cpu_seconds() - cpu

    def add(self, name: str, seconds: float) -> None:
        self[name] = self.get(name, 0.0) + seconds
