"""Wall time per phase (bot/phases.py): a phase timed twice adds up, and a phase that raises is still counted."""

from __future__ import annotations

import time

import pytest

from bot.phases import Phases


def test_a_phase_timed_twice_adds_up_and_one_that_raises_is_counted() -> None:
    phases = Phases()
    with phases.timed("build"):
        time.sleep(0.02)
    with phases.timed("build"):
        time.sleep(0.02)
    with pytest.raises(RuntimeError), phases.timed("measure"):
        time.sleep(0.01)
        raise RuntimeError("judge crashed")
    assert set(phases) == {"build", "measure"}
    assert phases["build"] >= 0.04 and phases["measure"] >= 0.01
    phases.add("build", 1.0)
    assert phases["build"] >= 1.04
