"""The CUDA launches a kernel's sources make: `<<<…>>>`, `cudaLaunchKernel*`, `cuLaunchKernel*`, `cudaFuncSetAttribute`,
the constants their block size and dynamic shared memory are computed from, and explicit kernel instantiations.

Plain text scanning (comments and string literals blanked, nothing compiled), so that a review knows which changed
file can move a launch's figures (`touches`), the fold (bot/untrusted/fold.py) knows which argument to read back, and
`opgate init` can draft `[launch]` from the launches it finds. Every offset is into the original text.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

# kind -> (index of the kernel argument, of the block argument, of the dynamic shared memory argument); None: not
# an argument of the call (cudaLaunchKernelEx's sizes are in its config struct, which the scanner does not follow).
CALLS: dict[str, tuple[int, int | None, int | None]] = {
    "cudaLaunchKernel": (0, 2, 4),
    "cudaLaunchCooperativeKernel": (0, 2, 4),
    "cudaLaunchKernelEx": (1, None, None),
    "cuLaunchKernel": (0, None, 7),
    "cuLaunchCooperativeKernel": (0, None, 7),
    "cuLaunchKernelEx": (1, None, None),
    "cudaFuncSetAttribute": (0, None, 2),
}
CHEVRON = "<<<"
INSTANTIATION = "template __global__"
SOURCE_SUFFIXES = (".cu", ".cuh", ".h", ".hh", ".hpp", ".hxx", ".inl", ".cpp", ".cc", ".cxx")
UNIT_SUFFIXES = (".cu", ".cpp", ".cc", ".cxx")  # compilation units: another unit never reads their constants

_CALL = re.compile(r"\b(" + "|".join(sorted(CALLS, key=len, reverse=True)) + r")\s*\(")
_CONST = re.compile(r"\b(?:constexpr|const)\b[^;={}()]*?\b([A-Za-z_]\w*)\s*(?:=|\{)\s*([^;]+);")
_DEFINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)(?![\w(])[ \t]*([^\n]*)$", re.M)
_ALIAS = r"(?:auto|const\s+auto|auto\s+const|auto\s*\*|[\w:]+\s*\(\s*\*\s*)"
_INSTANTIATE = re.compile(r"\btemplate\s+__global__\b[^;]*?\b([A-Za-z_]\w*)\s*<[^;]*;")
_IDENT = re.compile(r"[A-Za-z_]\w*")
_KEYWORDS = frozenset(
    (
        "sizeof",
        "alignof",
        "static_cast",
        "reinterpret_cast",
        "const_cast",
        "dynamic_cast",
        "unsigned",
        "signed",
        "int",
        "long",
        "short",
        "char",
        "size_t",
        "int64_t",
        "uint64_t",
        "int32_t",
        "uint32_t",
        "true",
        "false",
        "nullptr",
        "dim3",
        "std",
        "min",
        "max",
        "auto",
        "const",
        "constexpr",
        "static",
        "template",
        "typename",
        "void",
        "float",
        "double",
        "bool",
    )
)


@dataclass(frozen=True)
class Arg:
    """One argument of a launch: its text and where it lies in the source (start, end offsets)."""

    text: str
    start: int
    end: int


@dataclass(frozen=True)
class LaunchSite:
    """One launch (or opt-in, or explicit instantiation) in one file.

    kernel: the kernel expression as written (`kernel`, `gemm<Cfg>`); function: its name, a local alias
    (`auto kernel = gemm_bf16_kernel<…>;`) followed; target: the expression naming the kernel function itself
    (`gemm_bf16_kernel<TM, TN, TK, kVec>`), None when the scanner could not tell.
    """

    path: str
    line: int
    kind: str
    kernel: str
    function: str
    target: str | None = None
    block: Arg | None = None
    smem: Arg | None = None
    close: int | None = None  # `<<<`: the offset of `>>>` (where a missing smem argument goes)

    def describe(self) -> str:
        """`kernels/x/gemm.cu:406 kernel<<<…, Cfg::kThreads, Cfg::kSmemBytes>>>` — the launch as a reader finds it."""
        if self.kind == CHEVRON:
            args = ", ".join(a.text for a in (self.block, self.smem) if a is not None)
            return f"{self.path}:{self.line} {self.kernel}<<<…, {args}>>>"
        if self.kind == INSTANTIATION:
            return f"{self.path}:{self.line} template __global__ {self.kernel}"
        shown = f", {self.smem.text}" if self.smem is not None else ""
        return f"{self.path}:{self.line} {self.kind}({self.kernel}{shown})"


TouchKind = Literal["holds", "instantiates", "tunables", "defines"]


@dataclass(frozen=True)
class Touch:
    """A changed file that can move a launch's figures, and why: it holds the launch, instantiates the kernel, sets
    the tunables the launch is compiled with, or defines `names`, which the launch is computed from (the sentence is
    the catalog's: bot/verdict/launch.py `touch_phrase`)."""

    path: str
    site: LaunchSite
    kind: TouchKind
    names: tuple[str, ...] = ()


def blank(text: str) -> str:
    """`text` with comments, string and character literals replaced by spaces (newlines kept: offsets still hold)."""
    out = list(text)
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
        elif ch == '"' or (ch == "'" and not (i > 0 and text[i - 1].isalnum())):  # 1'000: a digit separator
            j = i + 1
            while j < n and text[j] != ch and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            j = min(n, j + 1)
        else:
            i += 1
            continue
        for k in range(i, j):
            if out[k] != "\n":
                out[k] = " "
        i = j
    return "".join(out)


def split_args(text: str, start: int, end: int) -> list[Arg]:
    """The top-level comma-separated arguments of text[start:end] (parentheses, brackets, braces and `Name<…>`
    template arguments nest), each stripped, with its offsets."""
    args: list[Arg] = []
    depth, angle, at = 0, 0, start
    for i in range(start, end):
        ch = text[i]
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "<" and i > 0 and (text[i - 1].isalnum() or text[i - 1] == "_") and text[i + 1 : i + 2] != "<":
            angle += 1
        elif ch == ">" and angle > 0 and text[i - 1 : i] != "-":
            angle -= 1
        elif ch == "," and depth == 0 and angle == 0:
            args.append(_arg(text, at, i))
            at = i + 1
    if text[at:end].strip():
        args.append(_arg(text, at, end))
    return args


def _arg(text: str, start: int, end: int) -> Arg:
    raw = text[start:end]
    lead = len(raw) - len(raw.lstrip())
    stripped = raw.strip()
    return Arg(stripped, start + lead, start + lead + len(stripped))


def _close_paren(text: str, open_at: int) -> int:
    """The offset of the `)` that closes the `(` at `open_at` (len(text) when it is never closed)."""
    depth = 0
    for i in range(open_at, len(text)):
        depth += {"(": 1, ")": -1}.get(text[i], 0)
        if depth == 0:
            return i
    return len(text)


def _kernel_before(text: str, at: int) -> tuple[str, int]:
    """The kernel expression that ends just before offset `at` (`ns::gemm<Cfg, 3>`), and where it starts."""
    i, angle = at, 0
    while i > 0:
        ch = text[i - 1]
        if ch == ">":
            angle += 1
        elif ch == "<" and angle > 0:
            angle -= 1
        elif angle == 0 and not (ch.isalnum() or ch in "_:"):
            break
        i -= 1
    return text[i:at].strip(), i


def _line(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def _base_name(expression: str) -> str:
    """`gemm_bf16_kernel` of `&ns::gemm_bf16_kernel<128, 64>` or `(void*)gemm`."""
    head = re.sub(r"^\s*(?:\([^()]*\)\s*)*&?\s*", "", expression)
    head = head.split("<", 1)[0].strip()
    return head.rsplit("::", 1)[-1].strip()


def _target(code: str, kernel: str, before: int) -> str | None:
    """The function a kernel expression names: itself, or what a local alias above the launch was set to."""
    expression = re.sub(r"^\s*(?:\(\s*(?:const\s+)?void\s*\*\s*\)\s*)?&?\s*", "", kernel).strip()
    name = expression.split("<", 1)[0].strip()
    if not re.fullmatch(r"[A-Za-z_]\w*", name):
        return expression if re.fullmatch(r"[\w:]+(?:\s*<.*>)?", expression, re.S) else None
    pattern = re.compile(
        rf"{_ALIAS}\s*\b{re.escape(name)}\b\s*\)?\s*(?:\([^()]*\))?\s*=\s*&?\s*([\w:]+\s*(?:<[^;]*>)?)\s*;"
    )
    found = list(pattern.finditer(code, 0, before))
    if found:
        return found[-1].group(1).strip()
    return expression


def _chosen(code: str, alias: str, before: int) -> str | None:
    """The kernel function a local alias set by a choice names (`auto kernel = c ? &k<T, false> : &k<T, true>;`), when
    every branch names the same one; None otherwise."""
    pattern = re.compile(rf"{_ALIAS}\s*\b{re.escape(alias)}\b\s*=\s*[^;?]*\?([^;]*);")
    found = list(pattern.finditer(code, 0, before))
    if not found:
        return None
    branches = re.findall(r"&?\s*((?:[A-Za-z_]\w*\s*::\s*)*[A-Za-z_]\w*)\s*(?:<|:(?!:)|$)", found[-1].group(1))
    named = {_base_name(b) for b in branches}
    return named.pop() if len(named) == 1 and len(branches) > 1 else None


def _function(code: str, kernel: str, target: str | None, before: int) -> str:
    """The kernel function a launch names: its target's, or the one every branch of a choosing alias names."""
    name = _base_name(target or kernel)
    if target is not None and target.strip() == kernel.strip() and re.fullmatch(r"[A-Za-z_]\w*", name):
        return _chosen(code, name, before) or name
    return name


def scan(path: str, text: str) -> list[LaunchSite]:
    """Every launch site of one file, in order."""
    code = blank(text)
    sites: list[LaunchSite] = []
    for m in re.finditer(re.escape(CHEVRON), code):
        close = code.find(">>>", m.end())
        if close < 0:
            continue
        kernel, _ = _kernel_before(code, m.start())
        args = split_args(code, m.end(), close)
        target = _target(code, kernel, m.start())
        sites.append(
            LaunchSite(
                path=path,
                line=_line(code, m.start()),
                kind=CHEVRON,
                kernel=kernel,
                function=_function(code, kernel, target, m.start()),
                target=target,
                block=_restore(text, args[1]) if len(args) > 1 else None,
                smem=_restore(text, args[2]) if len(args) > 2 else None,
                close=close,
            )
        )
    for m in _CALL.finditer(code):
        kind = m.group(1)
        args = split_args(code, m.end(), _close_paren(code, m.end() - 1))
        k_at, block_at, smem_at = CALLS[kind]
        if len(args) <= k_at:
            continue
        kernel = text[args[k_at].start : args[k_at].end]
        if kind == "cudaFuncSetAttribute" and (len(args) < 3 or "MaxDynamicSharedMemorySize" not in args[1].text):
            smem_at = None
        target = _target(code, kernel, m.start())
        sites.append(
            LaunchSite(
                path=path,
                line=_line(code, m.start()),
                kind=kind,
                kernel=kernel,
                function=_function(code, kernel, target, m.start()),
                target=target,
                block=_restore(text, args[block_at]) if block_at is not None and len(args) > block_at else None,
                smem=_restore(text, args[smem_at]) if smem_at is not None and len(args) > smem_at else None,
            )
        )
    for m in _INSTANTIATE.finditer(code):
        sites.append(
            LaunchSite(
                path=path, line=_line(code, m.start()), kind=INSTANTIATION, kernel=m.group(1), function=m.group(1)
            )
        )
    return sorted(sites, key=lambda s: s.line)


def _restore(text: str, arg: Arg) -> Arg:
    """The argument's text as written (the scan ran on the blanked copy)."""
    return Arg(text[arg.start : arg.end], arg.start, arg.end)


def constants(text: str) -> dict[str, str]:
    """name -> its definition, for every `const`/`constexpr` variable and object-like `#define` of one file."""
    code = blank(text)
    found = {}
    for m in _CONST.finditer(code):
        definition = m.group(2).strip()
        braced = code[m.end(1) : m.start(2)].strip() == "{"
        found[m.group(1)] = definition[:-1].rstrip() if braced and definition.endswith("}") else definition
    found.update({m.group(1): m.group(2).strip() for m in _DEFINE.finditer(code)})
    return found


def names(expression: str) -> set[str]:
    """The identifiers an expression reads (`Cfg::kSmemBytes` gives `Cfg` and `kSmemBytes`), keywords left out."""
    return {n for n in _IDENT.findall(expression) if n not in _KEYWORDS}


def launch_inputs(site: LaunchSite, defined: dict[str, list[str]]) -> set[str]:
    """Every name the site's block size and dynamic shared memory are computed from, through the constants of
    `defined` (name -> its definitions, in any file), transitively."""
    todo = set().union(*(names(a.text) for a in (site.block, site.smem) if a is not None))
    seen: set[str] = set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for definition in defined.get(name, []):
            todo |= names(definition) - seen
    return seen


def touches(changed: Iterable[str], files: dict[str, str], config: str | None = None) -> list[Touch]:
    """The changed files (of `files`: path -> text, both sides' sources) that hold a launch, a kernel's explicit
    instantiation or a constant a launch's block size or dynamic shared memory is computed from (a constant of the
    launch's own file or of a header: a `kNThreads` another .cu defines is not the one the launch reads). `config`:
    the kernel's tunable config file (its values become -D defines), which touches every launch."""
    changed = [p for p in dict.fromkeys(changed)]
    sites = [s for path, text in files.items() if path.endswith(SOURCE_SUFFIXES) for s in scan(path, text)]
    own = {path: constants(text) for path, text in files.items() if path.endswith(SOURCE_SUFFIXES)}
    shared: dict[str, list[tuple[str, str]]] = {}  # the headers' constants: name -> (path, definition)
    for path, named in own.items():
        if not path.endswith(UNIT_SUFFIXES):
            for name, definition in named.items():
                shared.setdefault(name, []).append((path, definition))
    seen: dict[str, tuple[dict[str, list[str]], dict[str, set[str]]]] = {}

    def visible(site_path: str) -> tuple[dict[str, list[str]], dict[str, set[str]]]:
        """The constants a launch in `site_path` can read (its own file's and the headers', never another unit's),
        and the files that define each."""
        if site_path not in seen:
            defined = {n: [d for _, d in pairs] for n, pairs in shared.items()}
            where = {n: {p for p, _ in pairs} for n, pairs in shared.items()}
            if site_path.endswith(UNIT_SUFFIXES):
                for name, definition in own.get(site_path, {}).items():
                    defined.setdefault(name, []).append(definition)
                    where.setdefault(name, set()).add(site_path)
            seen[site_path] = (defined, where)
        return seen[site_path]

    found: list[Touch] = []
    for path in changed:
        for site in sites:
            defined, where = visible(site.path)
            if site.path == path:
                found.append(Touch(path, site, "holds" if site.kind != INSTANTIATION else "instantiates"))
                continue
            if path == config and site.kind != INSTANTIATION:
                found.append(Touch(path, site, "tunables"))
                continue
            moved = sorted(n for n in launch_inputs(site, defined) if path in where.get(n, set()))
            if moved and site.kind != INSTANTIATION:
                found.append(Touch(path, site, "defines", tuple(moved)))
    return found
