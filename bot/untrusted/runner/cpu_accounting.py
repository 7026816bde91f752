"""The Sampler's CPU accounting: what a side's sandbox burned inside and outside its timed calls, and how many cores
the machine's other processes kept busy meanwhile.

A sandbox that works outside its timed calls (precomputing, caching across calls) is flagged as tampered. Work on
more than one core inside them is no longer flagged here: every block's CPU time, every thread of the sandbox
counted, is a cost the gate compares like the wall time (bot/verdict/gate_latency.py; issue 37, 3: a body that hid
12 % more work on a helper thread passed the old allowance of 1.15 x wall + 0.15 s). A GPU case is not accounted.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

from bot.models.cost import CpuUse
from bot.models.finding import Phrase
from bot.untrusted.runner.health import busy_ticks
from bot.wording.messages import phrase

# The sandbox may use this much CPU outside its timed calls (reading inputs, writing outputs, replies).
UNTIMED_CPU_SLACK_S, UNTIMED_CPU_PER_BLOCK_S, UNTIMED_CPU_PER_MB_S, UNTIMED_CPU_SHARE = 0.05, 0.002, 0.004, 0.10


class CpuAccount:
    """Per side: the wall and CPU seconds of its timed calls, the CPU seconds of its sandbox outside them; and the
    blocks timed and input bytes loaded (each buys the sandbox some untimed CPU)."""

    def __init__(self, labels: list[str]) -> None:
        self.labels = labels
        self.timed_wall = dict.fromkeys(labels, 0.0)
        self.timed_cpu = dict.fromkeys(labels, 0.0)
        self.untimed_cpu = dict.fromkeys(labels, 0.0)
        self.blocks = 0
        self.bytes_in = 0

    def uses(self) -> dict[str, CpuUse]:
        """Each side's CPU use, as the report shows it."""
        return {
            label: CpuUse(
                timed_wall_s=round(self.timed_wall[label], 3),
                timed_cpu_s=round(self.timed_cpu[label], 3),
                untimed_cpu_s=round(self.untimed_cpu[label], 3),
            )
            for label in self.labels
        }

    def tampered(self) -> str | None:
        """Why a side's sandbox burned CPU outside its timed calls (the last side flagged); None when none did."""
        why = self.tampered_phrase()
        return phrase(why) if why is not None else None

    def tampered_phrase(self) -> Phrase | None:
        """`tampered` as a phrase of the findings' catalog."""
        why = None
        for label in self.labels:
            timed_wall, untimed = self.timed_wall[label], self.untimed_cpu[label]
            allowed = UNTIMED_CPU_SLACK_S + UNTIMED_CPU_PER_BLOCK_S * self.blocks + UNTIMED_CPU_SHARE * timed_wall
            allowed += UNTIMED_CPU_PER_MB_S * self.bytes_in / 1e6
            if untimed > allowed:
                figures = {"side": label, "used": f"{untimed:.2f}", "allowed": f"{allowed:.2f}"}
                why = Phrase(key="measurement.untimed_cpu", params=figures)
        return why


class OtherLoad:
    """The cores other processes keep busy from now on: the machine's busy ticks less `ours`, the CPU seconds of
    the judge and every sandbox it runs."""

    def __init__(self, ours: Callable[[], float]) -> None:
        self.ours = ours
        self.started, self.busy0, self.ours0 = time.monotonic(), busy_ticks(), ours()

    def cores(self) -> float:
        wall = time.monotonic() - self.started
        other = ((busy_ticks() - self.busy0) / os.sysconf("SC_CLK_TCK") - (self.ours() - self.ours0)) / max(wall, 1e-9)
        return round(max(0.0, other), 2)
