"""Does one review's 95 % interval cover the next review? Coverage across repeated reviews of the same change.

Each review of a change gives, per case, an estimate (Δ p50, %) and its 95 % interval. Repeated reviews of the same
change spread; an honest interval covers where the other reviews land. For each review and case this counts whether
its interval holds the median of the *other* reviews' estimates of that case (leave one out, so a review never
votes for itself), and prints per case and in all the share that do (issue 40, 3: the target is 90 % or more).

Inputs, any mix:
  report.json files of `opgate review` (benchmarks/aa_reviews.py --keep DIR leaves one per run), or folders
  holding them (searched recursively); cases are keyed by kernel and case name;
  a `benchmarks/gate_power.py --save FILE` file: every comparison of a scenario is one "review" of it.

  .venv/bin/python benchmarks/coverage.py DIR_OR_FILE ... [--cpu] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path

Estimate = tuple[float, float, float]  # (Δ %, low %, high %)


def from_report(path: Path, cpu: bool) -> dict[str, Estimate]:
    """kernel/case -> its estimate and interval in one review's report.json (cases without an interval left out)."""
    report = json.loads(path.read_text())
    out: dict[str, Estimate] = {}
    for kernel in report.get("kernels", []):
        for case in kernel.get("cases", []):
            est, ci = (
                (case.get("cpu_regression_pct"), case.get("cpu_ci95_pct"))
                if cpu
                else (case.get("regression_pct"), case.get("ci95_pct"))
            )
            if est is not None and ci and len(ci) == 2:
                out[f"{kernel['name']}/{case['name']}"] = (float(est), float(ci[0]), float(ci[1]))
    return out


def from_gate_power(data: dict[str, list[dict]], cpu: bool) -> dict[str, list[Estimate]]:
    """scenario -> every comparison's estimate (gate_power stores ratios: (verdict, ratio, low, high))."""
    out: dict[str, list[Estimate]] = defaultdict(list)
    for scenario, comparisons in data.items():
        for c in comparisons:
            judged = c.get("cpu") if cpu else (c.get("wall") or c.get("new"))
            if judged and judged[0] != "error":
                out[scenario].append(tuple((x - 1.0) * 100.0 for x in judged[1:4]))  # type: ignore[misc]
    return out


def coverage(estimates: list[Estimate]) -> tuple[int, int]:
    """(reviews whose interval holds the median of the others' estimates, reviews) — two or more needed."""
    if len(estimates) < 2:
        return 0, 0
    hits = 0
    for i, (_, low, high) in enumerate(estimates):
        others = statistics.median(e[0] for j, e in enumerate(estimates) if j != i)
        hits += low <= others <= high
    return hits, len(estimates)


def gather(paths: list[Path], cpu: bool) -> dict[str, list[Estimate]]:
    by_case: dict[str, list[Estimate]] = defaultdict(list)
    for path in paths:
        if not path.exists():
            raise SystemExit(f"coverage: {path}: no such file or folder")
        files = sorted(path.rglob("report.json")) if path.is_dir() else [path]
        if path.is_dir() and not files:
            raise SystemExit(f"coverage: {path}: no report.json under it")
        for file in files:
            data = json.loads(file.read_text())
            if isinstance(data, dict) and "kernels" in data:
                for key, est in from_report(file, cpu).items():
                    by_case[key].append(est)
            elif isinstance(data, dict):
                for key, ests in from_gate_power(data, cpu).items():
                    by_case[key] += ests
            else:
                raise SystemExit(f"coverage: {file}: neither a report.json nor a gate_power --save file")
    return by_case


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", type=Path, nargs="+", help="report.json files, folders of them, gate_power saves")
    parser.add_argument("--cpu", action="store_true", help="the CPU-time interval instead of wall time's p50")
    parser.add_argument("--json", action="store_true", help="one JSON object instead of the table")
    args = parser.parse_args()
    by_case = gather(args.paths, args.cpu)
    rows, hit_all, n_all = [], 0, 0
    for key in sorted(by_case):
        ests = by_case[key]
        hits, n = coverage(ests)
        if not n:
            continue
        hit_all, n_all = hit_all + hits, n_all + n
        spread = (min(e[0] for e in ests), max(e[0] for e in ests))
        half = statistics.median((e[2] - e[1]) / 2 for e in ests)
        rows.append((key, n, hits, spread, half))
    if args.json:
        print(json.dumps({"cases": {k: {"reviews": n, "covered": h} for k, n, h, _, _ in rows},
                          "covered": hit_all, "reviews": n_all}))  # fmt: skip
        return
    print("| case | reviews | estimates (min … max) | median interval half-width | covers the others' median |")
    print("|---|---|---|---|---|")
    for key, n, hits, (lo, hi), half in rows:
        print(f"| {key} | {n} | {lo:+.2f} … {hi:+.2f} % | ±{half:.2f} pp | {hits / n * 100:.0f}% ({hits}/{n}) |")
    if n_all:
        print(f"| all | {n_all} | | | {hit_all / n_all * 100:.0f}% ({hit_all}/{n_all}) |")
    else:
        print("coverage: fewer than two reviews of any case", file=sys.stderr)
        raise SystemExit(1)


if __name__ == "__main__":
    main()
