"""What a repository's own build says about a kernel: the GPU architectures and include folders its setup.py,
CMakeLists.txt and cpp_extension.load scripts name (plain text and Python's ast, nothing run), for `opgate init` to
draft."""

from __future__ import annotations

import ast
import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from bot.config.manifest_tables import ARCH

_GENCODE = re.compile(
    r"arch\s*=\s*compute_(\d+[af]?)\s*,\s*code\s*=\s*\[?\s*((?:sm|compute)_\d+[af]?(?:\s*,\s*(?:sm|compute)_\d+[af]?)*)"
)
_ARCH_FLAG = re.compile(r"(?:-arch|--gpu-architecture)(?:\s*=\s*|\s+|['\"]\s*,\s*['\"])(sm|compute)_(\d+[af]?)\b")
_TORCH_LIST = re.compile(r"TORCH_CUDA_ARCH_LIST['\"]?\s*\]?\s*(?:=|,|:)\s*['\"]([^'\"]+)['\"]")
_TORCH_ARCH = re.compile(r"(\d+)\.(\d+)([af]?)(?:\+PTX)?")
_CMAKE_ARCHS = re.compile(r"(?:CMAKE_)?CUDA_ARCHITECTURES\s+([^)\n]+)")
_CMAKE_ARCH = re.compile(r"(\d+)([af]?)(?:-real|-virtual)?")
_PY_INCLUDES = re.compile(r"include_dirs\s*=\s*\[(.*?)\]", re.S)
_I_FLAG = re.compile(r"['\"]-I\s*([^'\"\s{}]+)['\"]")
_CMAKE_INCLUDES = re.compile(r"\b(?:target_)?include_directories\s*\(([^)]*)\)", re.S)
_CMAKE_KEYWORDS = frozenset({"PUBLIC", "PRIVATE", "INTERFACE", "SYSTEM", "BEFORE", "AFTER"})
_CMAKE_HERE = re.compile(r"\$\{(?:CMAKE_CURRENT_SOURCE_DIR|CMAKE_CURRENT_LIST_DIR|PROJECT_SOURCE_DIR)\}/?")
_STRING = re.compile(r"['\"]([^'\"]*)['\"]")
_SUBMODULE = re.compile(r"^\s*path\s*=\s*(.+?)\s*$", re.M)
BUILD_FILES = ("setup.py", "CMakeLists.txt")


@dataclass
class BuildFacts:
    """The architectures and include folders a kernel's build files name, where they came from, and what init
    could not use."""

    architectures: list[str] = field(default_factory=list)
    found_in: list[str] = field(default_factory=list)  # "setup.py (-gencode)", "CMakeLists.txt (CUDA_ARCHITECTURES)"
    include_dirs: list[str] = field(default_factory=list)  # from the repository root
    notes: list[str] = field(default_factory=list)
    read: list[str] = field(default_factory=list)  # the build files read, from the repository root
    # an architecture a setup.py adds only under a condition -> "setup.py: if bare_metal_version <= Version('12.9')"
    conditions: dict[str, str] = field(default_factory=dict)
    nvcc_flags: list[str] = field(default_factory=list)  # a setup.py's extra_compile_args["nvcc"], as it passes them
    cxx_flags: list[str] = field(default_factory=list)  # … and ["cxx"]
    flags_from: str = ""  # 'setup.py extra_compile_args["nvcc"]'


def _sm(number: str) -> str:
    return f"sm_{number}"


def python_architectures(text: str) -> dict[str, list[str]]:
    """How each kind of declaration in a setup.py or a cpp_extension.load script names architectures."""
    found: dict[str, list[str]] = {}
    for _arch, codes in _GENCODE.findall(text):
        found.setdefault("-gencode", []).extend(_sm(c.split("_", 1)[1]) for c in re.split(r"\s*,\s*", codes))
    for _kind, number in _ARCH_FLAG.findall(text):
        found.setdefault("-arch", []).append(_sm(number))
    for value in _TORCH_LIST.findall(text):
        for major, minor, suffix in _TORCH_ARCH.findall(value):
            found.setdefault("TORCH_CUDA_ARCH_LIST", []).append(f"sm_{major}{minor}{suffix}")
    return found


def _branches(text: str) -> list[tuple[int, int, str]]:
    """(first line, last line, condition) of every branch of every `if` of a Python file (`not (…)` for an else),
    outer ones first; empty when the file is not Python ast can read."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return []
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.If):
            test = ast.unparse(node.test)
            found.append((node.body[0].lineno, node.body[-1].end_lineno or node.lineno, test))
            if node.orelse:
                found.append((node.orelse[0].lineno, node.orelse[-1].end_lineno or node.lineno, f"not ({test})"))
    return found


def architecture_conditions(text: str) -> dict[str, str | None]:
    """Each architecture a setup.py or load script names -> the `if` conditions it alone is named under (joined with
    `and`; those around every architecture of the file, `if not SKIP_CUDA_BUILD`, left out), None when it is named
    once under none of its own."""
    branches = _branches(text)
    found: dict[str, tuple[str, ...]] = {}

    def add(arch: str, offset: int) -> None:
        line = text.count("\n", 0, offset) + 1
        conditions = tuple(c for first, last, c in branches if first <= line <= last)
        if arch not in found or len(conditions) < len(found[arch]):
            found[arch] = conditions

    for m in _GENCODE.finditer(text):
        for code in re.split(r"\s*,\s*", m.group(2)):
            add(_sm(code.split("_", 1)[1]), m.start())
    for m in _ARCH_FLAG.finditer(text):
        add(_sm(m.group(2)), m.start())
    for m in _TORCH_LIST.finditer(text):
        for major, minor, suffix in _TORCH_ARCH.findall(m.group(1)):
            add(f"sm_{major}{minor}{suffix}", m.start())
    common = set.intersection(*(set(c) for c in found.values())) if found else set()
    return {a: " and ".join(c for c in cs if c not in common) or None for a, cs in found.items()}


def buildable(facts: BuildFacts, codes: tuple[str, ...] | None, nvcc: str | None) -> tuple[list[str], list[str]]:
    """(the architectures to draft: those the build files name that the installed nvcc builds, every one when it
    cannot say; the comment lines that name each choice: an architecture left out, one added only under a
    condition). `codes`: what `nvcc --list-gpu-code` prints (sm_90 builds sm_90a too); `nvcc`: its version."""
    can = [a for a in facts.architectures if codes is None or a.rstrip("af") in codes]
    lines: list[str] = []
    groups: dict[tuple[bool, str], list[str]] = {}
    for arch in facts.architectures:
        if arch not in can or arch in facts.conditions:
            groups.setdefault((arch in can, facts.conditions.get(arch, "")), []).append(arch)
    installed = f"nvcc {nvcc} here" if nvcc else "the installed nvcc"
    for (kept, condition), archs in groups.items():
        them = "it" if len(archs) == 1 else "them"
        where, _, test = condition.partition(": if ")
        only = f"{where} adds {them} only if {test}" if condition else ""
        if kept:
            built = f"; {installed} builds {them}" if codes is not None else ""
            lines.append(f"a choice: {', '.join(archs)}: {only}{built}")
        else:
            lines.append(
                f"left out: {', '.join(archs)}: {installed} cannot build {them}{f'; {only}' if only else ''} "
                f"(a choice: add {them} for a runner whose nvcc builds {them})"
            )
    return can, lines


_HIP = re.compile(r"hip|rocm", re.I)
_FLAG_KEYS = {"nvcc": "nvcc", "cxx": "cxx", "extra_cuda_cflags": "nvcc", "extra_cflags": "cxx"}


class _Flags:
    """A setup.py's or load script's compiler flags, evaluated from its ast, nothing run: string lists, `+`, `*x`,
    names built with `=`, `+=`, `.append` and `.extend` in the order the file runs them, and calls of its own
    one-line functions (`def append_nvcc_threads(a): return a + ["--threads", "4"]`). An `if` about HIP or ROCm is
    AMD's build: its body is skipped, its else taken. What is built otherwise (an f-string, a loop) is `missing`."""

    def __init__(self, tree: ast.Module) -> None:
        self.names: dict[str, list[str]] = {}
        self.functions = {
            f.name: f for f in tree.body if isinstance(f, ast.FunctionDef) and isinstance(f.body[-1], ast.Return)
        }
        self.found: dict[str, list[str]] = {}  # "nvcc" | "cxx" -> the first flags found
        self.where: dict[str, str] = {}
        self.missing: list[str] = []

    def run(self, body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.If):
                hip = _HIP.search(ast.unparse(node.test)) is not None
                self.run(node.orelse if hip else [*node.body, *node.orelse])
                continue
            if isinstance(node, (ast.With, ast.Try)):
                self.run([*node.body, *getattr(node, "orelse", []), *getattr(node, "finalbody", [])])
                continue
            if isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.For, ast.While)):
                continue
            self._find(node)
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                if (value := self.value(node.value, {}, quiet=True)) is not None:
                    self.names[node.targets[0].id] = value
            elif isinstance(node, ast.AugAssign) and isinstance(node.target, ast.Name) and node.target.id in self.names:
                self.names[node.target.id] += self.value(node.value, {}, quiet=True) or []
            elif isinstance(node, ast.Expr) and isinstance(call := node.value, ast.Call):
                f = call.func
                if (
                    isinstance(f, ast.Attribute)
                    and f.attr in ("append", "extend")
                    and len(call.args) == 1
                    and isinstance(f.value, ast.Name)
                    and f.value.id in self.names
                ):
                    self.names[f.value.id] += self.value(call.args[0], {}, quiet=True) or []

    def _find(self, node: ast.AST) -> None:
        """Record the flags a dict's "nvcc"/"cxx" key or a load call's extra_cuda_cflags= names, the first of each."""
        for sub in ast.walk(node):
            pairs: list[tuple[str, ast.expr]] = []
            if isinstance(sub, ast.Dict):
                pairs = [(k.value, v) for k, v in zip(sub.keys, sub.values, strict=True) if isinstance(k, ast.Constant)
                         and isinstance(k.value, str)]  # fmt: skip
            elif isinstance(sub, ast.Call):
                pairs = [(k.arg, k.value) for k in sub.keywords if k.arg is not None]
            for key, value in pairs:
                kind = _FLAG_KEYS.get(key)
                if kind is not None and kind not in self.found and (flags := self.value(value, {})) is not None:
                    self.found[kind] = flags
                    self.where[kind] = f'extra_compile_args["{key}"]' if key in ("nvcc", "cxx") else f"{key}="

    def value(self, node: ast.expr, scope: dict[str, list[str]], *, quiet: bool = False) -> list[str] | None:
        """The strings `node` evaluates to (a string is a list of one), None when it is not a string list at all; an
        item of a list that is not a string goes to `missing` unless `quiet`."""
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return [node.value]
        if isinstance(node, ast.Name) and (node.id in scope or node.id in self.names):
            return scope.get(node.id, self.names.get(node.id))
        if isinstance(node, (ast.List, ast.Tuple)):
            out: list[str] = []
            for elt in node.elts:
                inner = elt.value if isinstance(elt, ast.Starred) else elt
                got = self.value(inner, scope, quiet=quiet)
                if got is None and not quiet:
                    self.missing.append(ast.unparse(inner))
                out += got or []
            return out
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
            left, right = self.value(node.left, scope, quiet=quiet), self.value(node.right, scope, quiet=quiet)
            return None if left is None or right is None else left + right
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in self.functions:
            f = self.functions[node.func.id]
            ret = f.body[-1]
            params = [a.arg for a in f.args.args]
            values = [self.value(a, scope, quiet=quiet) for a in node.args]
            bound = len(values) == len(params) and all(v is not None for v in values)
            if bound and isinstance(ret, ast.Return) and ret.value is not None:
                scope = {p: v for p, v in zip(params, values, strict=True) if v is not None}
                return self.value(ret.value, scope, quiet=quiet)
        return None


def python_flags(text: str) -> tuple[dict[str, list[str]], dict[str, str], list[str]]:
    """(kind -> the flags a setup.py or load script passes: "nvcc" its extra_compile_args["nvcc"] or
    extra_cuda_cflags, "cxx" the host compiler's; kind -> where; the parts built in code, left out)."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return {}, {}, []
    flags = _Flags(tree)
    flags.run(tree.body)
    return flags.found, flags.where, flags.missing


# Folders at a repository's root that are no package of its own.
_NOT_PACKAGES = frozenset({"tests", "test", "docs", "doc", "examples", "benchmarks", "scripts", "build", "dist"})


def _setup_name(text: str) -> str | None:
    """The `name=` a setup.py passes to setup(): a string, or a name the file sets to one (PACKAGE_NAME = "x")."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return None
    strings = {
        t.id: n.value.value
        for n in tree.body
        if isinstance(n, ast.Assign) and isinstance(n.value, ast.Constant) and isinstance(n.value.value, str)
        for t in n.targets
        if isinstance(t, ast.Name)
    }
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)]
    for call in calls:
        f = call.func
        if (f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None) != "setup":
            continue
        for k in call.keywords:
            if k.arg == "name" and isinstance(k.value, ast.Constant) and isinstance(k.value.value, str):
                return k.value.value
            if k.arg == "name" and isinstance(k.value, ast.Name):
                return strings.get(k.value.id)
    return None


def package_name(root: Path) -> tuple[str, str] | None:
    """(the repository's package name, where it is named): setup.py's setup(name=…), pyproject.toml's [project] name,
    else its one package folder at the root (a folder with __init__.py); None when none says (read, never run)."""
    if (root / "setup.py").is_file() and (name := _setup_name((root / "setup.py").read_text(errors="replace"))):
        return name, "setup.py setup(name=…)"
    try:
        project = tomllib.loads((root / "pyproject.toml").read_text(errors="replace")).get("project", {})
    except (OSError, tomllib.TOMLDecodeError):
        project = {}
    if isinstance(project, dict) and isinstance(name := project.get("name"), str) and name:
        return name, "pyproject.toml [project] name"
    folders = [
        p.name
        for p in sorted(root.iterdir())
        if p.is_dir()
        and not p.name.startswith((".", "_"))
        and p.name not in _NOT_PACKAGES
        and (p / "__init__.py").is_file()
    ]
    return (folders[0], f"the package folder {folders[0]}/") if len(folders) == 1 else None


def cmake_architectures(text: str) -> tuple[list[str], list[str]]:
    """(architectures, values init cannot turn into one: native, all, a ${VARIABLE}) of CUDA_ARCHITECTURES."""
    archs, unknown = [], []
    for value in _CMAKE_ARCHS.findall(re.sub(r"#[^\n]*", "", text)):
        for token in re.split(r"[;\s\"]+", value.strip()):
            if not token or token in ("PROPERTIES",):
                continue
            if (m := _CMAKE_ARCH.fullmatch(token)) is not None:
                archs.append(_sm(m.group(1) + m.group(2)))
            else:
                unknown.append(token)
    return archs, unknown


def _python_dirs(text: str) -> list[str]:
    """Folders a setup.py's include_dirs lists and its -I flags name (each item's string literals joined: a
    os.path.join(here, "csrc", "cutlass", "include") is csrc/cutlass/include, from the setup.py's folder)."""
    dirs = []
    for body in _PY_INCLUDES.findall(text):
        depth, item, items = 0, "", []
        for ch in body:
            depth += {"(": 1, "[": 1, ")": -1, "]": -1}.get(ch, 0)
            if ch == "," and depth == 0:
                items.append(item)
                item = ""
            else:
                item += ch
        for raw in [*items, item]:
            parts = [re.sub(r"\{[^}]*\}/?", "", s) for s in _STRING.findall(raw)]
            joined = "/".join(p.strip("/") for p in parts if p.strip("/"))
            if joined:
                dirs.append(joined)
    return dirs + _I_FLAG.findall(text)


def _cmake_dirs(text: str) -> list[str]:
    """Folders include_directories / target_include_directories name, from the CMakeLists.txt's folder (a
    ${VARIABLE} other than the source folder's is left out)."""
    dirs = []
    for m in _CMAKE_INCLUDES.finditer(re.sub(r"#[^\n]*", "", text)):
        tokens = [t.strip('"') for t in m.group(1).split()]
        if m.group(0).startswith("target_"):
            tokens = tokens[1:]  # the target's name
        for token in tokens:
            token = _CMAKE_HERE.sub("", token)
            if token and token not in _CMAKE_KEYWORDS and "${" not in token and "$<" not in token:
                dirs.append(token)
    return dirs


def submodules(root: Path) -> list[str]:
    """The paths .gitmodules lists."""
    path = root / ".gitmodules"
    return _SUBMODULE.findall(path.read_text(errors="replace")) if path.is_file() else []


def _build_files(root: Path, folder: Path) -> list[Path]:
    """setup.py and CMakeLists.txt from the kernel folder up to the repository root, and the folder's Python
    scripts that call cpp_extension.load."""
    files, here = [], folder
    while True:
        files += [here / name for name in BUILD_FILES if (here / name).is_file()]
        if here == root or root not in here.parents:
            break
        here = here.parent
    for script in sorted(folder.glob("*.py")):
        if script.name != "setup.py" and "cpp_extension" in script.read_text(errors="replace"):
            files.append(script)
    return files


def read_build_files(root: Path, folder: Path) -> BuildFacts:
    """What the build files of the kernel in `folder` (inside the repository `root`) declare."""
    facts = BuildFacts()
    gencode_in_code = []
    always: set[str] = set()  # architectures some build file names under no condition
    candidates: list[tuple[str, str]] = []  # (folder from the root, where it was named)
    for path in _build_files(root, folder):
        rel = path.relative_to(root).as_posix()
        facts.read.append(rel)
        text = path.read_text(errors="replace")
        here = path.parent.relative_to(root).as_posix()
        if path.name == "CMakeLists.txt":
            archs, unknown = cmake_architectures(text)
            if archs:
                facts.architectures += archs
                facts.found_in.append(f"{rel} (CUDA_ARCHITECTURES)")
            if unknown:
                facts.notes.append(
                    f"{rel}: CUDA_ARCHITECTURES {' '.join(unknown)} names no architecture init can read: "
                    "set [constraints] architectures"
                )
            dirs = _cmake_dirs(text)
        else:
            found = python_architectures(text)
            for arch, condition in architecture_conditions(text).items():
                if condition is None:
                    always.add(arch)
                else:
                    facts.conditions.setdefault(arch, f"{rel}: if {condition}")
            for kind, archs in found.items():
                facts.architectures += archs
                facts.found_in.append(f"{rel} ({kind})")
            if not found and "-gencode" in text:
                gencode_in_code.append(rel)
            dirs = _python_dirs(text)
            found_flags, where, missing = python_flags(text)
            if "nvcc" in found_flags and not facts.flags_from:
                facts.nvcc_flags, facts.cxx_flags = found_flags["nvcc"], found_flags.get("cxx", [])
                facts.flags_from = f"{rel} {where['nvcc']}"
                if missing:
                    facts.notes.append(
                        f"{rel}: nvcc flags built in code ({', '.join(missing)}): left out of cuda_cflags; add them"
                    )
        candidates += [(os.path.normpath(os.path.join(here, d)), rel) for d in dirs if not os.path.isabs(d)]
    if gencode_in_code:
        facts.notes.append(
            f"{', '.join(gencode_in_code)}: -gencode flags built in code (a loop or an f-string): name the "
            "architectures in [constraints] architectures"
        )
    named = dict.fromkeys(a for a in facts.architectures if ARCH.fullmatch(a))
    facts.architectures = sorted(named, key=lambda a: (int(a[3:].rstrip("af")), a))
    facts.conditions = {a: c for a, c in facts.conditions.items() if a in named and a not in always}
    _include_dirs(root, folder, candidates, facts)
    return facts


def _include_dirs(root: Path, folder: Path, candidates: list[tuple[str, str]], facts: BuildFacts) -> None:
    """Keep the named folders that are inside the repository and not the kernel folder itself; name a missing
    one that lies in a submodule that is not checked out."""
    modules = submodules(root)
    kernel = folder.relative_to(root).as_posix()
    for rel, where in dict.fromkeys(candidates):
        if rel.startswith("..") or rel in (".", kernel) or rel in facts.include_dirs:
            continue
        path = root / rel
        module = next((m for m in modules if rel == m or rel.startswith(f"{m}/")), None)
        if path.is_dir() and any(path.iterdir()):
            facts.include_dirs.append(rel)
        elif module is not None and not any((root / module).iterdir() if (root / module).is_dir() else []):
            facts.include_dirs.append(rel)
            facts.notes.append(
                f"include folder {rel} (named in {where}) lies in the git submodule {module}, which is not checked "
                f"out here: git submodule update --init {module} (a review checks out the commit base and head pin)"
            )
        else:
            facts.notes.append(f"include folder {rel} (named in {where}) is not in the repository: left out")
