"""The judge's timing loop: the correct sides timed in interleaved blocks over fresh process pairs until the
sequential rule stops (docs/review.md), with spot checks of the outputs and the CPU accounting (cpu_accounting.py).

On the CPU every block is measured twice: its wall time (the judge's clock, request to reply) and the CPU time
of every thread of the side's sandbox in it (the kernel's accounting, read by the judge before and after the
block, bot/untrusted/sandbox.py `process_cpu_ns`); the gate compares both (bot/verdict/gate_latency.py)."""

from __future__ import annotations

import os
import random
import time
from typing import Any, Protocol

import torch

from bot.models.finding import Phrase
from bot.models.judging import Check, JudgeJob, Spot, Timing
from bot.phases import Phases
from bot.untrusted.runner import protocol
from bot.untrusted.runner.buffers import left_nonzero
from bot.untrusted.runner.case import CaseState, Input, compare, what_failed
from bot.untrusted.runner.cpu_accounting import CpuAccount, OtherLoad
from bot.untrusted.runner.health import noisy_phrase, snapshot
from bot.untrusted.runner.zygote import Raised, Worker, Zygote
from bot.verdict.stats import EARLY_MIN_PAIRS, Paired, early_stop, paired

THROTTLE_FRACTION = 0.95  # a block measured below 95% of the highest SM clock seen is discarded
BLOCK_MS = 20.0  # a timing block lasts about this long per side
# Fewer calls per block where drawing their input sets would take longer than this. A block's sets are drawn once and
# serve every later process pair once drawing has cost DRAW_FLOOR_S and the timing so far (`Sampler._inputs`), so this
# bounds the first pair's wait, not the case's: 1 s keeps the block of a FlashMLA-shaped CPU case (9 calls of 2.2 ms,
# 88 ms to draw a set) as long as it was when its calls shared sets; at 0.25 s it had 2 calls.
DRAW_PER_BLOCK_S = 1.0
DRAW_FLOOR_S = 2.0  # input drawing may always take this long per case; beyond it, no longer than the timing
MAX_CALLS = 50  # calls per timing block, at most (each with an input set of its own)
SPOT_PROBABILITY = 0.25  # share of GPU blocks whose outputs are fetched and checked (a CPU case checks every block)
GPU_BUSY_MS = 2.0  # the judge's own tiny kernel waiting longer than this means the worker left work running
BUSY_FACTOR = 2  # a busy runner measures this many times longer (processes, samples, seconds) before the last look


def calls_per_block(call_ms: float, tensors_per_set: int, draw_per_set_s: float) -> int:
    """Calls per timing block, each on an input set of its own (its own output and scratch buffers): as many as
    fill BLOCK_MS, at most MAX_CALLS, no more sets than one input file's header holds (an entry with output and
    scratch arguments carries them in every set), and fewer where drawing a set costs more than DRAW_PER_BLOCK_S
    allows (big GPU cases draw hundreds of MB per set): such a block is shorter than BLOCK_MS, never a
    block whose calls share sets (issue 50, 1: a call that sees a set an earlier call saw can skip its work)."""
    per_file = protocol.MAX_TENSORS // max(1, tensors_per_set)
    fill = int(BLOCK_MS / max(call_ms, 1e-3))
    return max(1, min(MAX_CALLS, fill, per_file, int(DRAW_PER_BLOCK_S / max(draw_per_set_s, 1e-6))))


class Judging(Protocol):
    """The judge as the Sampler uses it: its job, sides and phases; seeds, inputs, input files, the reference."""

    job: JudgeJob
    sides: dict[str, Zygote]
    phases: Phases
    draw_seconds: float

    def seed(self, *parts: object) -> int: ...
    def inputs(self, case: dict[str, Any], seed: int) -> list[Input]: ...
    def expected(self, inputs: list[Input]) -> list[torch.Tensor]: ...
    def write_sets(self, sets: list[list[Input]]) -> tuple[str, list[list[dict[str, Any]]], int]: ...
    def drop(self, name: str) -> None: ...
    def worker(self, label: str, case: dict[str, Any], process: int, deadline: float) -> Worker: ...


class Sampler:
    """Interleaved timing of the correct sides over several fresh process pairs, with spot checks and CPU accounting.

    Each pair is one new worker per side (forked from the side's zygote, placed afresh): warm-up, then
    `min_blocks` blocks A B, B A, … of fresh inputs. After each pair the paired statistic is looked at
    (`bot.verdict.stats.early_stop`): it stops early when its 99.9 % interval clears the limit (on the CPU with the
    CPU time's; or the CPU time's alone where the gate would then decide by it), else at the last look — a cap, or a
    95 % interval narrow enough — where the 95 % interval decides. A busy runner (other processes
    over `noise_limit_cores`) raises the caps by BUSY_FACTOR: noise buys measurement, it never vetoes a verdict.
    """

    def __init__(
        self,
        judge: Judging,
        case: dict[str, Any],
        workers: dict[str, Worker],
        deadline: float,
        state: CaseState,
        warm: list[Input],
    ) -> None:
        self.judge, self.case, self.workers, self.deadline, self.state = judge, case, workers, deadline, state
        self.warm = warm  # the check inputs: warm-ups run on them (drawing inputs can cost seconds on a GPU case)
        self.draw_per_set = judge.draw_seconds
        self.drawn_seconds = 0.0
        self.pool: dict[int, tuple[str, list[list[dict[str, Any]]], int, list[list[Input]]]] = {}  # by block index
        self.loaded: dict[str, str] = {}
        self.m = judge.job.measure
        self.labels = list(workers)
        self.processes: dict[str, list[list[float]]] = {label: [] for label in self.labels}
        self.cpu_processes: dict[str, list[list[float]]] = {label: [] for label in self.labels}  # CPU ms per call
        self.firsts: dict[str, list[list[bool]]] = {label: [] for label in self.labels}  # ran first in its block
        self.busy: str | None = None  # why the runner is busy, as far as measured so far
        self.account = CpuAccount(self.labels)
        self.load = OtherLoad(self._ours)  # from here on: the cores other processes keep busy while this times
        self.calls = 0
        self.throttled = 0
        self.clocks: list[float] = []
        self.rng = random.Random(judge.seed(case["name"], "spots"))
        self.gpu = case["device"] == "cuda"
        self.refs_of, self.refs = "", dict[int, list[torch.Tensor]]()
        layout = next(iter(workers.values())).layout
        self.scratch = layout is not None and bool(layout.scratch)  # the entry is given scratch to leave zeroed

    def _timed(
        self, label: str, calls: int, capture: tuple[int, list[torch.Tensor]] | None = None
    ) -> tuple[float, float]:
        """One batch of `calls`, timed by the judge from request to reply (and the GPU idle again); on the CPU,
        `capture` (set, its reference) copies that set's outputs out of the frozen sandbox right at `done`.
        (wall ms, CPU ms of every thread of the side's sandbox) per call; the CPU figure is 0 on a GPU."""
        w = self.workers[label]
        self.state.enter(label, "timing")
        cpu0 = w.side.cpu() if not self.gpu else 0.0
        t0 = time.perf_counter_ns()
        w.go(calls, self.deadline)
        if self.gpu:
            busy = _gpu_busy_ms()
            if busy > GPU_BUSY_MS:
                self.state.tampered = Phrase(key="measurement.gpu_busy", params={"side": label, "ms": f"{busy:.1f}"})
        t1 = time.perf_counter_ns()
        if capture is not None and not self.gpu:
            w.capture(*capture)  # first thing after the clock: nothing of the sandbox runs until it is copied
        cpu = w.side.cpu() - cpu0 if not self.gpu else 0.0  # the sandbox is idle again: it waits for the next request
        self.account.timed_cpu[label] += cpu
        wall = (t1 - t0) / 1e6
        self.account.timed_wall[label] += wall / 1e3
        self.judge.phases.add("timed", wall / 1e3)
        return wall / calls, cpu * 1e3 / calls

    def run(self) -> None:
        labels = self.labels
        started = time.monotonic()
        stop, pair = None, 0
        while stop is None:
            if pair > 0:  # a fresh process per side; which side starts alternates from pair to pair
                self.workers = {
                    label: self.judge.worker(label, self.case, pair, self.deadline)
                    for label in block_order(pair, labels)
                }
            self._pair(pair)
            pair += 1
            stop = self._stop(pair, time.monotonic() - started)
        self.state.other_cores = self.load.cores()
        self.state.noisy = noisy_phrase(self.state.other_cores, self.judge.job.noise_limit_cores, snapshot())
        self._account()
        for label in labels:
            flat = [x for p in self.processes[label] for x in p]
            self.state.timings[label] = Timing(
                label=label,
                samples_ms=flat,
                processes=self.processes[label],
                first=self.firsts[label],
                calls_per_sample=self.calls,
                cpu_processes=self.cpu_processes[label] if not self.gpu else [],
            )
        self.state.stop_reason = stop
        if self.throttled:
            self.state.notes.append(
                f"{self.throttled} block(s) measured below {THROTTLE_FRACTION:.0%} of the top SM clock were discarded"
            )

    def _ours(self) -> float:
        """CPU seconds of the judge and every sandbox it runs (to tell the machine's other load apart)."""
        own = os.times()
        return own.user + own.system + sum(side.cpu() for side in self.judge.sides.values())

    def _pair(self, pair: int) -> None:
        """One process per side: warm-up, `min_blocks` interleaved blocks with spot checks, then exit."""
        labels, m = self.labels, self.m
        file, header, size = self.judge.write_sets([self.warm])
        self.state.files.append(file)
        for label in labels:  # warm-up: at least warmup_ms and warmup_calls of calls
            self.state.enter(label, "timing (loading inputs)")  # a side that dies loading is that side, named
            self.workers[label].load(file, header, size, self.deadline)
            self.loaded[label] = file
        call_ms = max(self._warm_up(label) for label in labels)
        self.judge.drop(file)
        if not self.calls:  # the block length is fixed by the first pair, so every sample means the same
            self.calls = calls_per_block(call_ms, len(header[0]), self.draw_per_set)
        calls = self.calls  # and every call of a block has an input set of its own
        cpu_start = {label: self.workers[label].side.cpu() for label in labels}
        timed_start = dict(self.account.timed_cpu)
        samples: dict[str, list[float]] = {label: [] for label in labels}
        cpu_samples: dict[str, list[float]] = {label: [] for label in labels}
        firsts: dict[str, list[bool]] = {label: [] for label in labels}
        forced = self.rng.randrange(m.min_blocks)  # every process is checked at least once, at a random block
        for b in range(m.min_blocks):
            file, header, size, inputs = self._inputs(pair, b, calls)
            order = block_order(pair + b, labels)
            load_cpu = dict.fromkeys(labels, 0.0)  # what each side's sandbox burned loading this block's sets
            for label in order:
                if self.loaded.get(label) != file:
                    self.state.enter(label, "timing (loading inputs)")
                    before = self.workers[label].side.cpu() if not self.gpu else 0.0
                    self.workers[label].load(file, header, size, self.deadline)
                    load_cpu[label] = self.workers[label].side.cpu() - before if not self.gpu else 0.0
                    self.loaded[label] = file
                    self.account.bytes_in += size
            # Whether, and which call, to check is drawn before the calls run; half the time it is the last call
            # of the block (the one whose work could still be running when the batch reports done). A CPU block is
            # always checked: its outputs are read from the frozen worker, so a check costs the reference alone.
            spot = not self.gpu or b == forced or self.rng.random() < SPOT_PROBABILITY
            j = calls - 1 if self.rng.random() < 0.5 else self.rng.randrange(calls)
            refs = self._expected(file, j, inputs) if spot else []
            block: dict[str, tuple[float, float]] = {}
            for label in order:
                block[label] = self._timed(label, calls, (j, refs) if spot else None)
                if spot:  # at once, before the other side runs
                    self._spot_check(label, refs, j)
                if self.scratch:  # every set on the CPU; the checked set on a GPU (a fetch each)
                    self._scratch_check(label, list(range(calls)) if not self.gpu else [j] if spot else [])
            self.account.blocks += 1
            clock = _sm_clock_mhz() if self.gpu else None
            if clock is not None:
                self.clocks.append(clock)
            if clock is not None and clock < THROTTLE_FRACTION * max(self.clocks):
                self.throttled += 1
            else:
                for label in labels:
                    samples[label].append(block[label][0])
                    # Work done while the inputs load escapes the clock, not the CPU time: the block's load counts
                    # in its CPU time per call, compared head against base like the timed calls' (issue 50, 2).
                    cpu_samples[label].append(block[label][1] + load_cpu[label] * 1e3 / calls)
                    firsts[label].append(order[0] == label)
        for label in labels:
            total = self.workers[label].side.cpu() - cpu_start[label]
            timed = self.account.timed_cpu[label] - timed_start[label]
            self.account.untimed_cpu[label] += max(0.0, total - timed)
            self.state.enter(label, "exit")
            self.workers[label].exit(self.deadline)
            self.processes[label].append(samples[label])
            self.cpu_processes[label].append(cpu_samples[label])
            self.firsts[label].append(firsts[label])

    def _inputs(self, pair: int, block: int, n_sets: int) -> tuple[str, list[list[dict[str, Any]]], int, list]:
        """This block's input sets, fresh — or, where drawing them would cost more than the timing itself (big GPU
        cases), the sets block `block` of an earlier process pair had, which this pair's processes never saw. No
        worker process sees a set twice: every timed call computes from its own inputs into poisoned outputs and
        zeroed scratch (issue 50, 1)."""
        timed = sum(self.account.timed_wall.values())
        earlier = self.pool.get(block)
        if earlier is not None and self.drawn_seconds + n_sets * self.draw_per_set > max(DRAW_FLOOR_S, timed):
            return earlier
        seeds = [self.judge.seed(self.case["name"], "block", pair, block, i) for i in range(n_sets)]
        started = time.perf_counter()
        inputs = [self.judge.inputs(self.case, s) for s in seeds]
        self.drawn_seconds += time.perf_counter() - started
        file, header, size = self.judge.write_sets(inputs)
        self.state.files.append(file)
        if earlier is not None:
            self.judge.drop(earlier[0])
        self.pool[block] = (file, header, size, inputs)
        return self.pool[block]

    def _stop(self, pairs: int, elapsed: float) -> str | None:
        """Why to stop after `pairs` process pairs, or None to add one more (the sequential rule, docs/review.md)."""
        m = self.m
        if pairs < m.min_processes:  # a floor: the caps below never leave fewer processes than this
            return None
        if self.busy is None and (cores := self.load.cores()) > self.judge.job.noise_limit_cores:
            self.busy = f"other processes kept {cores:.1f} cores busy"
        scale = BUSY_FACTOR if self.busy else 1
        cap = None
        if pairs >= m.max_processes * scale:
            cap = "max_processes"
        elif sum(len(p) for p in self.processes[self.labels[0]]) >= m.max_samples * scale:
            cap = "max_samples"
        elif elapsed >= m.max_seconds * scale:
            cap = "max_seconds"
        if len(self.labels) == 1:
            return "no_base"
        if (stats := self._paired()) is None:
            return cap
        width_pct = (stats.interval()[1] / stats.interval()[0] - 1.0) * 50.0
        precise = stats.pairs >= EARLY_MIN_PAIRS and width_pct <= m.target_pct
        last = cap is not None or precise
        if not last:  # an early stop on the wall time with the CPU time, or on the CPU time alone (stats.early_stop)
            cpu = self._paired(self.cpu_processes) if not self.gpu and _positive(self.cpu_processes) else None
            if (early := early_stop(stats, cpu, self.case["max_regression_pct"])) is not None:
                return early
        return cap or ("precision" if precise else None)

    def _paired(self, of: dict[str, list[list[float]]] | None = None) -> Paired | None:
        """The paired statistic of the wall times (or of `of`, the CPU times) over the pairs with two or more blocks
        on both sides so far; None below two pairs."""
        head, base = self.labels.index("head"), self.labels.index("base")
        sides = [(of or self.processes)[label] for label in self.labels]
        full = [i for i, p in enumerate(zip(*sides, strict=True)) if min(map(len, p)) >= 2]
        if len(full) < 2:
            return None
        return paired(
            [sides[head][i] for i in full],
            [sides[base][i] for i in full],
            [self.firsts["base"][i] for i in full],
        )

    def _warm_up(self, label: str) -> float:
        times: list[float] = []
        wall, cpu = self.account.timed_wall[label], self.account.timed_cpu[label]
        started = time.perf_counter()
        while len(times) < self.m.warmup_calls or (time.perf_counter() - started) * 1e3 < self.m.warmup_ms:
            times.append(self._timed(label, 1)[0])
        self.account.timed_wall[label], self.account.timed_cpu[label] = wall, cpu  # the accounting leaves warm-ups out
        spent = time.perf_counter() - started
        self.judge.phases["timed"] -= sum(times) / 1e3
        self.judge.phases.add("warmup", spent)
        times.sort()
        return times[len(times) // 2]

    def _expected(self, file: str, j: int, inputs: list[list[Input]]) -> list[torch.Tensor]:
        """The reference's outputs for set `j` of the input file `file` (kept while the file is: blocks reuse it)."""
        if self.refs_of != file:
            self.refs_of, self.refs = file, {}
        if j not in self.refs:
            self.refs[j] = self.judge.expected(inputs[j])
        return self.refs[j]

    def _spot_check(self, label: str, refs: list[torch.Tensor], j: int) -> None:
        """Compare the output of call set `j` of the batch that just ran with the reference."""
        self.state.enter(label, "spot check")
        spot = self.state.spots.setdefault(label, Spot(label=label))
        try:
            check = compare(self.workers[label].outputs(j, refs, self.deadline), refs)
        except Raised as exc:
            check = Check(error=str(exc))
        spot.checked += 1
        spot.worst_abs_err = max(spot.worst_abs_err, check.max_abs_err or 0.0)
        if check.error or check.nan_inf or (check.max_abs_err or 0.0) > self.case["tolerance"]:
            spot.failed += 1
            spot.first_failure = spot.first_failure or what_failed(check)

    def _scratch_check(self, label: str, sets: list[int]) -> None:
        """Read the scratch of the block's sets `sets` as its calls left them: each arrived zeroed, and a kernel that
        needs zeroed scratch must leave it so (as in production, where nothing zeroes it between calls)."""
        if not sets:
            return
        self.state.enter(label, "spot check")
        worker = self.workers[label]
        assert worker.layout is not None
        spot = self.state.spots.setdefault(label, Spot(label=label))
        try:
            left = {j: left_nonzero(worker.layout, got) for j, got in worker.scratch(sets, self.deadline).items()}
        except Raised as exc:
            left = dict.fromkeys(sets, str(exc))
        spot.scratch_checked += len(sets)
        dirty = [where for where in left.values() if where is not None]
        spot.scratch_left += len(dirty)
        spot.scratch_first = spot.scratch_first or (dirty[0] if dirty else None)

    def _account(self) -> None:
        """Flag a side whose sandbox burned CPU outside its timed calls, or more than one core inside them."""
        if self.gpu:
            return
        self.state.cpu.update(self.account.uses())
        if (why := self.account.tampered_phrase()) is not None:
            self.state.tampered = why


def _positive(processes: dict[str, list[list[float]]]) -> bool:
    """Whether every block of every side has a CPU time (a sandbox whose accounting could not be read has none)."""
    return all(x > 0 for side in processes.values() for p in side for x in p)


def block_order(index: int, labels: list[str]) -> list[str]:
    """A B, B A, A B, …: each side runs first as often as second, so drift hits both alike."""
    return labels if index % 2 == 0 else labels[::-1]


def _gpu_busy_ms() -> float:
    """How long the judge's own tiny kernel waits: near zero on an idle GPU."""
    t0 = time.perf_counter()
    torch.zeros(1, device="cuda").add_(1)
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) * 1e3


def _sm_clock_mhz() -> float | None:
    try:
        return float(torch.cuda.clock_rate())
    except Exception:  # pynvml missing or NVML refused: record nothing rather than guess
        return None
