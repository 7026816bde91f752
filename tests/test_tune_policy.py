"""Search policies (bot/tune/policy.py): coordinate descent walks the best config's neighbours and says when it
converged."""

from __future__ import annotations

from bot.tune.model import Trial
from bot.tune.policy import CoordinateDescent, Exhaustive
from bot.tune.space import config_key, configs
from tests.tune_trials import case, kernel, search


def test_coordinate_descent_walks_the_neighbours_of_the_best_config_and_says_when_it_converged() -> None:
    k = kernel()
    first = CoordinateDescent().propose(search(k, []))
    assert first.outcome == "ok" and '"tile_m": 64' in (first.patch or "")
    better = Trial(key=config_key({**k.config, "tile_n": 256}), config={**k.config, "tile_n": 256}, source="policy",
                   status="judged", verdict="pass", cases=[case("a", -10.0)])  # fmt: skip
    nxt = CoordinateDescent().propose(search(k, [better]))
    assert '"tile_m": 64, "tile_n": 256' in (nxt.patch or "")  # moved to the better config
    every = [
        Trial(key=config_key(c), config=c, source="policy", status="judged", verdict="fail")
        for c in configs(k.manifest.tunables)
    ]
    assert CoordinateDescent().propose(search(k, every)).outcome == "done"
    assert Exhaustive().propose(search(k, every)).outcome == "done"
    assert Exhaustive().propose(search(k, [])).outcome == "ok"
