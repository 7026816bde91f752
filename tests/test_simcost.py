"""The simulated cost (issue 25, item 4): CPU cases counted under callgrind in the sandbox, and how the gate uses it."""

from __future__ import annotations

import shutil
import subprocess
import sysconfig
from pathlib import Path

import pytest

from bot.models.cost import SideCost, SimulatedCost
from bot.models.finding import Gate, Outcome
from bot.models.report import CaseReport
from bot.present.comment_md import delta_cell
from bot.untrusted.runner.cost import Costs, parse_dump, side_cost
from bot.untrusted.sandbox import Sandbox
from bot.verdict.findings import case_lines
from bot.verdict.gate_latency import simulated_note
from tests import comment_reports as cr

ROOT = Path(__file__).resolve().parent.parent

# The dump callgrind 3.19 wrote for `CALLGRIND_DUMP_STATS_AT("opgate:0")` around three 256x256 matmuls.
DUMP = """# callgrind format
version: 1
creator: callgrind-3.19.0
pid: 26812
cmd:  /usr/bin/python3 costrun.py
part: 1


desc: I1 cache: 32768 B, 64 B, 8-way associative
desc: D1 cache: 32768 B, 64 B, 8-way associative
desc: LL cache: 8388608 B, 64 B, 16-way associative

desc: Timerange: Basic block 151596 - 593876
desc: Trigger: Client Request: opgate:0

positions: line
events: Ir Dr Dw I1mr D1mr D1mw ILmr DLmr DLmw
summary: 12070200 3834660 108047 3343 172283 31511 1335 8727 12800
"""


def test_a_callgrind_dump_becomes_a_cost_per_call():
    index, events = parse_dump(DUMP)  # type: ignore[misc]
    assert index == 0 and events["Ir"] == 12070200
    cost = side_cost(events, 3)
    assert cost.instructions == 4023400
    assert cost.l1_misses == (3343 + 172283 + 31511) // 3 and cost.ll_misses == (1335 + 8727 + 12800) // 3
    assert cost.cycles == (12070200 + 10 * (3343 + 172283 + 31511) + 100 * (1335 + 8727 + 12800)) // 3
    # the dump valgrind writes at exit, and anything a side wrote itself, is no count of ours
    assert parse_dump(DUMP.replace("Client Request: opgate:0", "Program termination")) is None
    assert parse_dump(DUMP.replace("summary: 12070200", "summary: 18446744073697481405")) is None


def _undecided(delta: float = 2.0, low: float = -1.0, high: float = 6.0) -> CaseReport:
    """A case whose p50 straddles the 3% limit, with the finding the gate makes of it."""
    case = CaseReport(
        name="square_512", tolerance=0.01, verdict="inconclusive", regression_pct=delta, ci95_pct=[low, high],
        max_regression_pct=3.0, p50_ms=1.02, base_p50_ms=1.0,
    )  # fmt: skip
    straddles = cr.found(Gate.performance, "performance.inconclusive", Outcome.undecided, **cr.span(delta, low, high))
    return cr.with_findings(case, straddles)


def _cost(head: int, base: int) -> SimulatedCost:
    return SimulatedCost(
        tool="callgrind (valgrind-3.19.0)",
        head=SideCost(instructions=head, cycles=head, calls=3),
        base=SideCost(instructions=base, cycles=base, calls=3),
    )


TAIL = (
    "; simulated cost x{} (callgrind cycles; instructions x{}), reported: a model the counted code can lower, it "
    "decides nothing"
)


def test_a_simulated_cost_above_the_limit_is_reported_and_decides_nothing():
    """Issue 40, 2: the simulated cost is a model the counted code can forge, and CPU time decided the straddling cases
    it never did (benchmarks/README.md): a count above the limit leaves an undecided case undecided and says so."""
    slower = _undecided()
    simulated_note(slower, _cost(1_050_000, 1_000_000))
    assert slower.verdict == "inconclusive" and slower.simulated and slower.simulated.ratio == 1.05
    assert not slower.simulated.decided
    assert case_lines(slower) == [
        "performance inconclusive: p50 +2.00% (95% CI -1.00%..+6.00%) straddles the 3% limit"
        + TAIL.format("1.050", "1.050")
    ]
    assert delta_cell(slower) == "+2.00% (-1.00..+6.00) ❔ · simulated x1.050"


def test_a_simulated_cost_within_the_limit_or_outside_the_clock_decides_nothing_either():
    """Issue 37, 4: a count within the limit — forged or not — passes no head; nor does one the clock contradicts."""
    for head, shown in ((1_001_000, "1.001"), (500_000, "0.500")):
        case = _undecided()
        simulated_note(case, _cost(head, 1_000_000))
        assert case.verdict == "inconclusive" and case.simulated and not case.simulated.decided
        assert case_lines(case)[0].endswith(TAIL.format(shown, shown)), case_lines(case)
        assert delta_cell(case) == f"+2.00% (-1.00..+6.00) ❔ · simulated x{shown}"
    decided = CaseReport(name="c", tolerance=0.01, verdict="pass", regression_pct=-5.0, ci95_pct=[-6.0, -4.0])
    simulated_note(decided, _cost(1_200_000, 1_000_000))  # `always`: reported beside p50, never overrides
    assert (
        decided.verdict == "pass" and decided.simulated and decided.simulated.ratio == 1.2 and not case_lines(decided)
    )
    assert delta_cell(decided) == "-5.00% (-6.00..-4.00) · simulated x1.200"
    missing = _undecided()
    simulated_note(missing, SimulatedCost(error="valgrind is not installed"))
    assert missing.verdict == "inconclusive" and case_lines(missing)[0].endswith("; no simulated cost: valgrind is not "
                                                                             "installed")  # fmt: skip


@pytest.mark.slow
@pytest.mark.untimed
@pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind is not installed")
def test_the_simulated_cost_is_deterministic_counts_the_extra_work_and_catches_a_kernel_lazy_under_valgrind(tmp_path):
    """Four sides counted at once in the sandbox: the same build twice (identical counts), 10 % more work, and a
    kernel that skips its work when it sees valgrind (its output is wrong, so it gets no count)."""
    from tests.test_judge import job

    include = sysconfig.get_path("include")

    def build(name: str, *defines: str) -> Path:
        so = tmp_path / f"{name}.so"
        flags = ["-DSPIN_US=0", *(f"-D{d}" for d in defines), f"-I{include}"]
        subprocess.run(["gcc", "-shared", "-fPIC", "-O2", *flags, str(ROOT / "tests/data/fake_ext.c"), "-o", str(so)],
                       check=True)  # fmt: skip
        return so

    base = build("base", "WORK=100000")
    sides = {"base": base, "twin": base, "head": build("head", "WORK=110000")}
    sides["lazy"] = build("lazy", "WORK=100000", "LAZY_ON_VALGRIND")
    costs = Costs(job(sides), Sandbox.detect())
    try:
        got = costs.sides()
    finally:
        costs.close()
    b, twin, head, lazy = (got[label][0] for label in ("base", "twin", "head", "lazy"))
    assert isinstance(b, SideCost) and isinstance(twin, SideCost) and isinstance(head, SideCost), got
    assert b == twin  # another process, the same counts: nothing here depends on the clock or the load
    assert 1.05 < head.instructions / b.instructions < 1.10  # 10 % more of the loop, plus the fixed matmul
    assert isinstance(lazy, str) and lazy.startswith("wrong output under valgrind (max_abs_err ")


def test_a_dump_folder_must_hold_exactly_the_dumps_callgrind_writes(tmp_path):
    """Issue 37, 4: one dump per case at callgrind's name (and the end-of-run dump), nothing else; any stranger, a
    link, a second name or a dump of another case refuses every count of the side."""
    import os

    from bot.untrusted.runner.cost import read_dumps

    def folder(name: str, files: dict[str, str]) -> Path:
        where = tmp_path / name
        where.mkdir()
        for file, text in files.items():
            (where / file).write_text(text)
        return where

    end = DUMP.replace("Client Request: opgate:0", "Program termination")
    second = DUMP.replace("opgate:0", "opgate:1")
    good = folder("good", {"callgrind.out.1": DUMP, "callgrind.out.2": second, "callgrind.out": end})
    dumps, why = read_dumps(good, 2)
    assert why is None and sorted(dumps) == [0, 1] and dumps[0]["Ir"] == 12070200
    assert read_dumps(folder("missing", {"callgrind.out.1": DUMP}), 2) == ({0: dumps[0]}, None)  # case 1 not counted
    extra = folder("extra", {"callgrind.out.1": DUMP, "callgrind.out.3": DUMP})
    assert read_dumps(extra, 2) == ({}, "an unexpected file 'callgrind.out.3' in the dump folder: a side wrote its own")
    swapped = folder("swapped", {"callgrind.out.1": second, "callgrind.out.2": DUMP})
    assert read_dumps(swapped, 2) == ({}, "'callgrind.out.1' is not the dump callgrind writes for case 0")
    linked = folder("linked", {"elsewhere": DUMP})
    os.symlink(linked / "elsewhere", tmp_path / "link")
    os.rename(tmp_path / "link", linked / "callgrind.out.1")
    assert read_dumps(linked, 1)[1] is not None  # the stranger "elsewhere", or the link
    os.unlink(linked / "elsewhere")
    assert read_dumps(linked, 1) == ({}, "'callgrind.out.1' in the dump folder is a link or vanished")
    twice = folder("twice", {"callgrind.out.1": DUMP})
    os.link(twice / "callgrind.out.1", tmp_path / "second-name")
    assert read_dumps(twice, 1) == ({}, "'callgrind.out.1' in the dump folder is not a plain file of its own")
    assert read_dumps(tmp_path / "absent", 1)[1] == "the dump folder is unreadable (No such file or directory)"


@pytest.mark.slow
@pytest.mark.untimed
@pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind is not installed")
def test_an_entry_that_writes_its_output_argument_is_counted_and_one_that_leaves_it_unwritten_is_not(tmp_path):
    """Under callgrind too the call is laid out as kernel.toml's arguments say, and the output compared is the
    argument buffer: the warm call writes a copy, so the counted calls start from the judge's poison."""
    from tests.test_buffers import _job

    include = sysconfig.get_path("include")

    def build(name: str, *defines: str) -> Path:
        so = tmp_path / f"{name}.so"
        flags = [*(f"-D{d}" for d in defines), f"-I{include}"]
        subprocess.run(["gcc", "-shared", "-fPIC", "-O1", *flags, str(ROOT / "tests/data/out_ext.c"), "-o", str(so)],
                       check=True)  # fmt: skip
        return so

    costs = Costs(
        _job(tmp_path, {"base": build("right"), "head": build("unwritten", "UNWRITTEN_LAST")}), Sandbox.detect()
    )
    try:
        got = costs.sides()
    finally:
        costs.close()
    right, unwritten = got["base"][0], got["head"][0]
    assert isinstance(right, SideCost) and right.instructions > 0, got
    assert unwritten == "wrong output under valgrind (NaN/Inf where the reference has none)", got
