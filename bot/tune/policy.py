"""Proposers that need no model: the exhaustive sweep and greedy coordinate descent (pure, over the search so far)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from bot.config.manifest import Kernel
from bot.tune.analysis import best
from bot.tune.model import Proposal, RoundEvent, Source, Trial
from bot.tune.space import config_key, config_patch


@dataclass
class Search:
    """Where one run stands, as a proposer sees it."""

    kernel: Kernel  # base's
    config_text: str  # base's config file, as written
    space: list[dict[str, Any]]
    round: int
    max_rounds: int | None
    tokens_left: int
    events: list[RoundEvent] = field(default_factory=list)
    trials: dict[str, Trial] = field(default_factory=dict)  # key -> trial (the base included)
    seen: set[str] = field(default_factory=set)  # keys proposed in this run (the base included)

    def patch_for(self, config: dict[str, Any]) -> str:
        return config_patch(self.kernel, self.config_text, config)


class Proposer(Protocol):
    source: Source
    max_rounds: int | None  # None: no round limit (the sweep)
    plateau_rounds: int | None  # None: never stops for a plateau

    def propose(self, search: Search) -> Proposal: ...


class Exhaustive:
    """Every allowed config once, in the manifest's order: the true optimum of the space."""

    source: Source = "exhaustive"
    max_rounds: int | None = None
    plateau_rounds: int | None = None

    def propose(self, search: Search) -> Proposal:
        for config in search.space:
            if config_key(config) not in search.seen:
                return Proposal(outcome="ok", patch=search.patch_for(config))
        return Proposal(outcome="done", detail=f"every allowed config judged ({len(search.space)})")


class CoordinateDescent:
    """Greedy coordinate descent, an offline stand-in for a model: from the best config so far, try every value
    of every tunable with the others fixed; move to the best; stop when no neighbour is left untried."""

    source: Source = "policy"
    plateau_rounds: int | None = None

    def __init__(self, max_rounds: int | None = None) -> None:
        self.max_rounds = max_rounds

    def propose(self, search: Search) -> Proposal:
        found = best(t for t in search.trials.values() if t.config)
        current = (
            dict(found.config) if found is not None and (found.speedup or 0.0) > 1.0 else dict(search.kernel.config)
        )
        for name, values in search.kernel.manifest.tunables.items():
            for value in values:
                candidate = {**current, name: value}
                if config_key(candidate) not in search.seen:
                    return Proposal(outcome="ok", patch=search.patch_for(candidate))
        return Proposal(outcome="done", detail="every coordinate neighbour of the best config has been judged")
