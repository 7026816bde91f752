"""What the review prompt carries besides the task and the diff, as text pieces the trim keeps or drops (pure)."""

from __future__ import annotations

import ast
import json
import re

from pydantic import BaseModel, ConfigDict, Field

from bot.agent import functions
from bot.config.manifest import Kernel
from bot.config.repo import Material
from bot.models.diff import FileChange
from bot.models.finding import Param, Phrase
from bot.models.ledger import CaseFigure, MainResourceRow

_PROBE_LINE = re.compile(r"^\s*-\s*([A-Za-z0-9_.-]+):\s*(.+)$")
# The prompt's DATA markers: head's code that holds one is changed so that it cannot end its data block.
MARKERS = {"DATA>>>": "DATA> >>", "<<<DATA": "<< <DATA"}


def inert(text: str) -> str:
    for marker, harmless in MARKERS.items():
        text = text.replace(marker, harmless)
    return text


class Piece(BaseModel):
    """One unit the trim keeps whole or leaves out: a material, or one function of one side."""

    model_config = ConfigDict(frozen=True)

    material: Material
    label: str  # how the prompt and report.json name it (what the agent saw, what was left out for size)
    label_why: Phrase  # `label` as a message of the catalog (bot/wording/messages.py), which the comment renders
    text: str


class Baseline(BaseModel):
    """Base's figures for one kernel from main's history, or why there are none (`missing`)."""

    model_config = ConfigDict(frozen=True)

    sha: str = ""
    cases: list[CaseFigure] = Field(default_factory=list)
    resources: list[MainResourceRow] = Field(default_factory=list)
    is_base: bool = False  # the figures are of base's own commit (else of the latest recorded main commit)
    missing: str = ""
    missing_why: Phrase | None = None  # `missing` as a message of the catalog (bot/wording/messages.py)

    @property
    def available(self) -> bool:
        return not self.missing and bool(self.cases or self.resources)


class Sources(BaseModel):
    """The changed files' text on each side (a file a side lacks is absent; None: nothing could be read)."""

    model_config = ConfigDict(frozen=True)

    base: dict[str, str] = Field(default_factory=dict)
    head: dict[str, str] = Field(default_factory=dict)


def probes(reference_text: str, builder: str) -> list[tuple[str, str]]:
    """The boundary probes a reference module builds, read from its source without running it: the names its
    `builder` yields as string constants, each with the docstring's "- name: what" line when it has one."""
    try:
        tree = ast.parse(reference_text)
    except (SyntaxError, ValueError):
        return []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == builder:
            doc = ast.get_docstring(node) or ""
            said: dict[str, str] = {}
            current = None
            for line in doc.splitlines():
                if m := _PROBE_LINE.match(line):
                    current = m.group(1)
                    said[current] = m.group(2).strip()
                elif current and line.startswith("  ") and line.strip():
                    said[current] += " " + line.strip()
                else:
                    current = None
            names: list[str] = []
            for sub in ast.walk(node):
                value = sub.value if isinstance(sub, ast.Yield) else None
                if isinstance(value, ast.Tuple) and value.elts:
                    first = value.elts[0]
                    if isinstance(first, ast.Constant) and isinstance(first.value, str) and first.value not in names:
                        names.append(first.value)
            return [(n, said.get(n, "")) for n in names]
    return []


def constraints_text(rules: Kernel) -> str:
    data = rules.manifest.constraints.model_dump(exclude_none=True, exclude_defaults=False)
    if not data.get("outputs"):
        data.pop("outputs", None)
    return "Gate limits (base's kernel.toml [constraints]): " + json.dumps(data, sort_keys=True)


def cases_text(rules: Kernel, probe_list: list[tuple[str, str]]) -> str:
    lines = ["Cases the judge runs (base's kernel.toml; each on fresh random inputs, then its boundary probes):"]
    limits = rules.manifest.constraints
    for c in rules.manifest.cases:
        parts = [f"{c.device}", c.dtype, "shape " + json.dumps(c.shape, sort_keys=True)]
        if c.params:
            parts.append("params " + json.dumps(c.params, sort_keys=True))
        parts.append(f"max_abs_err <= {c.tolerance or limits.tolerance:g}")
        if c.arch:
            parts.append(f"on {c.arch}")
        if c.holdout:
            parts.append("held out of tuning")
        lines.append(f"- {c.name}: " + ", ".join(parts))
    if probe_list:
        lines.append(
            "Boundary probes (built by base's reference for every case, checked with its limits, never timed):"
        )
        lines += [f"- {name}" + (f": {what}" if what else "") for name, what in probe_list]
    else:
        lines.append("Boundary probes: none (the reference builds none)")
    return "\n".join(lines)


def tunables_text(kernel: Kernel, rules: Kernel) -> str:
    lines = [f"Tunable space (base's kernel.toml [tunables]; the config file {kernel.manifest.config}):"]
    for name, allowed in rules.manifest.tunables.items():
        current = kernel.config.get(name, "—")
        lines.append(f"- {name} in {json.dumps(allowed)} (head: {json.dumps(current)})")
    if not rules.manifest.tunables:
        lines.append("- none declared")
    return "\n".join(lines)


def baseline_text(kernel: str, baseline: Baseline) -> str:
    which = "base's own commit" if baseline.is_base else "the latest recorded main commit; base's is not recorded"
    lines = [f"Base's measured figures for {kernel} (main at {baseline.sha[:12]}, {which}; from the ledger's history):"]
    for row in baseline.cases:
        band = row.band_ms
        interval = f" (95% interval {band[0]:.4g}..{band[1]:.4g} ms)" if band else ""
        err = f", max_abs_err {row.max_abs_err:.3g}" if row.max_abs_err is not None else ""
        lines.append(f"- {row.case_name} on {row.device_name}: p50 {row.p50_ms:.4g} ms{interval}{err}, {row.verdict}")
    arches: dict[str, list[MainResourceRow]] = {}
    for r in baseline.resources:
        arches.setdefault(r.arch, []).append(r)
    for arch, rows in arches.items():
        lines.append(f"- resources on {arch}:")
        for r in rows:
            threads = f", {r.threads} threads" if r.threads else ""
            lines.append(
                f"  - {r.function}: {r.registers} registers, {r.spill_bytes} B spilled, {r.smem_bytes} B static smem, "
                f"{r.stack_bytes} B stack{threads}"
            )
    return "\n".join(lines)


def function_pieces(changes: list[FileChange], sources: Sources) -> list[Piece]:
    """Each function a hunk touches, head's then base's, in the diff's order of files."""
    pieces: list[Piece] = []
    for change in changes:
        if functions.language(change.path) is None or change.binary:
            continue
        old, new = functions.changed_lines(change.diff)
        old_path = change.old_path or change.path
        for side, path, text, lines in (
            ("head", change.path, sources.head.get(change.path), new),
            ("base", old_path, sources.base.get(old_path), old),
        ):
            for f, body in functions.touched(path, inert(text) if text is not None else None, lines):
                fence = "python" if functions.language(path) == "python" else "cpp"
                name, where = inert(f.name), inert(path)
                params: dict[str, Param] = {"function": name, "side": side, "path": where, "line": f.start}
                pieces.append(
                    Piece(
                        material="functions",
                        label=f"{name} ({side}, {where}:{f.start})",
                        label_why=Phrase(key="agent.piece_function", params=params),
                        text=f"{side} `{path}` lines {f.start}-{f.end}, `{f.name}`:\n```{fence}\n{body}\n```",
                    )
                )
    return pieces


def pieces(
    kernel: Kernel,
    rules: Kernel,
    changes: list[FileChange],
    *,
    order: tuple[Material, ...],
    baseline: Baseline,
    sources: Sources,
    reference_text: str | None,
) -> list[Piece]:
    """Every piece the domain's materials ask for, most important first (the trim keeps a prefix-by-fit of them)."""
    out: list[Piece] = []
    for material in order:
        if material == "constraints":
            why = Phrase(key="agent.piece_constraints")
            out.append(Piece(material=material, label="the gate limits", label_why=why, text=constraints_text(rules)))
        elif material == "cases" and rules.manifest.cases:
            found = probes(reference_text, rules.manifest.reference.probes) if reference_text else []
            label = f"{len(rules.manifest.cases)} cases and {len(found)} boundary probes"
            why = Phrase(key="agent.piece_cases", params={"cases": len(rules.manifest.cases), "probes": len(found)})
            out.append(Piece(material=material, label=label, label_why=why, text=cases_text(rules, found)))
        elif material == "tunables" and (rules.manifest.tunables or kernel.config):
            why = Phrase(key="agent.piece_tunables")
            text = tunables_text(kernel, rules)
            out.append(Piece(material=material, label="the tunable space", label_why=why, text=text))
        elif material == "baseline" and baseline.available:
            label = f"base figures of main {baseline.sha[:12]}"
            why = Phrase(key="agent.piece_baseline", params={"sha": baseline.sha[:12]})
            out.append(Piece(material=material, label=label, label_why=why, text=baseline_text(kernel.name, baseline)))
        elif material == "functions":
            out.extend(function_pieces(changes, sources))
    return out
