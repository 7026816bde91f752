"""The plan of the house holds (ARCHITECTURE.md): rooms import only the rooms below them, and the cheap commands
load neither torch nor anything that compiles or runs pull-request code."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, make_repo

BOT = ROOT / "bot"

# Room -> the rooms it may import (besides itself). The foundation (errors, phases, templates, text, models,
# config) may be imported by every room; ARCHITECTURE.md's code map says the same in words.
FOUNDATION = {"bot", "errors", "phases", "templates", "text", "models", "config"}
ALLOWED: dict[str, set[str]] = {
    "bot": set(),
    "errors": set(),
    "phases": set(),
    "templates": set(),
    "text": {"errors", "templates"},
    "models": {"errors"},
    "config": {"errors", "text", "models"},
    "wording": FOUNDATION,
    "verdict": FOUNDATION | {"wording"},
    "present": FOUNDATION | {"wording", "verdict"},
    "untrusted": FOUNDATION | {"wording", "verdict"},
    "ledger": FOUNDATION,
    "spend": FOUNDATION | {"ledger"},
    "agent": FOUNDATION | {"ledger", "spend"},
    "edges": FOUNDATION | {"wording", "verdict", "present", "ledger", "spend"},
    "review": FOUNDATION | {"wording", "verdict", "present", "untrusted", "ledger", "spend", "agent", "edges"},
    # The side features: each one folder, importing the core, imported by nothing but the commands (SIDE).
    "mainline": FOUNDATION | {"wording", "verdict", "present", "ledger", "spend", "edges", "review"},
    "tune": FOUNDATION | {"wording", "verdict", "present", "untrusted", "ledger", "spend", "agent", "edges", "review"},
    "lint": FOUNDATION | {"agent", "verdict"},
    "commands": FOUNDATION
    | {"wording", "verdict", "present", "ledger", "spend", "agent", "edges", "review", "mainline", "tune", "lint"},
    "cli": FOUNDATION | {"commands"},
    "__main__": {"cli"},
}


def _room(module: str) -> str:
    parts = module.split(".")
    return "bot" if len(parts) == 1 else parts[1]


def _is_module(name: str) -> bool:
    return (BOT / f"{name}.py").is_file() or (BOT / name).is_dir()


def _imports(path: Path) -> list[tuple[int, str]]:
    """Every bot module `path` imports (at any depth: function-level imports count too)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and node.module.startswith("bot"):
            if node.module == "bot":  # `from bot import x`: a module of the package, or a name of bot/__init__.py
                names = [f"bot.{a.name}" if _is_module(a.name) else "bot" for a in node.names]
            else:
                names = [node.module]
            found += [(node.lineno, n) for n in names]
        elif isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.split(".")[0] == "bot"]
    return found


def test_every_room_imports_only_the_rooms_below_it():
    wrong = []
    for path in sorted(BOT.rglob("*.py")):
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        room = _room(module)
        assert room in ALLOWED, f"{path}: a room the architecture test does not know (add it to ARCHITECTURE.md)"
        for line, target in _imports(path):
            other = _room(target)
            if other not in (room, "bot") and other not in ALLOWED[room]:
                wrong.append(f"{path.relative_to(ROOT)}:{line}: {room} imports {target}")
    assert wrong == []


# The side features (ARCHITECTURE.md, "Side features"): key governance, tuning, main's history with its dashboard.
SIDE = {"lint", "tune", "mainline"}


def _side_imports() -> set[tuple[str, str]]:
    """Every (module, imported module) where a module of bot/ outside the commands imports another folder's side
    feature."""
    found = set()
    for path in sorted(BOT.rglob("*.py")):
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        room = _room(module)
        for _, target in _imports(path):
            if _room(target) in SIDE and _room(target) != room and room != "commands":
                found.add((path.relative_to(ROOT).as_posix(), target))
    return found


def test_a_side_feature_is_imported_by_nothing_but_the_commands():
    """The core (plan, agent, measure, gate, comment) and the other side features never import a side feature: a
    side feature imports the core and is reached from `bot/commands/` (and the tests) alone."""
    assert _side_imports() == set()  # the review's annotations get the changed files' lint from the command
    assert {room for room, allowed in ALLOWED.items() if allowed & SIDE} - SIDE == {"commands"}


def test_no_side_feature_is_imported_by_another():
    assert all(not ALLOWED[side] & (SIDE - {side}) for side in SIDE)


def _modules() -> dict[str, Path]:
    """Every module of bot/, by dotted name (a package by its own name: `bot.ledger` is bot/ledger/__init__.py)."""
    return {".".join(p.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__"): p for p in BOT.rglob("*.py")}


def _target(module: str, name: str, modules: dict[str, Path]) -> str:
    """What `from module import name` names: the submodule `module.name` if there is one, else `module` itself."""
    return f"{module}.{name}" if f"{module}.{name}" in modules else module


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def test_no_module_imports_a_private_name_of_another_folder():
    """A leading underscore means "this folder's own": another folder that needs the name gets it made public (or
    the code moved). Checked: `from bot.x.y import _name`, and `y._name` where `y` is an imported module."""
    modules = _modules()
    wrong = []
    for path in sorted(modules.values()):
        tree = ast.parse(path.read_text())
        aliases: dict[str, str] = {}  # local name -> the bot module it is bound to
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and node.module.startswith("bot"):
                for a in node.names:
                    target = _target(node.module, a.name, modules)
                    if target == f"{node.module}.{a.name}":
                        aliases[a.asname or a.name] = target
                    elif _is_private(a.name) and target in modules and modules[target].parent != path.parent:
                        wrong.append(f"{path.relative_to(ROOT)}:{node.lineno}: imports {a.name} of {target}")
            elif isinstance(node, ast.Import):
                aliases.update({a.asname: a.name for a in node.names if a.asname and a.name in modules})
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in aliases
                and _is_private(node.attr)
                and modules[aliases[node.value.id]].parent != path.parent
            ):
                wrong.append(f"{path.relative_to(ROOT)}:{node.lineno}: uses {node.attr} of {aliases[node.value.id]}")
    assert wrong == []


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted; a module importing
    itself does not count."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_cycle_finder_finds_a_circle_and_only_a_circle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set(), "c": {"c"}}) == []


def test_the_import_graph_of_bot_has_no_circle():
    """Module to module, every import the source shows: at module level, inside a function (a lazy import is still
    a dependency, only a later one) and under TYPE_CHECKING (the reader follows it all the same)."""
    modules = _modules()
    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        deps = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module and node.module.startswith("bot"):
                deps |= {_target(node.module, a.name, modules) for a in node.names}
            elif isinstance(node, ast.Import):
                deps |= {a.name for a in node.names}
        graph[module] = {d for d in deps if d in modules and d != module}
    assert _cycles(graph) == []


# A command in a fresh interpreter: which modules it loaded (printed after it ran).
PROBE = """
import json, sys
from bot.cli import main
code = main(sys.argv[1:])
print("\\nMODULES " + json.dumps(sorted(sys.modules)))
sys.exit(code)
"""

HEAVY = ("torch", "bot.untrusted")


def _loaded(args: list[str], cwd: Path, env_extra: dict[str, str]) -> list[str]:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(cwd), **env_extra}
    proc = subprocess.run([sys.executable, "-c", PROBE, *args], cwd=cwd, env=env, capture_output=True, text=True)
    line = next((x for x in proc.stdout.splitlines() if x.startswith("MODULES ")), None)
    assert line is not None, proc.stdout + proc.stderr
    return [m for m in json.loads(line.removeprefix("MODULES ")) if m.startswith(HEAVY)]


@pytest.mark.parametrize(
    "module", ["bot.cli", "bot.commands.review", "bot.commands.lint", "bot.commands.summary", "bot.commands.tune"]
)
def test_command_modules_import_no_torch_and_no_runner(module):
    code = f"import json, sys; import {module}; print(json.dumps(sorted(sys.modules)))"
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert [m for m in json.loads(proc.stdout) if m.startswith(HEAVY)] == []


@pytest.mark.parametrize("module", ["bot.review.flow", "bot.review.check", "bot.mainline.bisect_run", "bot.tune.loop"])
def test_the_review_process_never_imports_torch(module):
    """torch is imported by the processes that use it (the toolchain probe, the judge, the cost process, the CPU peak,
    the workers), never by the review's or `opgate check`'s own: there it was seconds of CPU on every command for
    nothing (issue 40, a cold check's accounting)."""
    code = f"import json, sys; import {module}; print(json.dumps(sorted(sys.modules)))"
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert [m for m in json.loads(proc.stdout) if m == "torch" or m.startswith("torch.")] == []


def test_plan_lint_and_summary_run_without_torch_or_the_runner(tmp_path):
    repo = make_repo(tmp_path / "repo", ["deepgemm_tile"])
    repo.edit("kernels/deepgemm_tile/gemm_cpu.cpp", "#include", "// a comment\n#include")
    head = repo.commit("a comment")
    ledger = {"OPGATE_DATABASE_URL": str(tmp_path / "ledger.sqlite")}
    plan = ["review", "--plan", "--repo", str(repo.path), "--base", repo.base, "--head", head]
    assert _loaded(plan, repo.path, ledger) == []
    assert _loaded(["lint", str(repo.path)], repo.path, ledger) == []
    assert _loaded(["summary", "--out-dir", str(tmp_path / "summary")], repo.path, ledger) == []


def test_the_code_inside_the_sandbox_imports_nothing_of_opgate():
    """worker.py, costrun.py, entry.py, protocol.py and confine.py are the only files bound into the sandbox: they
    stand alone."""
    zygote = (BOT / "untrusted" / "runner" / "zygote.py").read_text()
    assert 'WORKER_FILES = ("worker.py", "entry.py", "protocol.py", "confine.py")' in zygote
    cost = (BOT / "untrusted" / "runner" / "cost.py").read_text()
    assert 'COST_FILES = ("costrun.py", "entry.py", "protocol.py")' in cost
    for name in ("worker.py", "costrun.py", "entry.py", "protocol.py", "confine.py"):
        assert _imports(BOT / "untrusted" / "runner" / name) == [], name


# tests/README.md, "Modules without a file of their own": the one list of the modules of bot/ that have no
# tests/test_<module>.py, each with its kind and where it is tested instead.
KINDS = {
    "no logic": "holds no logic of its own",
    "moves later": "to do: its tests are still in a file another change holds",
    "to do": "to do: holds logic and has no direct test yet",
}
README = ROOT / "tests" / "README.md"


def _unnamed_table() -> dict[str, tuple[str, list[str]]]:
    """Module path -> (kind, the test files its row names), read from the README's table."""
    text = README.read_text()
    section = text.split("## Modules without a file of their own", 1)[1].split("\n## ", 1)[0]
    rows: dict[str, tuple[str, list[str]]] = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or not cells[0].startswith("`bot/"):
            continue
        module, kind, where = cells
        assert module.strip("`") not in rows, f"{module} is listed twice"
        rows[module.strip("`")] = (kind, re.findall(r"`(test_\w+\.py)`", where))
    return rows


def _named_files(path: Path, shared: set[str]) -> list[str]:
    """The test files named after a module: test_<folder>_<name>.py, or test_<name>.py; a package's
    __init__.py and __main__.py are tested in test_<package>.py."""
    folder, name = path.parent.name, path.stem
    if name in ("__init__", "__main__"):
        return [f"test_{folder}.py"]
    return [f"test_{folder}_{name}.py"] + ([f"test_{name}.py"] if name not in shared else [])


def test_every_module_has_its_test_file_or_is_on_the_readmes_list():
    tests = {p.name for p in (ROOT / "tests").glob("test_*.py")}
    modules = sorted(BOT.rglob("*.py"))
    names = [p.stem for p in modules if p.stem not in ("__init__", "__main__")]
    shared = {n for n in names if names.count(n) > 1}
    table = _unnamed_table()
    assert table, "tests/README.md has no table of modules without a file of their own"
    missing, stale = [], []
    bare: dict[str, list[str]] = {}  # a shared name's test_<name>.py -> the unlisted modules it may stand for
    for path in modules:
        module = path.relative_to(ROOT).as_posix()
        named = [f for f in _named_files(path, shared) if f in tests]
        if path.stem in shared and not named and f"test_{path.stem}.py" in tests and module not in table:
            bare.setdefault(f"test_{path.stem}.py", []).append(module)
            continue
        if named and module in table:
            stale.append(f"{module} has {named[0]}: take it off the list")
        elif not named and module not in table:
            missing.append(module)
    assert not missing, f"no tests/test_<module>.py and not on tests/README.md's list: {missing}"
    assert not stale, stale
    ambiguous = {f: ms for f, ms in bare.items() if len(ms) > 1}
    assert not ambiguous, (
        f"one test file named after several modules; name the others test_<folder>_<name>.py: {ambiguous}"
    )
    for module, (kind, where) in table.items():
        assert (ROOT / module).is_file(), f"tests/README.md lists {module}, which does not exist"
        assert kind in KINDS, f"{module}: kind {kind!r} is none of {sorted(KINDS)}"
        assert where, f"{module}: the row names no test file where it is tested"
        assert all(f in tests for f in where), f"{module}: {[f for f in where if f not in tests]} do not exist"


def test_a_modules_test_file_is_named_after_its_folder_and_name_and_a_shared_name_needs_the_folder():
    shared = {"store"}
    assert _named_files(Path("bot/ledger/store.py"), shared) == ["test_ledger_store.py"]
    assert _named_files(Path("bot/verdict/gate.py"), shared) == ["test_verdict_gate.py", "test_gate.py"]
    assert _named_files(Path("scripts/gpucheck/__main__.py"), shared) == ["test_gpucheck.py"]
