"""Progress of long steps: a rich display on a terminal, plain log lines in CI logs and pipes."""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import time
from collections.abc import Iterator
from typing import Any

from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

log = logging.getLogger("opgate")


def interactive() -> bool:
    """A person is watching: stderr is a terminal and this is not a CI job."""
    return sys.stderr.isatty() and not os.environ.get("CI") and os.environ.get("TERM") != "dumb"


def no_color() -> bool:
    """NO_COLOR set and not empty (https://no-color.org): no ANSI colour, styles such as bold stay."""
    return os.environ.get("NO_COLOR", "") != ""


def console(**kwargs: Any) -> Console:
    """The terminal on stderr, without colour when NO_COLOR says so."""
    return Console(stderr=True, no_color=no_color(), **kwargs)


class Steps:
    """`with steps.step("building x"):` shows a spinner with elapsed time, or logs start and end (neither under
    -q/--json: only warnings and results)."""

    def __init__(self, live: bool | None = None) -> None:
        self.live = interactive() and log.isEnabledFor(logging.INFO) if live is None else live
        self._progress: Progress | None = None

    def __enter__(self) -> Steps:
        if self.live:
            self._progress = Progress(
                SpinnerColumn(),
                TextColumn("{task.description}"),
                TimeElapsedColumn(),
                console=console(),
                transient=False,
            )
            self._progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._progress is not None:
            self._progress.stop()

    @contextlib.contextmanager
    def step(self, description: str) -> Iterator[None]:
        started = time.perf_counter()
        if self._progress is None:
            log.info("%s", description)
            yield
            log.info("%s: done in %.1f s", description, time.perf_counter() - started)
            return
        task = self._progress.add_task(description, total=1)
        try:
            yield
        finally:
            self._progress.update(task, completed=1)


class Status:
    """Where a long loop stands, one line per step: bold on a terminal, a plain log line in CI logs and pipes."""

    def __init__(self, live: bool | None = None) -> None:
        self.live = interactive() if live is None else live
        self._console = console() if self.live else None

    def line(self, text: str) -> None:
        if self._console is not None:
            self._console.print(text, markup=False, highlight=False, style="bold cyan")
        else:
            log.info("%s", text)
