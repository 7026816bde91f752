"""The plan of the house holds (ARCHITECTURE.md): rooms import only the rooms below them, and the cheap commands
load neither torch nor anything that compiles or runs pull-request code."""

from __future__ import annotations

import ast
import json
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
    "text": {"errors"},
    "models": {"errors"},
    "config": {"errors", "text", "models"},
    "verdict": FOUNDATION,
    "present": FOUNDATION | {"verdict"},
    "untrusted": FOUNDATION | {"verdict"},
    "ledger": FOUNDATION,
    "spend": FOUNDATION | {"ledger"},
    "agent": FOUNDATION | {"ledger", "spend"},
    "edges": FOUNDATION | {"verdict", "present", "ledger", "spend"},
    "review": FOUNDATION | {"verdict", "present", "untrusted", "ledger", "spend", "agent", "edges"},
    "mainline": FOUNDATION | {"verdict", "present", "ledger", "edges", "review"},
    "dashboard": FOUNDATION | {"verdict", "ledger", "spend", "mainline"},
    "tune": FOUNDATION | {"verdict", "present", "untrusted", "ledger", "spend", "agent", "edges", "review"},
    "lint": FOUNDATION | {"agent", "verdict"},
    "gpucheck": FOUNDATION | {"verdict", "present", "untrusted"},
    "commands": FOUNDATION
    | {"verdict", "present", "ledger", "spend", "agent", "edges", "review", "mainline", "dashboard", "tune", "lint"},
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
    """worker.py, costrun.py, protocol.py and confine.py are the only files bound into the sandbox: they stand alone."""
    judge = (BOT / "untrusted" / "runner" / "judge.py").read_text()
    assert 'WORKER_FILES = ("worker.py", "protocol.py", "confine.py")' in judge
    for name in ("worker.py", "costrun.py", "protocol.py", "confine.py"):
        assert _imports(BOT / "untrusted" / "runner" / name) == [], name
