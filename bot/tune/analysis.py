"""What the trials say (pure): the best config, per-shape optima, the pass rate, stops, the agent's regret."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from pydantic import BaseModel, ConfigDict

from bot.tune.model import HANDOVER, MIN_GAIN_PCT, RoundEvent, Stop, Trial


class ShapeBest(BaseModel):
    """The best correct config for one case (the best config differs by shape)."""

    model_config = ConfigDict(frozen=True)

    case: str
    key: str
    label: str
    speedup: float
    regression_pct: float | None = None
    ci95_pct: tuple[float, float] | None = None
    is_base: bool = False
    is_overall: bool = False  # the same config as the best across all cases


class Comparison(BaseModel):
    """`--strategy both`: the agent's search against the exhaustive optimum."""

    model_config = ConfigDict(frozen=True)

    optimum_key: str
    optimum_label: str
    optimum_speedup: float
    noise_pct: float
    agent_best_key: str
    agent_best_label: str
    agent_best_speedup: float
    regret_pct: float  # how much faster the optimum is than the agent's best, %
    evaluations_to_optimum: int | None  # the agent's distinct candidates until one within noise of the optimum
    agent_evaluations: int
    exhaustive_evaluations: int


def best(trials: Iterable[Trial]) -> Trial | None:
    """The qualifying trial (every gate, no case slower than 2 %) with the highest geometric-mean speedup;
    the earliest wins a tie. None when none qualifies (the base is not a trial here)."""
    found: Trial | None = None
    for t in trials:
        if t.source == "base" or not t.qualifies or t.speedup is None:
            continue
        if found is None or t.speedup > (found.speedup or 0.0):
            found = t
    return found


def best_speedup(trials: Iterable[Trial]) -> float:
    """The best qualifying speedup, 1.0 (the base) when nothing beats it."""
    b = best(trials)
    return max(1.0, b.speedup or 1.0) if b is not None else 1.0


def proposable(trial: Trial | None, gain_pct: float = MIN_GAIN_PCT, *, measured: bool = False) -> bool:
    """Worth a pull request: qualifies and beats base by at least `gain_pct` (geometric mean). `measured` (the
    re-verification) also asks for a gain beyond noise: at least one case whose whole 95 % CI is below base."""
    return (
        trial is not None
        and trial.source != "base"
        and trial.qualifies
        and (trial.speedup or 0.0) >= 1.0 + gain_pct / 100.0
        and (not measured or any(c.faster for c in trial.timed))
    )


def history(events: Sequence[RoundEvent], trials: dict[str, Trial]) -> list[float]:
    """The best qualifying speedup before any round (1.0) and after each round, in round order."""
    rounds = sorted({e.round for e in events})
    out = [1.0]
    for r in rounds:
        seen = [trials[e.key] for e in events if e.round <= r and e.key in trials]
        out.append(best_speedup(seen))
    return out


def plateau(best_by_round: Sequence[float], rounds: int, gain_pct: float = MIN_GAIN_PCT) -> bool:
    """The best speedup now is not `gain_pct` better than it was `rounds` rounds ago."""
    if rounds < 1 or len(best_by_round) <= rounds:
        return False
    return best_by_round[-1] < best_by_round[-1 - rounds] * (1.0 + gain_pct / 100.0)


def pass_rate(trials: Iterable[Trial]) -> tuple[int, int]:
    """(cases on which some candidate that passed every gate is measurably faster than base, cases timed)."""
    timed: set[str] = set()
    faster: set[str] = set()
    for t in trials:
        if t.source == "base":
            continue
        for c in t.timed:
            timed.add(c.name)
            if t.verdict == "pass" and c.faster:
                faster.add(c.name)
    return len(faster), len(timed)


def next_stop(
    *,
    rounds_done: int,
    max_rounds: int | None,
    best_by_round: Sequence[float],
    plateau_rounds: int | None,
    seen: int,
    space_size: int,
) -> Stop | None:
    """Before a round: stop when the whole space was seen, the rounds are used up, or the search plateaued.
    (The token budget is checked with the round's own prompt: see `budget_stop`.)"""
    if space_size and seen >= space_size:
        return Stop(kind="space", detail=f"every allowed config has been judged ({seen} of {space_size})")
    if max_rounds is not None and rounds_done >= max_rounds:
        return Stop(kind="rounds", detail=f"--rounds {max_rounds} reached")
    if plateau_rounds is not None and plateau(best_by_round, plateau_rounds):
        return Stop(
            kind="plateau",
            detail=f"the best verified speedup ×{best_by_round[-1]:.3f} has not improved by ≥ {MIN_GAIN_PCT:g}% "
            f"over the last {plateau_rounds} rounds",
        )
    return None


def budget_stop(reason: str, start: tuple[int, int], now: tuple[int, int]) -> Stop:
    """The budget refused a round; with no gain in pass rate since the run started, hand over to a person."""
    gained = now[0] > start[0]
    rate = f"pass rate {now[0]}/{now[1]} case(s) faster than base" if now[1] else "no case timed yet"
    detail = f"{reason} ({rate})"
    return Stop(kind="budget", detail=detail, handover=not gained)


def per_shape(trials: Iterable[Trial], base_label: str, overall_key: str | None) -> list[ShapeBest]:
    """For every timed case, the correct config with the best speedup on it (the base when none is faster)."""
    order: list[str] = []
    found: dict[str, ShapeBest] = {}
    for t in trials:
        if t.source == "base" or not t.correct:
            continue
        for c in t.timed:
            if c.name not in order:
                order.append(c.name)
            s = c.speedup or 0.0
            if c.verdict not in ("pass", "inconclusive") or s <= 1.0:
                continue
            if c.name not in found or s > found[c.name].speedup:
                found[c.name] = ShapeBest(
                    case=c.name,
                    key=t.key,
                    label=t.label,
                    speedup=s,
                    regression_pct=c.regression_pct,
                    ci95_pct=c.ci95_pct,
                    is_overall=t.key == overall_key,
                )
    return [found.get(n) or ShapeBest(case=n, key="base", label=base_label, speedup=1.0, is_base=True) for n in order]


def noise_pct(trial: Trial | None) -> float:
    """How close to the optimum counts as reaching it: the half-width of its geometric-mean CI, at least 1 %."""
    if trial is None or not trial.timed:
        return MIN_GAIN_PCT
    logs = []
    for c in trial.timed:
        if c.ci95_pct is None:
            return MIN_GAIN_PCT
        lo, hi = c.ci95_pct
        logs.append(math.log((100.0 + hi) / (100.0 + lo)))  # upper ÷ lower bound of the time ratio
    width = math.exp(sum(logs) / len(logs)) - 1.0
    return max(MIN_GAIN_PCT, 100.0 * width / 2.0)


def compare(agent_order: Sequence[Trial], every: Iterable[Trial]) -> Comparison:
    """The agent's candidates (distinct, in the order proposed) against the best of every config judged."""
    pool = list(every)
    optimum = best(pool)
    opt_speedup = max(1.0, optimum.speedup or 1.0) if optimum is not None else 1.0
    if optimum is not None and (optimum.speedup or 0.0) <= 1.0:
        optimum = None
    noise = noise_pct(optimum)
    mine = best(agent_order)
    mine_speedup = max(1.0, mine.speedup or 1.0) if mine is not None else 1.0
    if mine is not None and (mine.speedup or 0.0) <= 1.0:
        mine = None
    reached: int | None = 0 if optimum is None else None
    if optimum is not None:
        floor = opt_speedup / (1.0 + noise / 100.0)
        for i, t in enumerate(agent_order, start=1):
            if t.qualifies and (t.speedup or 0.0) >= floor:
                reached = i
                break
    return Comparison(
        optimum_key=optimum.key if optimum else "base",
        optimum_label=optimum.label if optimum else "the current config",
        optimum_speedup=opt_speedup,
        noise_pct=round(noise, 2),
        agent_best_key=mine.key if mine else "base",
        agent_best_label=mine.label if mine else "the current config",
        agent_best_speedup=mine_speedup,
        regret_pct=round(max(0.0, (opt_speedup / mine_speedup - 1.0) * 100.0), 2),
        evaluations_to_optimum=reached,
        agent_evaluations=len(agent_order),
        exhaustive_evaluations=len({t.key for t in pool if t.source != "base"}),
    )


__all__ = ["HANDOVER", "Comparison", "ShapeBest"]
