"""Nsight Compute (`ncu --csv`) output → a few metrics per kernel launch, and the hook that puts them in a report.

ncu's CSV (its "details" page with `--metrics`) has one row per launch and metric: `"ID","Process ID",
"Process Name","Host Name","Kernel Name",…,"Section Name","Metric Name","Metric Unit","Metric Value"`
(newer versions add `Block Size`, `Grid Size`, `Device`, `CC` and rule columns). Rows of one launch share
an ID. ncu's own lines (`==PROF==`, `==WARNING==`) and the program's output may come before the header.
Values may carry thousands separators and scaled units (`Kbyte`, `usecond`) unless `--print-units base`.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from bot.models.report import NsightKernel, NsightMetrics, Report
from bot.verdict.launch import plain

DURATION = "gpu__time_duration.sum"
ACHIEVED = "sm__warps_active.avg.pct_of_peak_sustained_active"
THEORETICAL = "sm__maximum_warps_per_active_cycle_pct"
DRAM_PCT = "dram__throughput.avg.pct_of_peak_sustained_elapsed"
DRAM_READ, DRAM_WRITE = "dram__bytes_read.sum", "dram__bytes_write.sum"
REGISTERS = "launch__registers_per_thread"
LOCAL_LD, LOCAL_ST = "l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum", "l1tex__t_bytes_pipe_lsu_mem_local_op_st.sum"
METRICS = (DURATION, ACHIEVED, THEORETICAL, DRAM_PCT, DRAM_READ, DRAM_WRITE, REGISTERS, LOCAL_LD, LOCAL_ST)

# ncu's unit names, scaled to bytes or microseconds (its prefixes are decimal: 1 Kbyte = 1000 bytes).
_SCALE = {
    "byte": 1.0, "kbyte": 1e3, "mbyte": 1e6, "gbyte": 1e9, "tbyte": 1e12,
    "nsecond": 1e-3, "usecond": 1.0, "msecond": 1e3, "second": 1e6,
}  # fmt: skip
_NUMBER = re.compile(r"[-+]?\d+(\.\d*)?([eE][-+]?\d+)?")


class NsightError(ValueError):
    """The text is not ncu CSV output (no header row, or no metric rows)."""


@dataclass
class Launch:
    """One profiled kernel launch: its ID, function and metric -> (unit, value) as ncu printed them."""

    id: int
    function: str
    metrics: dict[str, tuple[str, float | None]] = field(default_factory=dict)

    def scaled(self, name: str) -> float | None:
        """The metric's value in bytes, microseconds or its own unit (%, registers)."""
        unit, value = self.metrics.get(name, ("", None))
        if value is None:
            return None
        return value * _SCALE.get(unit.lower(), 1.0)


def number(text: str) -> float | None:
    """A metric value: "1,234.5" → 1234.5; "n/a", "" or anything not a number → None."""
    cleaned = text.strip().replace(",", "")
    return float(cleaned) if _NUMBER.fullmatch(cleaned) else None


def short_name(kernel_name: str) -> str:
    """`void ns::k<128, 64>(const float *, int)` → `ns::k<128, 64>` (the signature dropped, as ptxas' rows name it)."""
    return plain(kernel_name) or kernel_name.strip()


def parse_csv(text: str) -> list[Launch]:
    """Every launch in ncu's CSV, in the order ncu profiled them; NsightError when there is none."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID",')), None)
    if start is None:
        raise NsightError('no ncu CSV header (a line starting with "ID",) in the output')
    launches: dict[int, Launch] = {}
    for row in csv.DictReader(lines[start:]):
        ident, name, metric = row.get("ID"), row.get("Kernel Name"), row.get("Metric Name")
        if not ident or not ident.strip().isdigit() or not name or not metric:
            continue  # a trailing ==PROF== line or the program's own output
        launch = launches.setdefault(int(ident), Launch(int(ident), short_name(name)))
        launch.metrics[metric.strip()] = ((row.get("Metric Unit") or "").strip(), number(row.get("Metric Value") or ""))
    if not launches:
        raise NsightError("ncu printed a CSV header but no metric rows (was any kernel profiled?)")
    return [launches[i] for i in sorted(launches)]


def _sum(*values: float | None) -> float | None:
    present = [v for v in values if v is not None]
    return sum(present) if present else None


def summarize(launches: Sequence[Launch], tool: str = "ncu") -> NsightMetrics:
    """The report's view of a case's launches: one NsightKernel per launch."""
    kernels = []
    for launch in launches:
        registers = launch.scaled(REGISTERS)
        kernels.append(
            NsightKernel(
                function=launch.function,
                duration_us=launch.scaled(DURATION),
                achieved_occupancy_pct=launch.scaled(ACHIEVED),
                theoretical_occupancy_pct=launch.scaled(THEORETICAL),
                dram_throughput_pct=launch.scaled(DRAM_PCT),
                dram_bytes=_sum(launch.scaled(DRAM_READ), launch.scaled(DRAM_WRITE)),
                registers=int(registers) if registers is not None else None,
                local_bytes=_sum(launch.scaled(LOCAL_LD), launch.scaled(LOCAL_ST)),
            )
        )
    return NsightMetrics(tool=tool, kernels=kernels)


def command(ncu: str, log_file: str, argv: Sequence[str]) -> list[str]:
    """The ncu command line: our metrics, only between cudaProfilerStart/Stop, clocks left as they are."""
    return [
        ncu, "--csv", "--print-units", "base", "--metrics", ",".join(METRICS),
        "--profile-from-start", "off", "--clock-control", "none", "--target-processes", "all",
        "--log-file", log_file, *argv,
    ]  # fmt: skip


def attach(report: Report, metrics: Mapping[str, NsightMetrics]) -> Report:
    """A copy of `report` whose cases carry the metrics keyed `kernel/case` (the others unchanged)."""
    kernels = []
    for k in report.kernels:
        cases = [
            c.model_copy(update={"nsight": metrics[f"{k.name}/{c.name}"]}) if f"{k.name}/{c.name}" in metrics else c
            for c in k.cases
        ]
        kernels.append(k.model_copy(update={"cases": cases}))
    return report.model_copy(update={"kernels": kernels})
