"""A cold `opgate review` of the README demo and a cold `opgate check`, on an empty build store and with the
precompiled torch header already in it, alternating, with each command's wall time and its processes' CPU time.

First the runner's setup step the header needs, timed: `OPGATE_PCH=first opgate check deepgemm_tile` on an empty
store (it compiles the header with the binding); its store's `pch/` folder is the header every (H) run starts from
(hard-linked into a fresh build folder). Every run has a fresh build folder and ledger (cold: nothing compiled), the
repository's default settings otherwise (the agent offline). The demo change (examples/changes/
deepgemm_tile_tile_n_256.patch) is applied in a scratch clone of this checkout's HEAD, as scripts/demo.sh does.
CPU time is user + sys of the command and every process it starts, sandboxed compilers included: each command
runs in a cgroup v1 `cpuacct` group of its own where /sys/fs/cgroup/cpuacct is writable (as root), else it is
resource.getrusage of the waited-for children (which misses what bubblewrap's own init reaps). The load average
before and after each run says how busy the shared machine was. Usage:

  .venv/bin/python benchmarks/pch_cold.py [--rounds 2]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PATCH = ROOT / "examples" / "changes" / "deepgemm_tile_tile_n_256.patch"
OPGATE = str(Path(sys.executable).with_name("opgate"))


def scratch_repo(tmp: Path) -> Path:
    repo = tmp / "repo"
    subprocess.run(["git", "clone", "--quiet", "--no-hardlinks", str(ROOT), str(repo)], check=True)
    subprocess.run(["git", "-C", str(repo), "apply", str(PATCH)], check=True)
    subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=bench", "-c", "user.email=bench@opgate.local", "commit",
         "--quiet", "-am", "demo: tile_n 256"],
        check=True,
    )  # fmt: skip
    return repo


CPUACCT = Path("/sys/fs/cgroup/cpuacct")


def timed(args: list[str], env: dict[str, str], cwd: Path) -> tuple[int, float, float, str]:
    """Exit code, wall seconds, CPU seconds (user + sys of the command and its descendants), the output's tail."""
    group = CPUACCT / f"opgate-bench-{os.getpid()}-{time.monotonic_ns()}"
    try:
        group.mkdir()
    except OSError:
        group = None  # type: ignore[assignment]

    def enter() -> None:
        if group is not None:
            (group / "cgroup.procs").write_text(str(os.getpid()))

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(args, env=env, cwd=cwd, capture_output=True, text=True, preexec_fn=enter)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if group is not None:
        cpu = int((group / "cpuacct.usage").read_text()) / 1e9
        group.rmdir()
    tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-6:])
    return done.returncode, wall, cpu, tail


def environment(build: Path, ledger: Path, pch: str | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TAOTOKEN_", "OPGATE_", "GITHUB_"))}
    env.update(OPGATE_BUILD_DIR=str(build), OPGATE_DATABASE_URL=str(ledger))
    if pch:
        env["OPGATE_PCH"] = pch
    return env


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    results: dict[str, list[tuple[float, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="opgate-pch-cold-") as t:
        tmp = Path(t)
        repo = scratch_repo(tmp)
        setup = tmp / "setup"
        setup.mkdir()
        load = os.getloadavg()[0]
        code, wall, cpu, tail = timed(
            [OPGATE, "check", "deepgemm_tile", "--repo", str(repo)],
            environment(setup / "build", setup / "ledger.sqlite", "first"), repo,
        )  # fmt: skip
        print(f"setup: OPGATE_PCH=first opgate check  exit {code}  {wall:6.1f} s wall  {cpu:6.1f} s CPU  "
              f"load {load:.2f} -> {os.getloadavg()[0]:.2f}", flush=True)  # fmt: skip
        headers = setup / "build" / "pch"
        gch = sorted(headers.rglob("*.gch"))
        if code != 0 or not gch:
            raise SystemExit(f"the setup step did not leave a precompiled header:\n{tail}")
        print(f"       {gch[0].relative_to(headers)}  {gch[0].stat().st_size / 1e6:.0f} MB", flush=True)
        n = 0
        for r in range(args.rounds):
            order = ["E", "H"] if r % 2 == 0 else ["H", "E"]
            for command in ("review", "check"):
                for variant in order:
                    n += 1
                    run = tmp / f"run{n}"
                    run.mkdir()
                    if variant == "H":
                        shutil.copytree(headers, run / "build" / "pch", copy_function=os.link)
                    argv = (
                        [OPGATE, "review", "--repo", str(repo), "--base", "HEAD~1", "--head", "HEAD", "--out",
                         str(run / "out")]
                        if command == "review"
                        else [OPGATE, "check", "deepgemm_tile", "--repo", str(repo)]
                    )  # fmt: skip
                    load = os.getloadavg()[0]
                    code, wall, cpu, tail = timed(argv, environment(run / "build", run / "ledger.sqlite"), repo)
                    print(f"round {r + 1} {command:6s} ({variant})  exit {code}  {wall:6.1f} s wall  {cpu:6.1f} s CPU  "
                          f"load {load:.2f} -> {os.getloadavg()[0]:.2f}", flush=True)  # fmt: skip
                    if code > 1:
                        print(tail, flush=True)
                    results.setdefault(f"{command} {variant}", []).append((wall, cpu))
                    shutil.rmtree(run, ignore_errors=True)
    labels = {"E": "empty store", "H": "header in the store"}
    for name, runs in results.items():
        command, variant = name.split()
        walls, cpus = [w for w, _ in runs], [c for _, c in runs]
        print(f"{command:6s} {labels[variant]:20s} median {statistics.median(walls):6.1f} s wall "
              f"{statistics.median(cpus):6.1f} s CPU  ({', '.join(f'{w:.1f}/{c:.1f}' for w, c in runs)})")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
