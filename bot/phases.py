"""Wall time per named phase: one small timer the review, the judge and the benchmarks share."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator


class Phases(dict[str, float]):
    """Seconds per phase, accumulated: `with phases.timed("build"): …`."""

    @contextlib.contextmanager
    def timed(self, name: str) -> Iterator[None]:
        started = time.perf_counter()
        try:
            yield
        finally:
            self.add(name, time.perf_counter() - started)

    def add(self, name: str, seconds: float) -> None:
        self[name] = self.get(name, 0.0) + seconds
