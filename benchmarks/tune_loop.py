"""The tuning loop against the exhaustive optimum, per kernel: evaluations and wall time to reach it.

For each kernel: `opgate tune --strategy exhaustive` judges every allowed config (the true optimum of the space on
this machine); then the same loop, driven by an offline policy (greedy coordinate descent, standing in for a model),
runs on a fresh ledger so it measures everything again. "Reached" means the policy judged a config whose exhaustive
speedup is within noise of the optimum's (its CI half-width, at least 1 %). Every candidate is a real review of a
tunable change against HEAD (build, cases, gates).

    .venv/bin/python benchmarks/tune_loop.py [--kernels K ...] [--max-seconds 3] [--json FILE]
    .venv/bin/python benchmarks/tune_loop.py --agent      # a real model (needs the domain's key): strategy both

Token estimates (no key needed): the prompt of round 1 and round 6 as the agent would see it (the table filled from
the sweep's measurements), counted offline with cl100k_base, plus a typical reply.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bot.agent import estimate  # noqa: E402
from bot.config.manifest import load_kernel  # noqa: E402
from bot.config.settings import load_settings  # noqa: E402
from bot.errors import InputError  # noqa: E402
from bot.ledger import open_ledger  # noqa: E402
from bot.present.progress import Status  # noqa: E402
from bot.tune import analysis  # noqa: E402
from bot.tune.agent import View, messages, table  # noqa: E402
from bot.tune.loop import Tuner, TuneRequest  # noqa: E402
from bot.tune.policy import CoordinateDescent  # noqa: E402
from bot.tune.result import TuneResult  # noqa: E402
from bot.tune.space import config_patch, configs  # noqa: E402

KERNELS = ("deepgemm_tile", "flashmla_decode", "v41_attention_splitk")
USERS = {"deepgemm": (6, 19_800), "flashmla": (8, 32_000), "v41_attention": (4, 20_800)}  # requests, tokens per task


def tune(kernel: str, ledger_url: str, out: Path, env: dict[str, str], **kw: Any) -> tuple[TuneResult, float]:
    settings = load_settings({**os.environ, **env, "OPGATE_DATABASE_URL": ledger_url})
    strategy = kw.pop("strategy", "exhaustive")
    with open_ledger(ledger_url) as ledger:
        started = time.perf_counter()
        result = Tuner(TuneRequest(repo=ROOT, kernel=kernel, strategy=strategy, out=out, rounds=kw.pop("rounds", 6)),
                       settings, ledger, status=Status(live=False), **kw).run()  # fmt: skip
        return result, time.perf_counter() - started


def reached(policy: TuneResult, truth: dict[str, Any], floor: float) -> tuple[int | None, float | None]:
    """The policy's distinct candidates until one whose exhaustive speedup is within noise of the optimum."""
    order: list[tuple[str, float]] = []
    for e in policy.events:
        if e.source == "policy" and e.key and e.key not in [k for k, _ in order]:
            order.append((e.key, e.elapsed_s))
    for i, (key, elapsed) in enumerate(order, start=1):
        t = truth.get(key)
        if t is not None and t.qualifies and (t.speedup or 0.0) >= floor:
            return i, elapsed
    return None, None


def _verified(result: TuneResult) -> str:
    """The winner's re-verification (fresh processes, new seed): does the search's best hold?"""
    v = result.verified
    if v is None:
        return "nothing to re-verify"
    return f"x{v.speedup:.3f} {v.verdict}" if v.speedup is not None else f"no timing, {v.verdict}"


def token_estimate(kernel_name: str, sweep: TuneResult) -> dict[str, int]:
    """Prompt tokens of round 1 and round 6 (the table from the sweep's first five trials) and a typical reply."""
    k = load_kernel(ROOT / "kernels" / kernel_name)
    text = (k.folder / k.manifest.config).read_text()
    name, values = next(iter(k.manifest.tunables.items()))
    other = {**k.config, name: next(v for v in values if v != k.config[name])}
    example = (config_patch(k, text, other), f"{name}={other[name]}")
    limit = load_settings({}).budget_request.get(k.manifest.domain.value)
    trials = {t.key: t for t in sweep.trials}
    out = {}
    for rnd in (1, 6):
        events = [e for e in sweep.events if e.source == "exhaustive"][: rnd - 1]
        rows, notes = table(events, trials)
        view = View(round=rnd, max_rounds=6, tokens_left=20_000, seen=rnd, space_size=len(configs(k.manifest.tunables)),
                    rows=rows, notes=notes)  # fmt: skip
        out[f"prompt_round_{rnd}"] = estimate.count_messages(messages(k, view, config_text=text, example=example,
                                                                      limit=limit))  # fmt: skip
    reply = json.dumps({"candidate_patch": example[0], "risk_notes": ["a larger tile raises register pressure",
                        "fewer blocks on the small shapes"], "local_commands": [f"opgate tune {kernel_name}"],
                        "expected_metrics": {"speedup": 1.05}})  # fmt: skip
    out["reply"] = estimate.count(reply)
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    p.add_argument("--kernels", nargs="*", default=list(KERNELS))
    p.add_argument("--max-seconds", type=float, default=3.0, help="OPGATE_MEASURE_MAX_SECONDS (default 3, opgate's)")
    p.add_argument("--agent", action="store_true", help="also run --strategy both with the real model (needs keys)")
    p.add_argument("--json", type=Path, help="write every figure here")
    args = p.parse_args()
    logging.basicConfig(level=logging.WARNING, format="%(message)s")
    env = {"OPGATE_MEASURE_MAX_SECONDS": str(args.max_seconds)}
    figures = []
    for kernel in args.kernels:
        with tempfile.TemporaryDirectory(prefix="tune-bench-") as tmp:
            sweep, sweep_s = tune(kernel, f"{tmp}/sweep.sqlite", Path(tmp) / "sweep", env)
            opt = analysis.best(sweep.trials)
            opt_speedup = max(1.0, opt.speedup or 1.0) if opt is not None else 1.0
            noise = analysis.noise_pct(opt)
            floor = opt_speedup / (1 + noise / 100)
            truth = {t.key: t for t in sweep.trials}
            order = [e for e in sweep.events if e.source == "exhaustive" and e.key]
            sweep_at = next(((i, e.elapsed_s) for i, e in enumerate(order, 1) if e.key in truth and truth[e.key]
                             .qualifies and (truth[e.key].speedup or 0) >= floor), (0, 0.0))  # fmt: skip
            policy, policy_s = tune(kernel, f"{tmp}/policy.sqlite", Path(tmp) / "policy", env,
                                    proposer=CoordinateDescent(max_rounds=60), rounds=60)  # fmt: skip
            n, at = reached(policy, truth, floor) if opt_speedup > 1.0 + noise / 100 else (0, 0.0)
            row: dict[str, Any] = {
                "kernel": kernel,
                "space": sweep.space_size,
                "sweep_evaluations": len(order),
                "sweep_s": round(sweep_s, 1),
                "sweep_to_optimum": sweep_at[0],
                "sweep_to_optimum_s": sweep_at[1],
                "optimum": opt.label if opt is not None and opt_speedup > 1.0 else "the current config",
                "optimum_speedup": round(opt_speedup, 3),
                "noise_pct": round(noise, 2),
                "per_shape": [(s.case, s.label, round(s.speedup, 3)) for s in sweep.per_shape],
                "policy_evaluations_to_optimum": n,
                "policy_s_to_optimum": at,
                "policy_evaluations": len({e.key for e in policy.events if e.source == "policy" and e.key}),
                "policy_s": round(policy_s, 1),
                "policy_stop": policy.stop.line(),
                "policy_best": policy.best.label if policy.best is not None else "the current config",
                "policy_best_speedup": round(policy.best.speedup or 1.0, 3) if policy.best is not None else 1.0,
                "sweep_verified": _verified(sweep),
                "policy_verified": _verified(policy),
                "tokens": token_estimate(kernel, sweep),
            }
            if args.agent:
                try:
                    both, both_s = tune(kernel, f"{tmp}/agent.sqlite", Path(tmp) / "agent", env, strategy="both")
                except InputError as exc:  # no key for the domain: say so and go on
                    row["agent"] = {"skipped": str(exc)}
                else:
                    row["agent"] = {"comparison": both.comparison.model_dump() if both.comparison else None,
                                    "tokens": both.tokens.model_dump(), "rounds": both.rounds,
                                    "seconds": round(both_s, 1), "stop": both.stop.line()}  # fmt: skip
            figures.append(row)
            print(json.dumps(row), flush=True)
    print()
    print("| kernel | space | sweep: evaluations, wall | optimum (speedup, noise) | sweep order: evals to optimum |"
          " coordinate descent: evals (wall) to optimum | coordinate descent: evals, wall, stop |")  # fmt: skip
    print("|---|---|---|---|---|---|---|")
    for r in figures:
        pol = (f"{r['policy_evaluations_to_optimum']} ({r['policy_s_to_optimum']:.0f} s)"
               if r["policy_evaluations_to_optimum"] is not None else "not reached")  # fmt: skip
        print(
            f"| {r['kernel']} | {r['space']} | {r['sweep_evaluations']}, {r['sweep_s']:.0f} s | {r['optimum']} "
            f"x{r['optimum_speedup']:.3f} (±{r['noise_pct']:.1f}%) | {r['sweep_to_optimum']} | {pol} | "
            f"{r['policy_evaluations']}, {r['policy_s']:.0f} s, {r['policy_stop'].split(':')[0]} |"
        )
    print()
    print(
        "| kernel | prompt round 1 | prompt round 6 | reply | per round | 6 rounds | users' task (requests / tokens) |"
    )
    print("|---|---|---|---|---|---|---|")
    for r in figures:
        t = r["tokens"]
        k = load_kernel(ROOT / "kernels" / r["kernel"])
        req, total = USERS[k.manifest.domain.value]
        per = (t["prompt_round_1"] + t["prompt_round_6"]) // 2 + t["reply"]
        print(
            f"| {r['kernel']} | {t['prompt_round_1']:,} | {t['prompt_round_6']:,} | {t['reply']:,} | ~{per:,} | "
            f"~{6 * per:,} | {req} / {total:,} |"
        )
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
