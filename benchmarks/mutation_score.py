"""How many planted kernel bugs does opgate's case suite catch? Seeded mutations of the CPU twins, each reviewed.

Every mutation in benchmarks/mutations.toml (file, original text, replacement, class) is applied alone to a scratch
repository holding the project's kernels and reviewed with the real `opgate review --offline --kernel K`. A
mutation is *caught* when a case of its kernel comes back incorrect, crashed or timed out (a latency-only failure is
not a catch); the report says whether the random inputs caught it, or only a boundary probe. A/A: a comment-only
change to each kernel's CPU body, reviewed with the default measurement settings; any fail or error is a false fail,
and those reviews give the probes' share of the judge's time per case. Usage:

  OPGATE_MEASURE_MAX_SECONDS=0.5 .venv/bin/python benchmarks/mutation_score.py [--aa 2] [--kernel NAME] [--only ID]

The mutation reviews use the environment's measurement settings (correctness is what counts); the A/A reviews
always use the defaults (3 s per case), so the probe share is against a review as users run it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MUTATIONS = ROOT / "benchmarks" / "mutations.toml"
IDENT = ("-c", "user.name=mutation-score", "-c", "user.email=mutation-score@localhost")
CAUGHT_STATUS = {"incorrect", "crashed", "timeout"}


@dataclass(frozen=True)
class Mutation:
    id: str
    file: str
    cls: str
    description: str
    original: str
    replacement: str

    @property
    def kernel(self) -> str:
        return self.file.split("/")[1]


def load_mutations(path: Path = MUTATIONS, root: Path = ROOT) -> list[Mutation]:
    """The mutations of `path`; every original must occur exactly once in its file, every id be unique."""
    data = tomllib.loads(path.read_text())
    mutations, seen = [], set()
    for entry in data["mutation"]:
        m = Mutation(
            entry["id"], entry["file"], entry["class"], entry["description"], entry["original"], entry["replacement"]
        )
        if m.id in seen:
            raise ValueError(f"{path}: mutation id {m.id!r} is used twice")
        seen.add(m.id)
        count = (root / m.file).read_text().count(m.original)
        if count != 1:
            raise ValueError(f"{path}: {m.id}: the original text occurs {count} times in {m.file}, not once")
        if m.original == m.replacement:
            raise ValueError(f"{path}: {m.id}: the replacement equals the original")
        mutations.append(m)
    return mutations


@dataclass
class Outcome:
    """What one review of one mutation (or one A/A change) showed."""

    verdict: str
    built: bool = True
    by_random: list[str] = field(default_factory=list)  # cases whose random inputs (or check) failed
    by_probe: list[str] = field(default_factory=list)  # case/probe pairs that failed
    latency_only: bool = False
    probe_seconds: float = 0.0
    case_seconds: float = 0.0
    remeasured: int = 0  # cases measured twice (an inconclusive first measurement)
    seconds: float = 0.0

    @property
    def caught(self) -> bool:
        return bool(self.by_random or self.by_probe)


def classify(kernel: dict) -> Outcome:
    """A report.json kernel entry -> which inputs caught the change (random, probes, neither)."""
    out = Outcome(verdict=kernel["verdict"], built=kernel.get("build") is None or kernel["build"]["ok"])
    for case in kernel["cases"]:
        if case["status"] == "skipped":
            continue
        phases = case.get("judge_seconds") or {}  # a judge that keeps seconds per phase has "probes", "total"
        out.probe_seconds += phases.get("probes", case.get("probe_seconds") or 0.0)
        out.case_seconds += phases.get("total", case.get("case_seconds") or 0.0)
        out.remeasured += case.get("attempts", 1) > 1
        out.by_probe += [f"{case['name']}/{p['name']}" for p in case.get("probes", []) if p["verdict"] == "fail"]
        if case["status"] not in CAUGHT_STATUS:
            continue
        if case["status"] != "incorrect":  # crashed or timed out: in a probe, or on the random inputs / timing
            random_wrong = any(o["nan_inf"] or o["max_abs_err"] > case["tolerance"] for o in case.get("outputs", []))
            during_probe = any(" probe " in r for r in case["reasons"]) and not random_wrong
            (out.by_probe if during_probe else out.by_random).append(f"{case['name']} ({case['status']})")
        elif any(_random_reason(r) for r in case["reasons"]):
            out.by_random.append(case["name"])
    out.latency_only = out.verdict == "fail" and not out.caught
    return out


def _random_reason(reason: str) -> bool:
    """A correctness or stability reason about the case's random inputs (or its timed calls), not a probe."""
    return "boundary probe" not in reason and reason.startswith(("correctness", "stability", "head raised"))


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


def _env(tmp: Path, measure_defaults: bool) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TAOTOKEN_", "GITHUB_"))}
    env.setdefault("OPGATE_DATABASE_URL", str(tmp / "ledger.sqlite"))
    env.setdefault("OPGATE_CASE_TIMEOUT_S", "60")
    if measure_defaults:
        for name in [k for k in env if k.startswith("OPGATE_MEASURE_")]:
            del env[name]
    return env


def review(repo: Path, base: str, head: str, kernel: str, out: Path, env: dict[str, str]) -> Outcome:
    started = time.perf_counter()
    argv = [sys.executable, "-m", "bot", "-q", "review", "--repo", str(repo), "--base", base, "--head", head]
    argv += ["--offline", "--kernel", kernel, "--out", str(out)]
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=ROOT)
    if not (out / "report.json").exists():
        raise SystemExit(f"opgate review wrote no report (exit {proc.returncode}):\n{proc.stderr[-2000:]}")
    report = json.loads((out / "report.json").read_text())
    entry = next(k for k in report["kernels"] if k["name"] == kernel)
    if not entry["cases"] and (entry.get("build") or {}).get("ok", True):  # e.g. a bad kernel definition
        raise SystemExit(f"opgate review ran no case of {kernel}: {'; '.join(entry['reasons'])[:2000]}")
    outcome = classify(entry)
    outcome.seconds = time.perf_counter() - started
    return outcome


def commit_change(repo: Path, base: str, path: str, old: str, new: str, message: str) -> str:
    """A commit on top of base that replaces `old` by `new` in `path` (a detached head; base is untouched)."""
    git(repo, "checkout", "-q", "--detach", base)
    target = repo / path
    target.write_text(target.read_text().replace(old, new, 1))
    git(repo, *IDENT, "commit", "-qam", message)
    return git(repo, "rev-parse", "HEAD")


def scratch_repo(tmp: Path) -> tuple[Path, str]:
    repo = tmp / "repo"
    shutil.copytree(ROOT / "kernels", repo / "kernels", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", repo / "pyproject.toml")  # [tool.opgate]: domains, budgets
    (repo / "README.md").write_text("scratch repository for benchmarks/mutation_score.py\n")
    git(tmp, "init", "-q", "-b", "main", str(repo))
    git(repo, "add", "-A")
    git(repo, *IDENT, "commit", "-qm", "base")
    return repo, git(repo, "rev-parse", "HEAD")


def cpu_body(kernel: str) -> str:
    manifest = tomllib.loads((ROOT / "kernels" / kernel / "kernel.toml").read_text())
    body = next(s for s in manifest["build"]["cpu"]["sources"] if not s.startswith("binding"))
    return f"kernels/{kernel}/{body}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mutations", type=Path, default=MUTATIONS)
    parser.add_argument("--kernel", action="append", help="only this kernel's mutations (repeatable)")
    parser.add_argument("--only", action="append", help="only mutations whose id contains this (repeatable)")
    parser.add_argument("--aa", type=int, default=1, help="A/A reviews per kernel (default measurement settings)")
    parser.add_argument("--json", type=Path, help="also write every outcome here")
    args = parser.parse_args()
    mutations = load_mutations(args.mutations)
    if args.kernel:
        mutations = [m for m in mutations if m.kernel in args.kernel]
    if args.only:
        mutations = [m for m in mutations if any(o in m.id for o in args.only)]
    kernels = sorted({m.kernel for m in mutations} | set(args.kernel or []))
    results: dict[str, Outcome] = {}
    aa: dict[str, list[Outcome]] = defaultdict(list)
    with tempfile.TemporaryDirectory(prefix="opgate-mutation-") as tmp_name:
        tmp = Path(tmp_name)
        repo, base = scratch_repo(tmp)
        for kernel in kernels:
            path = cpu_body(kernel)
            text = (repo / path).read_text()
            first = text.splitlines(keepends=True)[0]
            head = commit_change(repo, base, path, first, "// A/A: a comment, no behaviour change\n" + first, "A/A")
            for i in range(args.aa):
                outcome = review(repo, base, head, kernel, tmp / f"aa-{kernel}-{i}", _env(tmp, measure_defaults=True))
                aa[kernel].append(outcome)
                share = outcome.probe_seconds / max(outcome.case_seconds - outcome.probe_seconds, 1e-9)
                print(
                    f"A/A {kernel} #{i + 1}: {outcome.verdict}, {outcome.seconds:.1f} s; probes "
                    f"{outcome.probe_seconds:.2f} s of {outcome.case_seconds:.2f} s in cases ({share:.1%} of the rest; "
                    f"{outcome.remeasured} case(s) re-measured)",
                    flush=True,
                )
        for n, m in enumerate(mutations, 1):
            head = commit_change(repo, base, m.file, m.original, m.replacement, m.id)
            outcome = review(repo, base, head, m.kernel, tmp / f"mut-{n}", _env(tmp, measure_defaults=False))
            results[m.id] = outcome
            how = (
                "BUILD FAILED (not counted)"
                if not outcome.built
                else "caught by random inputs"
                if outcome.by_random
                else f"caught by probes only ({', '.join(outcome.by_probe[:3])})"
                if outcome.by_probe
                else "MISSED (latency fail only)"
                if outcome.latency_only
                else "MISSED"
            )
            print(
                f"[{n:2d}/{len(mutations)}] {m.id:36s} {outcome.verdict:5s} {outcome.seconds:5.1f} s  {how}", flush=True
            )
    summarize(mutations, results, aa)
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "mutations": {k: vars(v) for k, v in results.items()},
                    "aa": {k: [vars(o) for o in v] for k, v in aa.items()},
                },
                indent=2,
            )
        )


def summarize(mutations: list[Mutation], results: dict[str, Outcome], aa: dict[str, list[Outcome]]) -> None:
    """Caught/missed per kernel and per class, the A/A false fails and the probes' share of case time."""
    counted = [m for m in mutations if results[m.id].built]
    by: dict[str, dict[str, list[int]]] = {
        "kernel": defaultdict(lambda: [0, 0, 0]),
        "class": defaultdict(lambda: [0, 0, 0]),
    }
    for m in counted:
        r = results[m.id]
        for axis, key in (("kernel", m.kernel), ("class", m.cls)):
            row = by[axis][key]
            row[0] += 1
            row[1] += r.caught
            row[2] += r.caught and not r.by_random
    for axis in ("kernel", "class"):
        print(f"\n| {axis} | mutations | caught | by probes only | missed |\n|---|---|---|---|---|")
        for key, (total, caught, probe_only) in sorted(by[axis].items()):
            print(f"| {key} | {total} | {caught} | {probe_only} | {total - caught} |")
    total, caught = len(counted), sum(results[m.id].caught for m in counted)
    probe_only = sum(results[m.id].caught and not results[m.id].by_random for m in counted)
    print(
        f"\ncaught {caught}/{total} ({caught / max(total, 1):.1%}); by the random inputs alone "
        f"{caught - probe_only}/{total}; only by a boundary probe {probe_only}"
    )
    if missed := [m.id for m in counted if not results[m.id].caught]:
        print("missed: " + ", ".join(missed))
    if unbuilt := [m.id for m in mutations if not results[m.id].built]:
        print("did not build (not counted): " + ", ".join(unbuilt))
    if aa:
        print(
            "\n| kernel | A/A reviews | false fails | re-measured cases | probe s / rest of the cases s | probe share |"
            "\n|---|---|---|---|---|---|"
        )
        for kernel, runs in sorted(aa.items()):
            fails = sum(r.verdict in ("fail", "error") for r in runs)
            probe = sum(r.probe_seconds for r in runs)
            rest = sum(r.case_seconds - r.probe_seconds for r in runs)
            again = sum(r.remeasured for r in runs)
            share = probe / max(rest, 1e-9)
            print(f"| {kernel} | {len(runs)} | {fails} | {again} | {probe:.2f} / {rest:.2f} | {share:.1%} |")


if __name__ == "__main__":
    main()
