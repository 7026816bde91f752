"""The runner's health while it measured (bot/untrusted/runner/health.py): why an undecided interval may be the
machine's fault, named beside it."""

from __future__ import annotations

from bot.models.report import RunnerHealth
from bot.untrusted.runner.health import noisy_phrase
from bot.wording.messages import phrase


def noisy(other_cores: float | None, limit: float, health: RunnerHealth | None = None) -> str | None:
    """Why the runner was noisy, as the comment writes it beside an undecided interval."""
    why = noisy_phrase(other_cores, limit, health)
    return phrase(why) if why is not None else None


def test_other_processes_over_the_limit_make_a_noisy_runner_named_with_its_cores():
    assert noisy(3.5, 1.0, RunnerHealth(cores=16)) == "noisy runner: other processes kept 3.5 of 16 cores busy"
    assert noisy(3.5, 1.0) == "noisy runner: other processes kept 3.5 of ? cores busy"
    assert noisy(1.0, 1.0, RunnerHealth(cores=16)) is None  # at the limit is not over it


def test_a_throttled_or_shared_gpu_is_named_and_a_quiet_runner_is_not():
    throttled = RunnerHealth(cores=8, gpu_throttle=["hw_slowdown", "sw_thermal"], gpu_other_processes=2)
    assert noisy(0.1, 1.0, throttled) == "throttled GPU: hw_slowdown, sw_thermal"
    assert noisy(None, 1.0, RunnerHealth(cores=8, gpu_other_processes=2)) == (
        "busy GPU: 2 other compute process(es) on the device"
    )
    assert noisy(0.1, 1.0, RunnerHealth(cores=8)) is None
    assert noisy(None, 1.0) is None
