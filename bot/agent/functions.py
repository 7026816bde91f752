"""Where the functions of a C/C++/CUDA or Python file are, and which of them a diff's hunks touch (pure)."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import PurePosixPath

from bot.config.launch_sites import blank

C_SUFFIXES = frozenset({".cu", ".cuh", ".cpp", ".cc", ".cxx", ".c", ".h", ".hh", ".hpp", ".hxx", ".inl"})
PY_SUFFIXES = frozenset({".py"})
# The head of a block that is not a function: control flow (inside a function anyway) and initialisers.
_NOT_FUNCTION = frozenset({"if", "for", "while", "switch", "catch", "return", "do", "else", "sizeof", "decltype"})
_SCOPE = re.compile(r"(?:^|\s)(?:namespace|struct|class|union|extern)\b")
# What may follow a function's parameter list before its body: qualifiers, a trailing return type, attributes.
_AFTER_PARAMS = re.compile(
    r"(?:\s*(?:const|volatile|noexcept(?:\s*\([^)]*\))?|override|final|mutable|&&?|throw\s*\(\s*\)"
    r"|->\s*[\w:<>,\s*&]+|__\w+__(?:\s*\([^)]*\))?))*\s*$"
)
_NAME = re.compile(r"(~?[A-Za-z_][\w:]*(?:\s*<[^<>()]*>)?|operator\s*[^\s(]+)\s*$")
_HUNK = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


@dataclass(frozen=True)
class Function:
    """One function of a file: its name and its first and last line (1-based, inclusive; a C function's first line
    is its declaration's, template and qualifiers included; a Python one's its first decorator's)."""

    name: str
    start: int
    end: int

    def touches(self, lines: set[int]) -> bool:
        return any(self.start <= n <= self.end for n in lines)


def language(path: str) -> str | None:
    """ "c" (C, C++, CUDA), "python", or None for a file this locator does not read."""
    suffix = PurePosixPath(path).suffix
    return "c" if suffix in C_SUFFIXES else "python" if suffix in PY_SUFFIXES else None


def functions(path: str, text: str) -> list[Function]:
    """The outermost functions of a file (methods of a class or struct included, a lambda or local class inside a
    function being part of that function), in file order; none for a language the locator does not read."""
    kind = language(path)
    if kind == "c":
        return c_functions(text)
    if kind == "python":
        return python_functions(text)
    return []


def _blank_directives(code: str) -> str:
    """Preprocessor lines (with their continuations) as spaces: a brace in a macro body is no block."""
    out = list(code)
    lines = code.split("\n")
    offset, inside = 0, False
    for line in lines:
        if inside or line.lstrip().startswith("#"):
            for k in range(offset, offset + len(line)):
                out[k] = " "
            inside = line.rstrip().endswith("\\")
        offset += len(line) + 1
    return "".join(out)


def _open_paren(code: str, close: int) -> int:
    depth = 0
    for i in range(close, -1, -1):
        if code[i] == ")":
            depth += 1
        elif code[i] == "(":
            depth -= 1
            if depth == 0:
                return i
    return -1


def _function_name(head: str) -> str | None:
    """The name of the function whose definition `head` (the text between the previous `;`, `{` or `}` and this
    block's `{`) starts, or None when the block is not a function body."""
    stripped = head.strip()
    if not stripped or "=" in stripped.split("(", 1)[0]:
        return None
    first = re.match(r"[A-Za-z_]\w*", stripped)
    if first and first.group(0) in _NOT_FUNCTION:
        return None
    close = stripped.rfind(")")
    if close < 0 or not _AFTER_PARAMS.fullmatch(stripped[close + 1 :]):
        return None
    opened = _open_paren(stripped, close)
    if opened <= 0:
        return None
    name = _NAME.search(stripped[:opened])
    if name is None:
        return None
    word = re.sub(r"\s+", "", name.group(1))
    return None if word.split("<", 1)[0] in _NOT_FUNCTION else word


def c_functions(text: str) -> list[Function]:
    """C, C++ and CUDA functions by their braces, comments, string and character literals and preprocessor lines
    skipped; a function's start is the first line of the text since the previous `;`, `{` or `}`."""
    code = _blank_directives(blank(text))
    found: list[Function] = []
    stack: list[str] = []  # per open brace: "function", "scope" (namespace, class, extern) or "other"
    head_start = 0
    start_of: list[tuple[int, str]] = []
    for i, ch in enumerate(code):
        if ch == "{":
            inside = "function" in stack or "other" in stack
            head = code[head_start:i]
            if inside:
                stack.append("other")
            elif (name := _function_name(head)) is not None:
                lead = len(head) - len(head.lstrip())
                start_of.append((head_start + lead, name))
                stack.append("function")
            elif _SCOPE.search(" " + head):
                stack.append("scope")
            else:
                stack.append("other")
            head_start = i + 1
        elif ch == "}":
            kind = stack.pop() if stack else "other"
            if kind == "function" and start_of:
                begin, name = start_of.pop()
                found.append(Function(name, code.count("\n", 0, begin) + 1, code.count("\n", 0, i) + 1))
            head_start = i + 1
        elif ch == ";":
            head_start = i + 1
    return sorted(found, key=lambda f: f.start)


def python_functions(text: str) -> list[Function]:
    """Python's module-level functions and the methods of its classes (decorators included); by indentation where
    the file does not parse."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return _indented_functions(text)
    found: list[Function] = []

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                found.append(Function(node.name, start, node.end_lineno or node.lineno))
            elif isinstance(node, ast.ClassDef):
                visit(node.body)

    visit(tree.body)
    return found


_DEF = re.compile(r"^(\s*)(?:async\s+)?def\s+([A-Za-z_]\w*)")


def _indented_functions(text: str) -> list[Function]:
    lines = text.split("\n")
    found: list[Function] = []
    n = 0
    while n < len(lines):
        match = _DEF.match(lines[n])
        if match is None or any(f.start <= n + 1 <= f.end for f in found):
            n += 1
            continue
        indent, end = len(match.group(1)), n
        for k in range(n + 1, len(lines)):
            body = lines[k]
            if body.strip() and len(body) - len(body.lstrip()) <= indent:
                break
            if body.strip():
                end = k
        found.append(Function(match.group(2), n + 1, end + 1))
        n = end + 1
    return found


@dataclass(frozen=True)
class Lines:
    """The lines a diff changes on one side, and the gaps (line before, line after) where the other side's lines
    were inserted or removed with nothing of this side changed beside them."""

    changed: frozenset[int]
    gaps: frozenset[tuple[int, int]]

    def inside(self, f: Function) -> bool:
        return f.touches(set(self.changed)) or any(f.start <= a and b <= f.end for a, b in self.gaps)


def changed_lines(diff: str) -> tuple[Lines, Lines]:
    """Base's and head's lines that one file's unified diff changes (a hunk's line counts say where it ends)."""
    changed: tuple[set[int], set[int]] = (set(), set())
    gaps: tuple[set[tuple[int, int]], set[tuple[int, int]]] = (set(), set())
    rows = diff.split("\n")
    i = 0
    while i < len(rows):
        match = _HUNK.match(rows[i])
        i += 1
        if match is None:
            continue
        left = [int(match.group(2) or 1), int(match.group(4) or 1)]
        # "-5,0": nothing of base in the hunk, head's lines go after base's line 5 (and the reverse).
        o, n = int(match.group(1)) + (left[0] == 0), int(match.group(3)) + (left[1] == 0)
        run: tuple[list[int], list[int]] = ([], [])
        while i < len(rows) and (left[0] > 0 or left[1] > 0):
            line = rows[i]
            i += 1
            if line.startswith("\\"):
                continue
            if line.startswith("-"):
                run[0].append(o)
                o, left[0] = o + 1, left[0] - 1
                continue
            if line.startswith("+"):
                run[1].append(n)
                n, left[1] = n + 1, left[1] - 1
                continue
            _close(run, o, n, changed, gaps)
            run = ([], [])
            o, n, left[0], left[1] = o + 1, n + 1, left[0] - 1, left[1] - 1
        _close(run, o, n, changed, gaps)
    return Lines(frozenset(changed[0]), frozenset(gaps[0])), Lines(frozenset(changed[1]), frozenset(gaps[1]))


def _close(
    run: tuple[list[int], list[int]],
    o: int,
    n: int,
    changed: tuple[set[int], set[int]],
    gaps: tuple[set[tuple[int, int]], set[tuple[int, int]]],
) -> None:
    """One run of removed and added lines ended before base line `o` and head line `n`."""
    removed, added = run
    changed[0].update(removed)
    changed[1].update(added)
    if added and not removed:
        gaps[0].add((o - 1, o))
    if removed and not added:
        gaps[1].add((n - 1, n))


def touched(path: str, text: str | None, lines: Lines) -> list[tuple[Function, str]]:
    """Each function of `text` that holds one of `lines`, with its text (nothing for a missing side)."""
    if text is None:
        return []
    rows = text.split("\n")
    return [(f, "\n".join(rows[f.start - 1 : f.end])) for f in functions(path, text) if lines.inside(f)]
