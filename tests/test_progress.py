"""Progress of long steps (bot/present/progress.py): in CI logs and pipes each step is a start line and a "done in"
line, and a loop's status a plain log line; a terminal in a CI job is not a person watching."""

from __future__ import annotations

import logging
import sys

import pytest

from bot.present.progress import Status, Steps, interactive


def test_a_step_in_a_ci_log_is_a_start_and_a_done_line(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="opgate")
    with Steps(live=False) as steps, steps.step("building deepgemm_tile"):
        pass
    Status(live=False).line("round 2/4: 3 candidates")
    messages = [r.getMessage() for r in caplog.records if r.name == "opgate"]
    assert messages[0] == "building deepgemm_tile"
    assert messages[1].startswith("building deepgemm_tile: done in ") and messages[1].endswith(" s")
    assert messages[2] == "round 2/4: 3 candidates"


def test_a_terminal_is_interactive_unless_ci_or_a_dumb_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")
    assert interactive()
    monkeypatch.setenv("CI", "true")
    assert not interactive()
    monkeypatch.delenv("CI")
    monkeypatch.setenv("TERM", "dumb")
    assert not interactive()
    monkeypatch.setattr(sys.stderr, "isatty", lambda: False)
    monkeypatch.setenv("TERM", "xterm-256color")
    assert not interactive()


def test_a_terminal_shows_no_spinner_under_quiet(monkeypatch: pytest.MonkeyPatch) -> None:
    """-q/--json leave only warnings and results: on a terminal, too, a step shows no spinner (and logs nothing)."""
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")
    opgate = logging.getLogger("opgate")
    level = opgate.level
    try:
        opgate.setLevel(logging.INFO)  # setLevel: the logger caches what it is enabled for
        assert Steps().live
        opgate.setLevel(logging.WARNING)
        assert not Steps().live
    finally:
        opgate.setLevel(level)


def test_a_log_line_goes_through_the_stderr_a_live_display_puts_in_place(monkeypatch: pytest.MonkeyPatch) -> None:
    """On a terminal a live spinner (rich) puts a proxy in sys.stderr that prints a line above it; the log handler
    set up at start-up writes to that proxy, not to the stream it found then (its lines cut through the spinner)."""
    import io

    from bot.cli import _setup_logging

    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    try:
        _setup_logging(False, False, ["sk-planted-0123456789"])
        proxy = io.StringIO()
        monkeypatch.setattr(sys, "stderr", proxy)
        logging.getLogger("opgate").info("compiling 1 .cu file(s), key sk-planted-0123456789")
        assert proxy.getvalue().startswith("opgate: compiling 1 .cu file(s), key ")
        assert "sk-planted-0123456789" not in proxy.getvalue()  # redacted as before
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
