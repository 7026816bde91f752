"""The kernel launches a kernel's sources write with constants (`<<<blocks, THREADS, SHARED_MEM>>>`,
cudaFuncSetAttribute(…, cudaFuncAttributeMaxDynamicSharedMemorySize, X)), read as text for `opgate init` to draft
`[launch]` (nothing compiled or run; the team confirms each figure)."""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bot.config import launch_sites

_DEFINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)[ \t]+([^\n]+)$", re.M)
_CONST = re.compile(
    r"\b(?:static\s+)?(?:constexpr|const)\s+(?:static\s+)?(?:unsigned\s+|signed\s+)?"
    r"(?:int|long|long\s+long|short|size_t|u?int(?:32|64)_t|unsigned|auto)\s+([A-Za-z_]\w*)\s*=\s*([^;{}]+);"
)
# A kernel function's definition or declaration: `__global__ __launch_bounds__(T::kNThreads) void name(`.
_GLOBAL = re.compile(r"\b__global__\b[^;{}]*?\bvoid\s+([A-Za-z_]\w*)\s*\(")
_DIM3 = re.compile(r"\bdim3\s+([A-Za-z_]\w*)\s*[({]([^;(){}]*)[)}]\s*;")
_SUFFIX = re.compile(r"\b(\d+)[uUlL]+\b")
_OPS = {ast.Add: int.__add__, ast.Sub: int.__sub__, ast.Mult: int.__mul__, ast.FloorDiv: int.__floordiv__}
_OPS |= {ast.Mod: int.__mod__, ast.LShift: int.__lshift__, ast.RShift: int.__rshift__}
LIMIT = 1 << 32  # no launch figure is larger; a bigger value is a misread


@dataclass(frozen=True)
class LaunchDraft:
    """What one kernel function's launch says: threads per block and dynamic shared memory, where known."""

    function: str
    threads: int | None
    dynamic_smem: int | None
    where: str  # "flash.cu:45"


def constant(text: str, known: dict[str, int]) -> int | None:
    """The value of a C++ integer constant expression over `known` names (digits, + - * / % << >>, parentheses,
    static_cast<int>), or None when it is anything else."""
    text = _SUFFIX.sub(r"\1", re.sub(r"static_cast\s*<\s*\w+\s*>|\(\s*(?:int|unsigned|size_t)\s*\)", "", text))
    text = text.strip().replace("/", "//")
    if not text or len(text) > 200:
        return None
    try:
        tree = ast.parse(text, mode="eval").body
    except SyntaxError:
        return None
    return _value(tree, known)


def _value(node: ast.expr, known: dict[str, int]) -> int | None:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.Name):
        return known.get(node.id)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _value(node.operand, known)
        return None if inner is None else -inner
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        left, right = _value(node.left, known), _value(node.right, known)
        if left is None or right is None or (right == 0 and isinstance(node.op, (ast.FloorDiv, ast.Mod))):
            return None
        if isinstance(node.op, (ast.LShift, ast.RShift)) and not 0 <= right < 64:
            return None
        result = _OPS[type(node.op)](left, right)
        return result if abs(result) < LIMIT else None
    return None


def constants(text: str, known: dict[str, int] | None = None) -> dict[str, int]:
    """Every #define and constexpr/const integer of `text` whose value is a constant expression, in order."""
    found = dict(known or {})
    text = launch_sites.blank(text)
    declared = [(m.start(), m.group(1), m.group(2)) for m in _DEFINE.finditer(text)]
    declared += [(m.start(), m.group(1), m.group(2)) for m in _CONST.finditer(text)]
    for _at, name, value in sorted(declared):
        if (number := constant(value, found)) is not None:
            found[name] = number
    return found


def _threads(text: str, known: dict[str, int], blocks: dict[str, str]) -> int | None:
    """Threads per block of a launch's second argument: a constant, dim3(x, y, z) of constants, or a dim3 variable."""
    text = blocks.get(text.strip(), text.strip())
    if (m := re.fullmatch(r"dim3\s*[({](.*)[)}]", text, re.S)) is not None:
        text = m.group(1)
    parts = launch_sites.split_args(text, 0, len(text))
    product = 1 if parts else 0
    for part in parts:
        if (value := constant(part.text, known)) is None or value <= 0:
            return None
        product *= value
    return product or None


def read_launches(folder: Path, sources: list[str], headers: Sequence[str] = ()) -> tuple[list[LaunchDraft], list[str]]:
    """(the launches the sources write with constants, one per __global__ function the sources or headers define —
    the names ptxas reports —; notes on a function launched with two different figures and on a launch of a name no
    such function has). `headers` (relative to `folder`) give constants the sources use."""
    known: dict[str, int] = {}
    kernels: set[str] = set()  # the __global__ functions the sources and headers define: what ptxas reports
    for header in headers:
        text = (folder / header).read_text(errors="replace")
        known = constants(text, known)
        kernels.update(_GLOBAL.findall(launch_sites.blank(text)))
    for source in sources:
        kernels.update(_GLOBAL.findall(launch_sites.blank((folder / source).read_text(errors="replace"))))
    seen: dict[str, LaunchDraft] = {}
    differ: set[str] = set()
    unknown: dict[str, str] = {}  # a launched name no __global__ function has -> where
    for source in sources:
        raw = (folder / source).read_text(errors="replace")
        text = launch_sites.blank(raw)
        here = constants(text, known)
        blocks = {m.group(1): f"dim3({m.group(2)})" for m in _DIM3.finditer(text)}
        sites = launch_sites.scan(source, raw)
        smem_set = {
            s.function: constant(s.smem.text, here)
            for s in sites
            if s.kind == "cudaFuncSetAttribute" and s.smem is not None
        }
        for site in sites:
            if site.kind != launch_sites.CHEVRON or site.block is None:
                continue
            function = site.function
            threads = _threads(site.block.text, here, blocks)
            smem = constant(site.smem.text, here) if site.smem is not None else 0
            if smem is None:
                smem = smem_set.get(function)
            draft = LaunchDraft(function, threads, smem, f"{source}:{site.line}")
            if threads is None and smem is None:
                continue
            if function not in kernels:
                unknown.setdefault(function, draft.where)
                continue
            old = seen.get(function)
            if old is not None and (old.threads, old.dynamic_smem) != (threads, smem):
                differ.add(function)
            seen.setdefault(function, draft)
    notes = [
        f"{f} is launched with different figures ({seen[f].where} and others): write its [launch] entry by hand"
        for f in sorted(differ)
    ]
    notes += [
        f"{where}: the launch names {f}, which no __global__ function of the kernel's sources is called (a local "
        "function pointer?): not drafted; write [launch.functions.KERNEL] under the kernel function's name"
        for f, where in unknown.items()
    ]
    return [d for f, d in seen.items() if f not in differ], notes
