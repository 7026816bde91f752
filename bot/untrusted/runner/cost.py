"""The simulated cost of CPU cases: head and base run under valgrind's callgrind in the sandbox, counted, not timed.

Runs as `python -m bot.untrusted.runner.cost JOB.json` (started like the judge, no secrets) and prints one JSON line
per case (a `SimulatedCost`). It draws each case's check inputs from the run's secret exactly as the judge does
(`Judge.seed(name, "check")`), writes them once, and starts one `valgrind --tool=callgrind --instr-atstart=no`
process per side at the same time: Python and torch start uninstrumented, and only the calls between the shim's
client requests are simulated (callgrind 3.19 has client requests; cachegrind gains them only in 3.22). Instruction
counts and the simulated caches do not depend on the machine's load: the same build counts the same on every run.
Every file a side leaves (its dumps, its output) is untrusted data: sizes are bounded, the output is compared with the
reference, and the gate reports the ratio beside p50 and decides nothing by it
(`bot.verdict.gate_latency.simulated_note`).

The counts cannot be made unforgeable by the side they count: under valgrind the kernel shares one address space with
callgrind and runs unconfined (valgrind refuses a guest's seccomp filter), so it can issue callgrind's client requests
itself (zero the counters, stop collecting), write callgrind's counters in memory, and open any path valgrind writes
its dumps to. So a side's dump folder must hold exactly one dump per case at the name callgrind gives it (and the
end-of-run dump), any other entry refuses the side's every count, and a count that is accepted is reported and
decides nothing (`simulated_note`, issue 40: a model, forgeable, and in the measured reviews CPU time decided what it
never did).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Literal

from bot.models.cost import SideCost, SimulatedCost
from bot.models.finding import Phrase
from bot.models.judging import JudgeJob
from bot.models.report import Isolation
from bot.text.safe import log_safe
from bot.untrusted.runner import protocol
from bot.untrusted.runner.spawn import EXT, IN, JUDGE_SLACK_S, OUT, RUN, run_trusted
from bot.untrusted.sandbox import Bind, Sandbox, Spec, kill

COST_FILES = ("costrun.py", "entry.py", "protocol.py")  # what the sandbox under callgrind holds of runner/
CALLS = 3  # counted calls per case and side (after one uncounted), each on an input set of its own
START_S = 300.0  # python and torch starting under valgrind, per side, on a busy 2-core runner
DUMP_MAX_BYTES = 4 << 20  # a dump file is read only this far
DUMP = "/opgate/dump"  # the side's dump folder (callgrind writes callgrind.out.1, .2, … and callgrind.out at exit)
# Pinned cache geometry, so the estimate is the same on every runner (valgrind otherwise reads the host's).
CACHES = ("--I1=32768,8,64", "--D1=32768,8,64", "--LL=8388608,16,64")
SHIM_C = """#include <valgrind/callgrind.h>
void opgate_cost_begin(void) { CALLGRIND_START_INSTRUMENTATION; CALLGRIND_ZERO_STATS; }
void opgate_cost_end(const char* name) { CALLGRIND_DUMP_STATS_AT(name); CALLGRIND_STOP_INSTRUMENTATION; }
"""
_TRIGGER = re.compile(r"^desc: Trigger: Client Request: opgate:(\d+)$", re.MULTILINE)
_EVENTS = re.compile(r"^events: (.+)$", re.MULTILINE)
_SUMMARY = re.compile(r"^summary: ([0-9 ]+)$", re.MULTILINE)


def missing() -> str | None:
    """What this machine lacks for a simulated cost, or None."""
    if shutil.which("valgrind") is None:
        return "valgrind is not installed (Debian: apt-get install valgrind)"
    if not Path("/usr/include/valgrind/callgrind.h").is_file():
        return "valgrind's headers are missing (/usr/include/valgrind/callgrind.h)"
    if shutil.which("cc") is None and shutil.which("gcc") is None:
        return "no C compiler for the client-request shim"
    return None


def tool_version() -> str:
    out = subprocess.run(["valgrind", "--version"], capture_output=True, text=True, timeout=30).stdout.strip()
    return f"callgrind ({out or 'valgrind'})"


def parse_dump(text: str) -> tuple[int, dict[str, int]] | None:
    """(case index, event -> count) of one callgrind dump written at the shim's request; None for any other dump."""
    trigger, events, summary = _TRIGGER.search(text), _EVENTS.search(text), _SUMMARY.search(text)
    if trigger is None or events is None or summary is None:
        return None
    names, values = events.group(1).split(), [int(v) for v in summary.group(1).split()]
    if len(names) != len(values) or any(v < 0 or v >= 1 << 62 for v in values):
        return None
    return int(trigger.group(1)), dict(zip(names, values, strict=True))


def side_cost(events: dict[str, int], calls: int) -> SideCost:
    """Per call: instructions, L1 and LL misses, and cycles estimated as KCachegrind does (Ir + 10 L1m + 100 LLm)."""
    l1 = sum(events.get(k, 0) for k in ("I1mr", "D1mr", "D1mw"))
    ll = sum(events.get(k, 0) for k in ("ILmr", "DLmr", "DLmw"))
    ir = events.get("Ir", 0)
    return SideCost(
        instructions=ir // calls,
        l1_misses=l1 // calls,
        ll_misses=ll // calls,
        cycles=(ir + 10 * l1 + 100 * ll) // calls,
        calls=calls,
    )


class Costs:
    """Simulates every case of one job on both sides; `run` never raises for anything a side does."""

    def __init__(self, job: JudgeJob, sandbox: Sandbox) -> None:
        self.job, self.sandbox = job, sandbox
        from bot.untrusted.runner.judge import Judge  # torch: in the cost process only, never the review's

        self.judge = Judge(job, sandbox)  # its seed, inputs, reference and input files; no worker is started
        self.root = self.judge.root
        self.tool = tool_version()

    def close(self) -> None:
        self.judge.close()

    def _shim(self) -> Path:
        source, so = self.root / "shim.c", self.root / "shim.so"
        source.write_text(SHIM_C)
        cc = shutil.which("cc") or "gcc"
        subprocess.run([cc, "-shared", "-fPIC", "-O1", str(source), "-o", str(so)], check=True, timeout=120)
        return so

    def run(self) -> dict[str, SimulatedCost]:
        """Each case's SimulatedCost of head against base (every side is counted at the same time)."""
        started = time.perf_counter()
        results = self.sides()
        seconds = round(time.perf_counter() - started, 2)
        reports = {}
        for i, case in enumerate(self.job.cases):
            got = {label: r[i] for label, r in results.items()}
            errors = [f"{label}: {v}" for label, v in got.items() if isinstance(v, str)]
            sides = {label: v for label, v in got.items() if isinstance(v, SideCost)}
            reports[case["name"]] = SimulatedCost(
                tool=self.tool,
                head=sides.get("head"),
                base=sides.get("base"),
                seconds=seconds,
                error="; ".join(errors) or None,
            )
        return reports

    def sides(self) -> dict[str, list[SideCost | str]]:
        """Side -> per case its cost per call, or why it has none."""
        shim = self._shim()
        cases, refs = [], []
        for case in self.job.cases:
            self.judge.prepare(case)  # the entry's params and, with output arguments, its call layout
            # The uncounted warm call on the check inputs, then every counted call on a set of its own (its own
            # poisoned outputs and zeroed scratch): no counted call meets what an earlier call left (issue 50, 1).
            seeds = [self.judge.seed(case["name"], "check")]
            seeds += [self.judge.seed(case["name"], "cost", k) for k in range(CALLS)]
            drawn = [self.judge.inputs(case, seed) for seed in seeds]
            refs.append(self.judge.expected(drawn[-1]))  # the last counted call's outputs are the ones compared
            file, sets, size = self.judge.write_sets(drawn)
            args, kwargs = self.judge.scalars
            lay = self.judge.layout.message() if self.judge.layout is not None else {}
            cases.append({"file": f"{IN}/{file}", "sets": sets, "max_bytes": size, "args": args, "kwargs": kwargs,
                          **lay})  # fmt: skip
        procs = {label: self._start(label, sos["cpu"], shim, cases) for label, sos in self.job.sides.items()}
        deadline = time.monotonic() + START_S + sum(self.job.timeout_s for _ in cases) * 2
        return {label: self._finish(proc, out, refs, deadline) for label, (proc, out) in procs.items()}

    def _start(self, label: str, so: str, shim: Path, cases: list[dict[str, Any]]) -> tuple[subprocess.Popen, Path]:
        out = Path(tempfile.mkdtemp(prefix=f"cost-{label}-", dir=self.root))
        (out / "out").mkdir()
        (out / "dump").mkdir()  # created by the judge, apart from the outputs: only callgrind's dumps belong here
        here = Path(__file__).resolve().parent
        binds = [Bind(here / name, f"{RUN}/{name}") for name in COST_FILES]
        binds += [Bind(shim, f"{RUN}/shim.so"), Bind(Path(so), f"{EXT}/cpu.so")]
        binds += [Bind(self.root / "in", IN), Bind(out / "out", OUT, writable=True)]
        binds += [Bind(out / "dump", DUMP, writable=True)]
        spec = Spec(binds=binds, env={"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONHASHSEED": "0"})
        own = self.job.entries.get(label)  # each side runs the entry its own build names (a renamed kernel)
        module, entry = (own.module, own.entry) if own is not None else (self.job.module, self.job.entry)
        plan = {"so": f"{EXT}/cpu.so", "module": module, "entry": entry, "shim": f"{RUN}/shim.so"}
        plan_file = self.root / "in" / f"cost-{label}.json"
        plan_file.write_text(self.sandbox.localize(spec, json.dumps({**plan, "cases": cases})))
        argv = ["valgrind", "--tool=callgrind", "--instr-atstart=no", "--cache-sim=yes", *CACHES]
        argv += [f"--callgrind-out-file={DUMP}/callgrind.out", f"--log-file={OUT}/valgrind.log"]
        argv += [sys.executable, f"{RUN}/costrun.py", f"{IN}/{plan_file.name}", IN, OUT]
        proc = self.sandbox.popen(spec, argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return proc, out

    def _finish(
        self, proc: subprocess.Popen, out: Path, refs: list[list[Any]], deadline: float
    ) -> list[SideCost | str]:
        """Each case's cost, or why there is none (the side failed, a dump is missing, its output is wrong)."""
        try:
            proc.wait(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            kill(proc)
            proc.wait()
            return ["timed out under valgrind"] * len(refs)
        dumps, refused = read_dumps(out / "dump", len(refs))
        if refused is not None:
            return [f"no count: {refused}"] * len(refs)
        results: list[SideCost | str] = []
        for i, ref in enumerate(refs):
            if i not in dumps:
                tail = _last_line(out / "out" / "valgrind.log")
                results.append(f"no count (exit {proc.returncode}{f': {tail}' if tail else ''})")
                continue
            wrong = self._wrong(out / "out", i, ref)
            results.append(f"wrong output under valgrind ({wrong})" if wrong else side_cost(dumps[i], CALLS))
        return results

    def _wrong(self, out: Path, i: int, refs: list[Any]) -> str | None:
        """Why the side's last counted output differs from the reference, or None (a kernel that does less when it
        sees valgrind is caught here)."""
        try:
            header = out / f"out-{i}.json"
            if header.is_symlink() or not header.is_file() or header.stat().st_size > 1 << 20:
                return "no output"
            entries = json.loads(header.read_text())
            limit = sum(r.numel() * 8 for r in refs) + 4096
            outs = protocol.read_tensors(str(out / f"out-{i}.bin"), entries, max_bytes=limit, device="cpu")
        except (OSError, ValueError, protocol.ProtocolError) as exc:
            return f"unreadable output: {exc}"[:200]
        from bot.untrusted.runner.case import compare

        case = self.job.cases[i]
        check = compare(outs, refs, self.judge.output_names(refs))
        if check.nan_inf and not check.error:  # an output argument left unwritten holds the judge's NaN
            return "NaN/Inf where the reference has none"
        if check.error or (check.max_abs_err or 0.0) > case["tolerance"]:
            return check.error or f"max_abs_err {check.max_abs_err:.3g} > tolerance {case['tolerance']:g}"
        return None


def read_dumps(folder: Path, cases: int) -> tuple[dict[int, dict[str, int]], str | None]:
    """(case index -> events, None) from a side's dump folder, or ({}, why) when it holds anything callgrind would not
    have written: an entry other than callgrind.out.1 … callgrind.out.<cases> and callgrind.out, a link, a file with a
    second name, or a dump whose trigger is not its own case's (dump k is written for case k − 1, in order)."""
    expected = {f"callgrind.out.{k}": k - 1 for k in range(1, cases + 1)}
    dumps: dict[int, dict[str, int]] = {}
    try:
        names = []
        with os.scandir(folder) as entries:  # stops at the first stranger: a side may have written thousands
            for entry in entries:
                if entry.name != "callgrind.out" and entry.name not in expected:
                    stranger = log_safe(entry.name)[:60]
                    return {}, f"an unexpected file {stranger!r} in the dump folder: a side wrote its own"
                names.append(entry.name)
    except OSError as exc:
        return {}, f"the dump folder is unreadable ({exc.strerror})"
    for name in sorted(names):
        try:
            fd = os.open(folder / name, os.O_RDONLY | os.O_NOFOLLOW)
        except OSError:
            return {}, f"{name!r} in the dump folder is a link or vanished"
        with os.fdopen(fd, errors="replace") as f:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
                return {}, f"{name!r} in the dump folder is not a plain file of its own"
            if name == "callgrind.out":
                continue  # the end-of-run dump ("Program termination"): no case's count
            parsed = parse_dump(f.read(DUMP_MAX_BYTES))
        if parsed is None or parsed[0] != expected[name]:
            return {}, f"{name!r} is not the dump callgrind writes for case {expected[name]}"
        dumps[parsed[0]] = parsed[1]
    return dumps, None


def _last_line(path: Path) -> str:
    """The last line of a log the side could have written itself: bounded, made safe."""
    try:
        if path.is_symlink() or not path.is_file():
            return ""
        with path.open("rb") as f:
            f.seek(max(0, path.stat().st_size - 4096))
            lines = f.read(4096).decode(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return log_safe(lines[-1])[:200] if lines else ""


def run_costs(job: JudgeJob, launch: Literal["plain", "sandboxed"] = "plain") -> dict[str, SimulatedCost]:
    """Simulated costs of `job`'s cases (CPU builds of both sides); a SimulatedCost with `error` for any not counted."""
    if (why := missing()) is not None:
        return {c["name"]: SimulatedCost(error=why) for c in job.cases}
    timeout = START_S + sum(job.timeout_s for _ in job.cases) * 2 + JUDGE_SLACK_S
    stdout, err, failure = run_trusted(job, "bot.untrusted.runner.cost", launch, timeout, "the cost process")
    costs: dict[str, SimulatedCost] = {}
    for line in stdout.splitlines():
        try:
            data = json.loads(line)
            costs[str(data["case"])] = SimulatedCost.model_validate(data["cost"])
        except (ValueError, KeyError, TypeError):
            continue
    for case in job.cases:
        tail = log_safe(err.strip().splitlines()[-1] if err.strip() else "")[:200]
        costs.setdefault(case["name"], SimulatedCost(error=f"{failure or 'no result'}{f': {tail}' if tail else ''}"))
    return costs


def main(job_path: str) -> None:
    job = JudgeJob.model_validate_json(Path(job_path).read_text())
    import torch

    torch.set_num_threads(1)
    inside = Isolation(
        mode="none",
        reason=Phrase.as_written("the cost process itself runs in the sandbox (its reference is untrusted)"),
    )
    sandbox = Sandbox.detect() if job.isolate_workers else Sandbox(inside, None)
    costs = Costs(job, sandbox)
    try:
        for name, cost in costs.run().items():
            print(json.dumps({"case": name, "cost": cost.model_dump()}), flush=True)
    finally:
        costs.close()
        sys.stdout.flush()


if __name__ == "__main__":
    main(sys.argv[1])
