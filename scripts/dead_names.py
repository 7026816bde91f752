"""Fail on a module-level name in bot/ that nothing outside tests uses (scripts/test.sh runs it beside ruff and mypy).

    .venv/bin/python scripts/dead_names.py    # each dead name as `path:line: name`, exit 1 when there is one

A name counts as used where bot/, scripts/ or benchmarks/ reads it: its own module by its bare name, another module
by `from module import name` or as `module.name` through the name an import bound to that module, pyproject.toml's
entry points. A use inside the name's own definition (recursion) does not count; tests/ does not count. Names that
only something dynamic reads (found by attribute on a module object chosen at run time) are listed in ALLOWED, each
with its reason; an ALLOWED entry that matches no unread name fails too, so the list stays true.
"""

from __future__ import annotations

import argparse
import ast
import sys
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "bot"
READERS = ("bot", "scripts", "benchmarks")  # the code whose reads count (never tests/)

# "module:name" (fnmatch patterns) -> why nothing reads it statically.
ALLOWED = {
    "bot.commands.*:register": "bot/cli.py calls each subcommand module's register through COMMANDS",
    "bot.commands.*:run": "bot/cli.py calls each subcommand module's run through COMMANDS",
    "bot.cli:subcommands": "each subcommand's parser (argparse hides them): tests/test_docs.py checks docs/cli.md",
    "bot.config.settings:VARIABLES": "every setting's variable in one place: tests/test_docs.py holds the README to it",
    "bot.wording.messages:VERBATIM": "the parameters shown as written: tests/test_i18n.py holds every report to it",
    "bot.commands.slash:table": "the slash commands: tests/test_slash.py holds each to the workflow that answers it",
    "bot.untrusted.resources:cache_key": "one check's cache key: tests/test_resources.py (the review: compile_sides)",
    "bot.untrusted.resources:compile_resources": "one check alone: tests/test_resources.py (the review: compile_sides)",
}


@dataclass(frozen=True)
class Definition:
    module: str
    name: str
    path: Path
    line: int
    node: ast.AST


def module_of(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _top_level(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """The module's own statements, those under a top-level `if` or `try` too (TYPE_CHECKING, optional imports)."""
    for stmt in body:
        if isinstance(stmt, ast.If):
            yield from _top_level(stmt.body + stmt.orelse)
        elif isinstance(stmt, ast.Try):
            yield from _top_level(stmt.body + stmt.orelse + stmt.finalbody + [s for h in stmt.handlers for s in h.body])
        else:
            yield stmt


def definitions(module: str, path: Path, tree: ast.Module) -> Iterator[Definition]:
    for stmt in _top_level(tree.body):
        targets: list[ast.expr] = []
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            yield Definition(module, stmt.name, path, stmt.lineno, stmt)
            continue
        if isinstance(stmt, ast.Assign):
            targets = stmt.targets
        elif isinstance(stmt, ast.AnnAssign):
            targets = [stmt.target]
        for target in targets:
            for node in ast.walk(target):
                if isinstance(node, ast.Name) and not (node.id.startswith("__") and node.id.endswith("__")):
                    yield Definition(module, node.id, path, stmt.lineno, stmt)


def _annotations(tree: ast.Module) -> Iterator[ast.AST]:
    """String annotations ("Kernel") parsed as the expressions they stand for."""
    for node in ast.walk(tree):
        found: list[ast.expr | None] = []
        if isinstance(node, ast.arg | ast.AnnAssign):
            found = [node.annotation]
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            found = [node.returns]
        for annotation in found:
            for inner in ast.walk(annotation) if annotation is not None else ():
                if isinstance(inner, ast.Constant) and isinstance(inner.value, str):
                    try:
                        yield ast.parse(inner.value, mode="eval")
                    except SyntaxError:
                        continue


def _dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = _dotted(node.value)
        return None if inner is None else f"{inner}.{node.attr}"
    return None


def _absolute(module: str, is_package: bool, level: int, target: str | None) -> str:
    """The module a relative `from … import` names."""
    if level == 0:
        return target or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join([*base, target] if target else base)


def _sibling(module: str, source: str, modules: set[str]) -> str:
    """The module a bare import names (bot/untrusted/runner/ has its folder on sys.path: `import protocol`)."""
    beside = f"{module.rpartition('.')[0]}.{source}"
    return beside if source not in modules and beside in modules else source


def uses(module: str, is_package: bool, tree: ast.Module, modules: set[str]) -> Iterator[tuple[str, str, ast.AST]]:
    """(module, name, the node that reads it) for each read of a module-level name in this file."""
    bound: dict[str, str] = {}  # a local name -> the bot module an import bound to it
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname or _sibling(module, alias.name, modules) != alias.name:
                    bound[alias.asname or alias.name] = _sibling(module, alias.name, modules)
                else:
                    bound[alias.name.split(".")[0]] = alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom):
            source = _sibling(module, _absolute(module, is_package, node.level, node.module), modules)
            for alias in node.names:
                if f"{source}.{alias.name}" in modules:
                    bound[alias.asname or alias.name] = f"{source}.{alias.name}"
                else:
                    yield source, alias.name, node
    for node in [*ast.walk(tree), *(n for a in _annotations(tree) for n in ast.walk(a))]:
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Store):
            yield module, node.id, node
        elif isinstance(node, ast.Attribute):
            owner = _dotted(node.value)
            if owner is None:
                continue
            head, _, rest = owner.partition(".")
            if head in bound:
                yield ".".join(p for p in (bound[head], rest) if p), node.attr, node


def entry_points(root: Path) -> Iterator[tuple[str, str]]:
    pyproject = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    for target in pyproject.get("project", {}).get("scripts", {}).values():
        module, _, name = target.partition(":")
        yield module, name


def dead(root: Path) -> list[Definition]:
    trees: dict[Path, ast.Module] = {}
    for folder in READERS:
        for path in sorted((root / folder).rglob("*.py")):
            trees[path] = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    modules = {module_of(p, root) for p in trees if p.is_relative_to(root / PACKAGE)}
    defined: dict[tuple[str, str], list[Definition]] = {}
    for path, tree in trees.items():
        if path.is_relative_to(root / PACKAGE):
            for d in definitions(module_of(path, root), path, tree):
                defined.setdefault((d.module, d.name), []).append(d)
    read = set(entry_points(root))
    for path, tree in trees.items():
        module = module_of(path, root) if path.is_relative_to(root / PACKAGE) else f"<{path.name}>"
        inside = {
            key: {id(n) for d in found for n in ast.walk(d.node)} for key, found in defined.items() if key[0] == module
        }
        for m, n, node in uses(module, path.name == "__init__.py", tree, modules):
            if id(node) not in inside.get((m, n), ()):
                read.add((m, n))
    return [found[0] for key, found in sorted(defined.items()) if key not in read]


def allowed(d: Definition) -> bool:
    return any(fnmatchcase(f"{d.module}:{d.name}", pattern) for pattern in ALLOWED)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--root", type=Path, default=ROOT, help="the repository to check (default: this one)")
    root = p.parse_args(argv).root.resolve()
    if not (root / PACKAGE).is_dir():
        print(f"dead_names: {root} has no {PACKAGE}/ folder", file=sys.stderr)
        return 2
    found = dead(root)
    problems = [
        f"{d.path.relative_to(root)}:{d.line}: {d.name} is used by nothing outside tests"
        for d in found
        if not allowed(d)
    ]
    problems += [
        f"scripts/dead_names.py: ALLOWED entry {pattern!r} matches no unread name (gone, or read now)"
        for pattern in ALLOWED
        if not any(fnmatchcase(f"{d.module}:{d.name}", pattern) for d in found)
    ]
    for line in problems:
        print(line)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
