"""The judge with the sampler's early stop as it was before issue 40's CPU-time stop: both intervals decided at
99.9 %, never the CPU time's alone (`benchmarks/gate_power.py --rules before,after` alternates it with the judge)."""

from __future__ import annotations

import sys

from bot.untrusted.runner import judge, sampler
from bot.verdict import stats


def early_stop_before(wall: stats.Paired, cpu: stats.Paired | None, limit: float) -> stats.EarlyStop | None:
    """`stats.early_stop` without its `decided_cpu` stop."""
    early = stats.early_stop(wall, cpu, limit)
    return early if early == "decided" else None


if __name__ == "__main__":
    sampler.early_stop = early_stop_before  # the Sampler looks it up in its module at every look
    judge.main(sys.argv[1])
