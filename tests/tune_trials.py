"""Trial records the tuning tests share: cases, trials, the base trial, round events, the kernels' spaces and a
search."""

from __future__ import annotations

from bot.tune.model import CaseResult, RoundEvent, Trial
from bot.tune.policy import Search
from bot.tune.space import config_key, configs
from tests.conftest import KERNELS


def case(name: str, pct: float, half: float = 1.0, verdict: str = "pass", status: str = "ok") -> CaseResult:
    return CaseResult(name=name, status=status, verdict=verdict, regression_pct=pct, ci95_pct=(pct - half, pct + half))


def trial(label: str, *cases: CaseResult, verdict: str = "pass", source: str = "agent") -> Trial:
    m, n = label.split("x")
    config = {"tile_m": int(m), "tile_n": int(n), "tile_k": 64}
    return Trial(key=config_key(config), config=config, source=source, status="judged", verdict=verdict,
                 cases=list(cases))  # fmt: skip


BASE = Trial(key=config_key({"tile_m": 128, "tile_n": 128, "tile_k": 64}), config={"tile_m": 128, "tile_n": 128,
             "tile_k": 64}, source="base", status="judged", verdict="pass")  # fmt: skip


def events(*outcomes: tuple[int, str, str]) -> list[RoundEvent]:
    return [RoundEvent(seq=i, round=r, source="agent", outcome=o, key=k) for i, (r, o, k) in enumerate(outcomes, 1)]


def kernel():
    from bot.config.manifest import load_kernel

    return load_kernel(KERNELS / "deepgemm_tile")


def load_v41():
    from bot.config.manifest import load_kernel

    return load_kernel(KERNELS / "v41_attention_splitk")


def load_mla():
    from bot.config.manifest import load_kernel

    return load_kernel(KERNELS / "flashmla_decode")


def search(k, trials: list[Trial]) -> Search:
    base = BASE.model_copy(update={"key": config_key(k.config), "config": dict(k.config)})
    return Search(
        kernel=k, config_text=(k.folder / "tile_config.json").read_text(), space=configs(k.manifest.tunables),
        round=1, max_rounds=None, tokens_left=0, trials={t.key: t for t in [base, *trials]},
        seen={base.key, *(t.key for t in trials)},
    )  # fmt: skip
