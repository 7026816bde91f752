"""Each CPU case's achieved GFLOP/s and GB/s, and its share of the runner's peak, as `opgate review` reports them.

One `opgate review --offline` per kernel on a scratch repository whose head adds a comment to the kernel's CPU
body (so both sides are built and timed, interleaved, by the judge); the rates are the report's `throughput`
of each case: its declared work (kernel.toml [work]) at head's p50, against the one-thread peak the runner
measured of itself (bot/edges/peak.py; cached under the build folder). Prints a Markdown table. Usage:

  .venv/bin/python benchmarks/case_rates.py [--kernels K ...] [--max-seconds 6]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

from scratch import ROOT, commit_all, kernel_repo

from bot.models.finding import Phrase
from bot.wording.messages import phrase

KERNELS = ("deepgemm_tile", "flashmla_decode", "v41_attention_splitk")


def _review(repo: Path, base: str, head: str, kernel: str, out: Path, env: dict[str, str]) -> dict:
    argv = [sys.executable, "-m", "bot", "-q", "review", "--repo", str(repo), "--base", base, "--head", head]
    argv += ["--kernel", kernel, "--offline", "--out", str(out)]
    subprocess.run(argv, capture_output=True, text=True, env=env, check=False)
    report = json.loads((out / "report.json").read_text())
    return next(k for k in report["kernels"] if k["name"] == kernel)


def _rate(value: float | None) -> str:
    return "—" if value is None else f"{value:.3g}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernels", nargs="*", default=list(KERNELS))
    parser.add_argument("--max-seconds", default="6", help="OPGATE_MEASURE_MAX_SECONDS per case (default 6)")
    args = parser.parse_args()
    print("| kernel | case | p50 head | GFLOP/s | GB/s | % of this core's peak | verdict |")
    print("|---|---|---|---|---|---|---|")
    peak_of = ""
    with tempfile.TemporaryDirectory(prefix="opgate-rates-") as tmp_name:
        tmp = Path(tmp_name)
        repo = tmp / "repo"
        base = kernel_repo(repo)
        for kernel in args.kernels:
            manifest = tomllib.loads((ROOT / "kernels" / kernel / "kernel.toml").read_text())
            body = next(s for s in manifest["build"]["cpu"]["sources"] if not s.startswith("binding"))
            source = repo / "kernels" / kernel / body
            source.write_text(f"// case_rates: {kernel}\n" + source.read_text())
        head = commit_all(repo, "a comment in every CPU body")
        env = {k: v for k, v in os.environ.items() if not k.startswith(("TAOTOKEN_", "OPGATE_", "GITHUB_"))}
        env.update(OPGATE_DATABASE_URL=str(tmp / "ledger.sqlite"), OPGATE_MEASURE_MAX_SECONDS=args.max_seconds)
        for kernel in args.kernels:
            k = _review(repo, base, head, kernel, tmp / f"out-{kernel}", env)
            for c in k["cases"]:
                t = c.get("throughput")
                if c["device"] != "cpu" or t is None:
                    continue
                flops = None if t["head_tflops"] is None else t["head_tflops"] * 1e3
                shares = [v for v in (t["head_flops_pct"], t["head_bytes_pct"]) if v is not None]
                share = f"{max(shares):.3g}%" if shares else "—"
                print(
                    f"| {kernel} | {c['name']} | {c['p50_ms']:.4g} ms | {_rate(flops)} | "
                    f"{_rate(t['head_gbps'])} | {share} | {c['verdict']} |"
                )
                whose = phrase(Phrase.model_validate(t["peak_of"])) if t["peak_of"] else ""
                peak_of = peak_of or f"{whose}: {t['peak_tflops'] * 1e3:.4g} GFLOP/s, {t['peak_gbps']:.4g} GB/s"
    print(f"\npeak: {peak_of}")


if __name__ == "__main__":
    main()
