"""The Sampler's CPU accounting (bot/untrusted/runner/cpu_accounting.py): what a sandbox may burn inside and
outside its timed calls, and the cores the machine's other processes keep busy."""

from __future__ import annotations

import time

from bot.untrusted.runner.cpu_accounting import (
    UNTIMED_CPU_PER_BLOCK_S,
    UNTIMED_CPU_SHARE,
    UNTIMED_CPU_SLACK_S,
    CpuAccount,
    OtherLoad,
)


def _account(**per_side: tuple[float, float, float]) -> CpuAccount:
    """A CpuAccount with (timed wall, timed CPU, untimed CPU) seconds per side and ten blocks timed."""
    account = CpuAccount(list(per_side))
    for label, (wall, cpu, untimed) in per_side.items():
        account.timed_wall[label], account.timed_cpu[label], account.untimed_cpu[label] = wall, cpu, untimed
    account.blocks = 10
    return account


def test_a_single_threaded_side_within_its_slack_is_not_flagged_and_its_use_is_reported():
    account = _account(base=(2.0, 2.0, 0.05), head=(1.0, 1.1, 0.0))
    assert account.tampered() is None
    uses = account.uses()
    assert (uses["base"].timed_wall_s, uses["base"].timed_cpu_s, uses["base"].untimed_cpu_s) == (2.0, 2.0, 0.05)
    assert uses["head"].timed_cpu_s == 1.1


def test_cpu_burned_outside_the_timed_calls_beyond_the_allowance_is_tampering():
    wall = 1.0
    allowed = UNTIMED_CPU_SLACK_S + UNTIMED_CPU_PER_BLOCK_S * 10 + UNTIMED_CPU_SHARE * wall
    assert _account(head=(wall, wall, allowed * 0.99)).tampered() is None
    why = _account(head=(wall, wall, allowed + 0.01)).tampered()
    assert why is not None and why.startswith("head: the sandbox used") and "outside its timed calls" in why


def test_more_than_one_core_inside_the_timed_calls_is_a_cost_not_tampering():
    """Issue 37, 3: the CPU time of every thread in the timed calls is compared by the gate
    (bot/verdict/gate_latency.py), so a second core's work is counted, not excused by an allowance or rejected as a
    measurement."""
    assert _account(base=(1.0, 2.5, 0.0)).tampered() is None
    assert _account(base=(1.0, 2.5, 0.0)).uses()["base"].timed_cpu_s == 2.5


def test_input_bytes_loaded_buy_untimed_cpu():
    account = _account(head=(1.0, 1.0, 0.5))
    assert account.tampered() is not None
    account.bytes_in = 200_000_000  # 200 MB read from the input files
    assert account.tampered() is None


def test_the_last_side_flagged_is_named():
    why = _account(base=(1.0, 1.0, 0.5), head=(1.0, 1.0, 0.5)).tampered()
    assert why is not None and why.startswith("head:")


def test_other_load_subtracts_our_own_cpu():
    ours = [0.0]
    load = OtherLoad(lambda: ours[0])
    time.sleep(0.05)
    ours[0] = 1e6  # we claim all the machine's busy time (and more): nothing is left for other processes
    assert load.cores() == 0.0
