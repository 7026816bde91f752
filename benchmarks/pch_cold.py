"""A cold `opgate review` of the README demo and a cold `opgate check`, on an empty build store and with the
precompiled torch header already in it, alternating, with each command's wall time and its processes' CPU time —
and, with `--phases`, where every CPU second of each went, process by process.

First (when `--stores` holds H or S) the runner's setup step the header needs, timed: `OPGATE_PCH=first opgate
check deepgemm_tile` on an empty store (it compiles the header with the binding); its store's `pch/` folder is the
header every (H) run starts from (hard-linked into a fresh build folder); an (S) run starts from its `toolchain/`
probes too — what any earlier check or review leaves a persistent runner, or a restored cache an ephemeral one, less
every compiled object. Every run has a fresh build folder and ledger otherwise (cold: nothing compiled), the
repository's default settings (the agent offline). The demo change
(examples/changes/deepgemm_tile_tile_n_256.patch) is applied in a scratch clone of this checkout's HEAD, as
scripts/demo.sh does. `--before DIR` runs every command with DIR's opgate too (DIR/.venv/bin/opgate, another
worktree: a before/after in one run), alternating with this checkout's.
CPU time is user + sys of the command and every process it starts, sandboxed compilers included: each command
runs in a cgroup v1 `cpuacct` group of its own where /sys/fs/cgroup/cpuacct is writable (as root), else it is
resource.getrusage of the waited-for children (which misses what bubblewrap's own init reaps). `--phases` (root)
turns the kernel's process accounting (acct(2)) on for each command: every process it started writes its own CPU
seconds when it exits, each is named by its argv (read from /proc while it runs) or its nearest named parent's —
the toolchain probe, each object ninja compiles, the link, each nvcc compile of the resource check, the judge, the
zygotes and their workers, the CPU peak, git, opgate itself — and the table's sum is set against the cgroup's total.
The load average before and after each run says how busy the shared machine was. Usage:

  .venv/bin/python benchmarks/pch_cold.py [--rounds 2] [--stores E,H,S] [--commands review,check] [--phases]
                                          [--before DIR]
"""

from __future__ import annotations

import argparse
import ctypes
import os
import re
import resource
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
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


@dataclass
class Run:
    code: int
    wall: float
    cpu: float
    tail: str
    table: str = ""


def timed(args: list[str], env: dict[str, str], cwd: Path, acct: Path | None = None) -> Run:
    """Exit code, wall seconds, CPU seconds (user + sys of the command and its descendants), the output's tail;
    with `acct`, the command's CPU seconds by phase (process accounting into that file)."""
    group = CPUACCT / f"opgate-bench-{os.getpid()}-{time.monotonic_ns()}"
    try:
        group.mkdir()
    except OSError:
        group = None  # type: ignore[assignment]

    def enter() -> None:
        if group is not None:
            (group / "cgroup.procs").write_text(str(os.getpid()))

    accounting = Accounting(acct) if acct is not None else None
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    if accounting is not None:
        accounting.__enter__()
    started = time.perf_counter()
    try:
        proc = subprocess.Popen(
            args, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, preexec_fn=enter
        )
        out, _ = proc.communicate()
        wall = time.perf_counter() - started
    finally:
        if accounting is not None:
            accounting.__exit__()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if group is not None:
        cpu = int((group / "cpuacct.usage").read_text()) / 1e9
        group.rmdir()
    tail = "\n".join(out.strip().splitlines()[-6:])
    table = ""
    if accounting is not None:
        table = phase_table(attribute(accounting.processes(proc.pid), proc.pid), cpu)
    return Run(proc.returncode, wall, cpu, tail, table)


def environment(build: Path, ledger: Path, pch: str | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TAOTOKEN_", "OPGATE_", "GITHUB_"))}
    env.update(OPGATE_BUILD_DIR=str(build), OPGATE_DATABASE_URL=str(ledger))
    if pch:
        env["OPGATE_PCH"] = pch
    return env


# -- where every CPU second went: the kernel's process accounting ----------------------------------------------

ACCT = struct.Struct("<ccHIIIIIIfHHHHHHHH16s")  # struct acct_v3 (linux/acct.h), 64 bytes per exited process
AHZ = 100  # comp_t's clock ticks per second
POLL_S = 0.02


def _comp(c: int) -> float:
    """comp_t: 13-bit mantissa, 3-bit base-8 exponent, in AHZ ticks -> seconds."""
    return ((c & 0x1FFF) << (3 * ((c >> 13) & 7))) / AHZ


@dataclass
class Proc:
    """One process the command started (or the command itself), from its accounting record and what the poller saw."""

    pid: int
    ppid: int
    comm: str
    cpu: float  # its own user + sys seconds (not its children's)
    elapsed: float  # seconds from its start to its exit
    argv: list[str] = field(default_factory=list)
    seen: float | None = None  # when the poller first saw it (perf_counter)
    role: str = ""


class Accounting:
    """BSD process accounting (acct(2), as root) on for one command: every process that exits while it is on writes
    one record with its own CPU time, pid and parent — sandboxed ones too (bubblewrap's pid namespaces are below
    this one) — and a poller reads each new process's argv from /proc so a process can be named by what it runs."""

    def __init__(self, path: Path) -> None:
        self.path, self.argv, self.seen = path, {}, {}
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._poll, daemon=True)

    def __enter__(self) -> Accounting:
        self.path.touch()
        if self.libc.acct(str(self.path).encode()) != 0:
            raise OSError(ctypes.get_errno(), f"acct({self.path}): {os.strerror(ctypes.get_errno())}")
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()
        self.libc.acct(None)

    def _poll(self) -> None:
        while not self.stop.is_set():
            for entry in os.scandir("/proc"):
                if not entry.name.isdigit() or (pid := int(entry.name)) in self.argv:
                    continue
                try:
                    raw = Path(f"/proc/{pid}/cmdline").read_bytes()
                except OSError:
                    continue
                if raw:
                    self.argv[pid] = raw.decode(errors="replace").split("\0")[:-1]
                    self.seen[pid] = time.perf_counter()
            self.stop.wait(POLL_S)

    def processes(self, root: int) -> list[Proc]:
        """The records of `root` and every process below it (by parent pid)."""
        data = self.path.read_bytes()
        procs: dict[int, Proc] = {}
        for off in range(0, len(data) - ACCT.size + 1, ACCT.size):
            f = ACCT.unpack_from(data, off)
            if f[1] != b"\x03":
                raise SystemExit(f"{self.path}: not acct_v3 records (version {f[1]!r})")
            pid, ppid = f[6], f[7]
            comm = f[18].split(b"\0", 1)[0].decode(errors="replace")
            cpu = _comp(f[10]) + _comp(f[11])
            procs[pid] = Proc(pid, ppid, comm, cpu, f[9] / AHZ, self.argv.get(pid, []), self.seen.get(pid))
        mine, todo = {}, [root]
        while todo:
            pid = todo.pop()
            if pid in procs and pid not in mine:
                mine[pid] = procs[pid]
                todo += [p.pid for p in procs.values() if p.ppid == pid]
        return list(mine.values())


def _role(p: Proc, top: int) -> str | None:
    """What a process is, by its own argv (None: it belongs to its parent's role)."""
    a = " ".join(p.argv)
    base = Path(p.argv[0]).name if p.argv else p.comm
    if p.pid == top:
        return "opgate itself (start-up, imports, the flow, report and comment)"
    if base.startswith("bwrap") and "--" in p.argv:  # a sandbox start: named by what it runs
        inner = Proc(p.pid, p.ppid, p.comm, 0.0, 0.0, p.argv[p.argv.index("--") + 1 :])
        return f"{_role(inner, top) or Path(inner.argv[0]).name if inner.argv else '?'} [bwrap]"
    for module, name in (
        ("bot.untrusted.toolchain", "toolchain probe (imports torch)"),
        ("bot.untrusted.runner.judge", "judge"),
        ("bot.untrusted.runner.dry", "judge (dry run, sandboxed)"),
        ("bot.untrusted.runner.cost", "cost process"),
        ("bot.edges.peak", "CPU peak (imports torch)"),
    ):
        if f"-m {module}" in a:
            return name
    if "/opgate/run/worker.py" in a:
        return "zygote + workers (worker.py)"
    if base == "nvcc" or base.endswith("/nvcc"):
        arch = ",".join(dict.fromkeys(re.findall(r"sm_\d+[a-z]?", a))) or "?"
        src = next((Path(x).name for x in p.argv if x.endswith(".cu")), "?")
        return f"nvcc {src} {arch} (resource check)"
    cxx = re.search(r"(^|-)(g\+\+|c\+\+|gcc|cc)(-\d+)?$", base) is not None
    if cxx and "-c" in p.argv:
        if "c++-header" in p.argv:
            return "compile the precompiled torch header"
        src = next((Path(x).name for x in p.argv if x.startswith("/opgate/src/")), None)
        if src:
            return f"compile {src}"
    if cxx and any(x.endswith("ext.so") for x in p.argv):
        return "link ext.so"
    if cxx and "--version" in p.argv:
        return "compiler --version"
    if base == "ninja":
        return "ninja"
    if base == "git":
        return "git"
    if "valgrind" in base:
        return "callgrind"
    return None


def attribute(procs: list[Proc], top: int) -> list[Proc]:
    """Each process's role: its own, else its nearest named ancestor's (bwrap is named apart, under that role)."""
    by_pid = {p.pid: p for p in procs}

    def role(p: Proc) -> str:
        if p.role:
            return p.role
        own = _role(p, top)
        if own is None:
            parent = by_pid.get(p.ppid)
            if parent is None or parent is p:
                own = f"other ({p.comm})"
            elif parent.pid == top:
                own = f"opgate's short-lived children ({p.comm})"
            else:
                own = role(parent)
        p.role = own
        return own

    for p in procs:
        role(p)
    return procs


def phase_table(procs: list[Proc], total: float) -> str:
    """CPU seconds per role (processes, CPU, wall from its first start to its last end), largest first."""
    rows: dict[str, list[Proc]] = {}
    for p in procs:
        rows.setdefault(p.role, []).append(p)
    lines = [
        "| phase (process role) | processes | CPU s | share | wall s (first start to last end) |",
        "|---|---|---|---|---|",
    ]
    accounted = sum(p.cpu for p in procs)
    for name, ps in sorted(rows.items(), key=lambda kv: -sum(p.cpu for p in kv[1])):
        cpu = sum(p.cpu for p in ps)
        starts = [p.seen for p in ps if p.seen is not None]
        ends = [p.seen + p.elapsed for p in ps if p.seen is not None]
        wall = f"{max(ends) - min(starts):.1f}" if starts else "—"
        lines.append(f"| {name} | {len(ps)} | {cpu:.2f} | {cpu / total:.0%} | {wall} |" if total else "")
    lines.append(f"| **accounted** | {len(procs)} | **{accounted:.2f}** | of {total:.2f} s (cgroup) | |")
    return "\n".join(lines)


def torch_import() -> float:
    """CPU seconds of `python -c "import torch"` alone (median of 3): what each python process that imports it pays."""
    cpus = []
    for _ in range(3):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run([sys.executable, "-c", "import torch"], check=True)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return statistics.median(cpus)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument(
        "--stores", default="E,H", help="E: an empty store, H: the header stored, S: the header and the toolchain "
        "probe stored (what the setup step leaves a runner, less the kernel's objects) (default: E,H)"
    )  # fmt: skip
    parser.add_argument("--commands", default="review,check")
    parser.add_argument("--phases", action="store_true", help="CPU seconds per process role (process accounting)")
    parser.add_argument("--before", type=Path, help="another checkout whose .venv/bin/opgate runs each command too")
    args = parser.parse_args()
    stores = args.stores.split(",")
    commands = args.commands.split(",")
    trees = {"after": OPGATE}
    if args.before:
        trees["before"] = str(args.before.resolve() / ".venv" / "bin" / "opgate")
    results: dict[str, list[tuple[float, float]]] = {}
    if args.phases:
        print(f"torch import alone: {torch_import():.2f} s CPU (median of 3)", flush=True)
    with tempfile.TemporaryDirectory(prefix="opgate-pch-cold-") as t:
        tmp = Path(t)
        repo = scratch_repo(tmp)
        headers = tmp / "setup" / "build" / "pch"
        if "H" in stores or "S" in stores:
            setup = tmp / "setup"
            setup.mkdir()
            load = os.getloadavg()[0]
            run = timed(
                [OPGATE, "check", "deepgemm_tile", "--repo", str(repo)],
                environment(setup / "build", setup / "ledger.sqlite", "first"), tmp,
            )  # fmt: skip
            print(f"setup: OPGATE_PCH=first opgate check  exit {run.code}  {run.wall:6.1f} s wall  "
                  f"{run.cpu:6.1f} s CPU  "
                  f"load {load:.2f} -> {os.getloadavg()[0]:.2f}", flush=True)  # fmt: skip
            gch = sorted(headers.rglob("*.gch"))
            if run.code != 0 or not gch:
                raise SystemExit(f"the setup step did not leave a precompiled header:\n{run.tail}")
            print(f"       {gch[0].relative_to(headers)}  {gch[0].stat().st_size / 1e6:.0f} MB", flush=True)
        plan = [
            (r, command, variant, tree)
            for r in range(args.rounds)
            for command in commands
            for variant in (stores if r % 2 == 0 else stores[::-1])
            for tree in (list(trees) if r % 2 == 0 else list(trees)[::-1])
        ]
        for n, (r, command, variant, tree) in enumerate(plan):
            run_dir = tmp / f"run{n}"
            run_dir.mkdir()
            if variant in ("H", "S"):
                shutil.copytree(headers, run_dir / "build" / "pch", copy_function=os.link)
            if variant == "S":
                probe = headers.parent / "toolchain"
                shutil.copytree(probe, run_dir / "build" / "toolchain", copy_function=os.link)
            argv = (
                [trees[tree], "review", "--repo", str(repo), "--base", "HEAD~1", "--head", "HEAD", "--out",
                 str(run_dir / "out")]
                if command == "review"
                else [trees[tree], "check", "deepgemm_tile", "--repo", str(repo)]
            )  # fmt: skip
            load = os.getloadavg()[0]
            env = environment(run_dir / "build", run_dir / "ledger.sqlite")
            run = timed(argv, env, tmp, run_dir / "acct" if args.phases else None)
            print(f"\nround {r + 1} {command:6s} ({variant}, {tree})  exit {run.code}  {run.wall:6.1f} s wall  "
                  f"{run.cpu:6.1f} s CPU  load {load:.2f} -> {os.getloadavg()[0]:.2f}", flush=True)  # fmt: skip
            if run.code > 1:
                print(run.tail, flush=True)
            if run.table:
                print(run.table, flush=True)
            results.setdefault(f"{command} {variant} {tree}", []).append((run.wall, run.cpu))
            shutil.rmtree(run_dir, ignore_errors=True)
    labels = {"E": "empty store", "H": "header in the store", "S": "header and probe"}
    print()
    for name, runs in results.items():
        command, variant, tree = name.split()
        walls, cpus = [w for w, _ in runs], [c for _, c in runs]
        print(f"{command:6s} {labels[variant]:20s} {tree:6s} median {statistics.median(walls):6.1f} s wall "
              f"{statistics.median(cpus):6.1f} s CPU  ({', '.join(f'{w:.1f}/{c:.1f}' for w, c in runs)})")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
