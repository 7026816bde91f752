"""Do verdicts repeat? Real changes, each reviewed N times with the real CLI, and how honest the CIs were.

Changes (each in a scratch repository holding every kernel, base = the project's kernels):
  - the README demo's patch (deepgemm_tile tile_n 128 → 256),
  - flashmla_decode: the causal branch of the mask rewritten (same value; the non-causal cases
    decode_128 and decode_512 never execute it, so they must never fail on latency),
  - v41_attention_splitk split_k 4 → 8 (a real change of the reduction).
Each is `opgate review --offline --kernel K` N times (fresh ledger, shared build cache: the first run
builds). Per case it prints the verdicts, whether they flipped pass↔fail, how many an undecided wall time left
to the simulated cost (callgrind; `--simulate off` leaves them undecided), the Δp50 spread across runs against
the median CI width, and the CI's coverage: how often one run's interval contains the median Δp50 of the other
runs. `--load busy` keeps one core busy with a bounded spinning process for the whole run. Usage:

  .venv/bin/python benchmarks/repeatability.py [--runs 20] [--change NAME ...] [--load idle|busy]
      [--simulate undecided|off]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from gate_power import load
from scratch import ROOT, commit_all, kernel_repo


@dataclass(frozen=True)
class Change:
    name: str
    kernel: str
    path: str
    old: str
    new: str
    untouched_cases: tuple[str, ...] = ()  # cases that never execute the changed code


CHANGES = [
    Change(
        "deepgemm-tile-n-256",
        "deepgemm_tile",
        "kernels/deepgemm_tile/tile_config.json",
        '"tile_n": 128',
        '"tile_n": 256',
    ),
    Change(
        "flashmla-causal-branch",
        "flashmla_decode",
        "kernels/flashmla_decode/decode_cpu.cpp",
        "return seqlen - p.s_q + row / p.h_q + 1;",
        "return seqlen - (p.s_q - 1 - row / p.h_q);  // the same position, written from the end",
        untouched_cases=("decode_128", "decode_512"),
    ),
    Change(
        "v41-split-k-8",
        "v41_attention_splitk",
        "kernels/v41_attention_splitk/splitk_config.json",
        '"split_k": 4',
        '"split_k": 8',
    ),
]


def scratch(tmp: Path, change: Change) -> tuple[Path, str, str]:
    repo = tmp / change.name
    base = kernel_repo(repo)
    target = repo / change.path
    text = target.read_text()
    assert text.count(change.old) == 1, f"{change.path}: {change.old!r} must occur once"
    target.write_text(text.replace(change.old, change.new))
    return repo, base, commit_all(repo, change.name)


def review(repo: Path, base: str, head: str, kernel: str, out: Path, simulate: str) -> tuple[dict, float]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TAOTOKEN_", "GITHUB_"))}
    env["OPGATE_SIMULATE"] = simulate
    out.mkdir(parents=True, exist_ok=True)  # the ledger's folder must exist (opgate never creates one by itself)
    env["OPGATE_DATABASE_URL"] = str(out / "ledger.sqlite")
    started = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "bot", "-q", "review", "--repo", str(repo), "--base", base, "--head", head,
         "--offline", "--kernel", kernel, "--out", str(out)],
        capture_output=True, text=True, env=env,
    )  # fmt: skip
    seconds = time.perf_counter() - started
    if proc.returncode not in (0, 1):
        raise SystemExit(f"review failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return json.loads((out / "report.json").read_text()), seconds


def coverage(deltas: list[float], cis: list[list[float]]) -> float:
    """Share of runs whose CI holds the median Δp50 of all the other runs."""
    hits = 0
    for i, (low, high) in enumerate(cis):
        others = deltas[:i] + deltas[i + 1 :]
        hits += low <= statistics.median(others) <= high
    return hits / len(cis)


def summarise(change: Change, reports: list[dict]) -> list[str]:
    rows = []
    cases: dict[str, list[dict]] = {}
    for report in reports:
        kernel = next(k for k in report["kernels"] if k["name"] == change.kernel)
        for c in kernel["cases"]:
            if c["device"] == "cpu":
                cases.setdefault(c["name"], []).append(c)
    for name, runs in cases.items():
        verdicts = [c["verdict"] for c in runs]
        timed = [c for c in runs if c["regression_pct"] is not None and c["ci95_pct"]]
        deltas = [c["regression_pct"] for c in timed]
        cis = [c["ci95_pct"] for c in timed]
        counts = {v: verdicts.count(v) for v in ("pass", "fail", "inconclusive", "error")}
        simulated = sum(bool((c.get("simulated") or {}).get("decided")) for c in runs)
        flips = "yes" if counts["pass"] and counts["fail"] else "no"
        spread = statistics.stdev(deltas) if len(deltas) > 1 else 0.0
        width = statistics.median(h - lo for lo, h in cis) if cis else 0.0
        cov = f"{coverage(deltas, cis) * 100:.0f}%" if len(cis) > 2 else "—"
        noisy = sum(any("noisy runner" in r for r in c["reasons"]) for c in runs)  # only where it stayed undecided
        mark = " (never runs the change)" if name in change.untouched_cases else ""
        rows.append(
            f"| {change.name} | {name}{mark} | {len(runs)} | {counts['pass']}/{counts['fail']}/{counts['inconclusive']}"
            f"{f' ({noisy} noisy)' if noisy else ''} | {simulated} | {flips} "
            f"| {statistics.median(deltas) if deltas else 0:+.2f}% "
            f"| {spread:.2f} | {width:.2f} | {cov} | {statistics.median(c['processes'] for c in runs):.0f} |"
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--change", action="append", choices=[c.name for c in CHANGES], help="default: all")
    parser.add_argument("--load", choices=["idle", "busy"], default="idle", help="busy: one core kept busy")
    parser.add_argument("--simulate", choices=["undecided", "off"], default="undecided", help="OPGATE_SIMULATE")
    args = parser.parse_args()
    chosen = [c for c in CHANGES if not args.change or c.name in args.change]
    commit = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    print(
        f"# {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, commit {commit.stdout.strip()}, {platform.node()}, "
        f"{os.cpu_count()} cores; {args.runs} reviews per change; load {args.load}; OPGATE_SIMULATE={args.simulate}"
    )
    print(
        "| change | case | runs | pass/fail/inconclusive | decided by simulated cost | flips | median Δp50 "
        "| Δp50 spread (sd, pp) "
        "| median CI width (pp) | CI coverage | processes |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="opgate-repeat-") as tmp_name, load(args.load, 24 * 3600.0):
        tmp = Path(tmp_name)
        for change in chosen:
            repo, base, head = scratch(tmp, change)
            reports, seconds = [], []
            for i in range(args.runs):
                report, secs = review(repo, base, head, change.kernel, tmp / f"{change.name}-{i}", args.simulate)
                reports.append(report)
                seconds.append(secs)
            for row in summarise(change, reports):
                print(row, flush=True)
            print(
                f"# {change.name}: first review {seconds[0]:.1f} s (builds), then median "
                f"{statistics.median(seconds[1:] or seconds):.1f} s",
                flush=True,
            )


if __name__ == "__main__":
    main()
