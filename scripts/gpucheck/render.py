"""gpu-check.md and gpu-check.json: every step passed / failed / skipped, and why (pure rendering)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from scripts.gpucheck.steps import STATUSES, Result, one_line

SCHEMA = "opgate.gpu-check/1"
MARK = {"passed": "passed", "failed": "**failed**", "skipped": "skipped"}
MACHINE_FIELDS = (
    ("gpu", "GPU"),
    ("driver", "driver"),
    ("torch", "torch"),
    ("torch_cuda", "torch CUDA"),
    ("nvcc", "nvcc"),
    ("ncu", "ncu"),
    ("python", "Python"),
    ("cpu_cores", "CPU cores"),
)


def cell(text: object) -> str:
    """Text safe inside one markdown table cell: one line, pipes escaped."""
    return one_line(str(text)).replace("|", "\\|") or "—"


def counts(results: Sequence[Result]) -> dict[str, int]:
    return {status: sum(1 for r in results if r.status == status) for status in STATUSES}


def machine_line(machine: Mapping[str, Any]) -> str:
    parts = [f"{label} {machine[key]}" for key, label in MACHINE_FIELDS if machine.get(key) not in (None, "")]
    return " · ".join(parts) if parts else "unknown (the machine step did not run)"


def render_markdown(results: Sequence[Result], meta: Mapping[str, Any]) -> str:
    """The summary table, then each step's own lines (build seconds, benchmark table …) under its name."""
    machine = meta.get("machine") or {}
    n = counts(results)
    lines = [
        f"# opgate GPU check — {meta.get('started', '')}",
        "",
        f"Commit `{meta.get('commit', 'unknown')}` · mode {meta.get('mode', 'full')} · budget "
        f"{meta.get('budget_s', 0):.0f} s, {meta.get('elapsed_s', 0):.0f} s used · "
        f"{n['passed']} passed, {n['failed']} failed, {n['skipped']} skipped",
        "",
        f"Machine: {machine_line(machine)}",
        "",
        "| step | status | seconds | what it proves | result or reason |",
        "|---|---|---|---|---|",
    ]
    for r in results:
        seconds = f"{r.seconds:.1f}" if r.status != "skipped" else "—"
        lines.append(f"| {r.name} | {MARK[r.status]} | {seconds} | {cell(r.title)} | {cell(r.reason)} |")
    for r in results:
        if r.markdown:
            lines += ["", f"## {r.name}", "", *r.markdown]
    logs = [f"`{r.log}`" for r in results if r.log]
    if logs:
        lines += ["", "Logs: " + ", ".join(logs) + " (in gpu-check-logs.tar.gz where the output folder is $OUT)."]
    return "\n".join(lines) + "\n"


def render_json(results: Sequence[Result], meta: Mapping[str, Any]) -> str:
    data = {"schema": SCHEMA, **meta, "counts": counts(results), "steps": [r.to_json() for r in results]}
    return json.dumps(data, indent=2, default=str) + "\n"
