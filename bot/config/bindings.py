"""What a kernel's C++/CUDA sources register with torch: TORCH_LIBRARY ops and their schemas, pybind11 functions.

Plain text scanning (no preprocessor, nothing compiled or imported), good enough to propose an entry point
(`opgate init`) and to catch a misspelt one (`opgate lint`, `opgate check`) before anything is built.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

TORCH_OPS = "torch.ops."  # an entry point `torch.ops.NAMESPACE.OP[.OVERLOAD]` calls a registered op
SCALAR_TYPES = {"int": "int", "SymInt": "int", "float": "float", "bool": "bool", "Scalar": "float"}

_LIBRARY = re.compile(r"\bTORCH_LIBRARY(?:_FRAGMENT)?\s*\(\s*(\w+)\s*,\s*(\w+)\s*\)\s*\{")
_IMPL = re.compile(r"\bTORCH_LIBRARY_IMPL\s*\(\s*(\w+)\s*,\s*(\w+)\s*,\s*\w+\s*\)")
_DEF = re.compile(r"\.\s*def\s*\(\s*\"([^\"]+)\"")
_PYBIND = re.compile(r"\bPYBIND11_MODULE\s*\(\s*(\w+)\s*,\s*(\w+)\s*\)\s*\{")
_PYINIT = re.compile(r"\bPyInit_(\w+)\s*\(")
_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)


@dataclass(frozen=True)
class Argument:
    """One argument of an op schema: `Tensor a`, `float c`, `int? n=None`."""

    name: str
    type: str
    mutable: bool = False  # `Tensor(a!) out`: the op writes into it

    @property
    def tensor(self) -> bool:
        return self.type.startswith("Tensor")

    @property
    def scalar(self) -> str | None:
        """int | float | bool for a scalar argument the manifest can pass from a case's params, else None."""
        return SCALAR_TYPES.get(self.type.rstrip("?"))


@dataclass(frozen=True)
class Op:
    """One op a TORCH_LIBRARY block defines (`m.def("mymuladd(Tensor a, Tensor b, float c) -> Tensor")`)."""

    namespace: str
    name: str
    arguments: tuple[Argument, ...]
    returns: str
    source: str

    @property
    def entry(self) -> str:
        return f"{TORCH_OPS}{self.namespace}.{self.name}"


@dataclass
class Bindings:
    """Everything the sources of one kernel register, and where."""

    ops: list[Op] = field(default_factory=list)
    impls: dict[str, list[str]] = field(default_factory=dict)  # namespace -> dispatch keys (CPU, CUDA …)
    impl_sources: dict[str, list[str]] = field(default_factory=dict)  # source -> namespaces it implements
    pybind: dict[str, list[str]] = field(default_factory=dict)  # source -> functions its PYBIND11_MODULE defines
    libraries: dict[str, list[str]] = field(default_factory=dict)  # source -> namespaces it defines ops of
    python_modules: dict[str, list[str]] = field(default_factory=dict)  # source -> PyInit_<name> it defines

    @property
    def binding_sources(self) -> set[str]:
        return {*self.libraries, *self.pybind, *self.impl_sources}

    def op(self, entry: str) -> Op | None:
        """The op an entry `torch.ops.NS.OP[.OVERLOAD]` names, if the sources define it."""
        parts = entry.removeprefix(TORCH_OPS).split(".")
        if not entry.startswith(TORCH_OPS) or len(parts) not in (2, 3):
            return None
        return next((o for o in self.ops if (o.namespace, o.name) == (parts[0], parts[1])), None)

    def entries(self) -> list[str]:
        """Every entry point the sources offer: torch.ops.NS.OP for each op, the pybind functions by name."""
        return [*(o.entry for o in self.ops), *(f for fs in self.pybind.values() for f in fs)]


def parse_schema(schema: str) -> tuple[str, tuple[Argument, ...], str] | None:
    """("mymuladd", (Tensor a, Tensor b, float c), "Tensor") for "mymuladd(Tensor a, Tensor b, float c) -> Tensor"."""
    m = re.fullmatch(r"\s*([A-Za-z_]\w*)(?:\.\w+)?\s*\((.*)\)\s*->\s*(.+?)\s*", schema, re.S)
    if m is None:
        return None
    arguments = []
    for raw in _split(m.group(2)):
        text = raw.split("=", 1)[0].strip()
        if not text or text == "*":
            continue
        kind, _, name = text.rpartition(" ")
        kind_type = re.sub(r"\(.*?\)", "", kind).strip()
        arguments.append(Argument(name=name.strip(), type=kind_type, mutable="!" in kind))
    return m.group(1), tuple(arguments), m.group(3)


def _split(args: str) -> list[str]:
    """Split an argument list at top-level commas (`Tensor(a!) out, int[] dims`)."""
    parts, depth, current = [], 0, ""
    for ch in args:
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += ch
    return [*parts, current] if current.strip() else parts


def _blocks(text: str, pattern: re.Pattern[str]) -> list[tuple[re.Match[str], str]]:
    """Each match of a `MACRO(...) {` pattern with the body up to its closing brace."""
    found = []
    for m in pattern.finditer(text):
        depth, i = 1, m.end()
        while i < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        found.append((m, text[m.end() : i - 1]))
    return found


def scan_text(source: str, text: str, found: Bindings) -> None:
    """Add what one source file registers to `found`."""
    text = _COMMENT.sub("", text)
    for m, body in _blocks(text, _LIBRARY):
        namespace = m.group(1)
        found.libraries.setdefault(source, []).append(namespace)
        for schema in _DEF.findall(body):
            if (parsed := parse_schema(schema)) is not None:
                name, arguments, returns = parsed
                found.ops.append(Op(namespace, name, arguments, returns, source))
    for m in _IMPL.finditer(text):
        found.impls.setdefault(m.group(1), []).append(m.group(2))
        found.impl_sources.setdefault(source, []).append(m.group(1))
    for _m, body in _blocks(text, _PYBIND):
        found.pybind.setdefault(source, []).extend(re.findall(r"\.\s*def\s*\(\s*\"(\w+)\"", body))
    if names := _PYINIT.findall(text):
        found.python_modules[source] = names


def scan(folder: Path, sources: list[str]) -> Bindings:
    """What the given sources (paths relative to `folder`) register; unreadable files are left out."""
    found = Bindings()
    for source in sources:
        try:
            text = (folder / source).read_text(errors="replace")
        except OSError:
            continue
        scan_text(source, text, found)
    return found


def entry_problem(entry: str, found: Bindings, build: str) -> str | None:
    """Why `entry` cannot be what the build's sources offer (a TORCH_LIBRARY op called by a plain name, a misspelt
    op or function), with the nearest offered entry; None when it matches or the sources register nothing."""
    import difflib

    offered = found.entries()
    if not offered or entry in offered or (entry.startswith(TORCH_OPS) and found.op(entry) is not None):
        return None
    close = difflib.get_close_matches(entry, offered, n=1, cutoff=0.5)
    if not entry.startswith(TORCH_OPS) and found.ops and not any(found.pybind.values()):
        ops = ", ".join(o.entry for o in found.ops[:3])
        return (
            f"{build} entry = {entry!r}: the sources register TORCH_LIBRARY ops, not a Python module; "
            f"call one as entry = {(close or [found.ops[0].entry])[0]!r} (offered: {ops})"
        )
    hint = f"; did you mean {close[0]!r}?" if close else f" (offered: {', '.join(offered[:4])})"
    return f"{build} entry = {entry!r}: no such op or function in its sources{hint}"
