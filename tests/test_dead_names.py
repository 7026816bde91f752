"""scripts/dead_names.py: a module-level name of bot/ that nothing but tests reads fails the check (scripts/test.sh)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT


@pytest.fixture(scope="module")
def script() -> Any:
    spec = importlib.util.spec_from_file_location("opgate_dead_names", ROOT / "scripts" / "dead_names.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


def test_every_module_level_name_of_bot_is_read_outside_tests(script: Any, capsys: pytest.CaptureFixture[str]) -> None:
    assert script.main([]) == 0, capsys.readouterr().out


def _tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


def test_a_name_only_tests_read_is_dead_wherever_else_the_same_word_appears(script: Any, tmp_path: Path) -> None:
    root = _tree(
        tmp_path,
        {
            "pyproject.toml": '[project.scripts]\nopgate = "bot.cli:main"\n',
            "bot/__init__.py": "",
            "bot/cli.py": "def main() -> int:\n    return 0\n",  # an entry point
            "bot/agent/__init__.py": "",
            "bot/agent/run.py": (
                "def gather() -> list[str]:\n    return []\n\n\n"
                "def seen() -> list[str]:\n    return []\n\n\n"
                "def again(n: int) -> int:\n    return again(n - 1) if n else 0\n"  # read by itself alone
            ),
            "bot/tune/__init__.py": "",
            "bot/tune/loop.py": (
                "from bot.agent import run\n\n"
                "def step(search: object) -> object:\n    run.gather()\n    return search.seen\n"  # not run's seen
            ),
            "bot/runner/__init__.py": "",
            "bot/runner/protocol.py": "def recv() -> None:\n    pass\n",
            "bot/runner/worker.py": "import protocol\n\nprotocol.recv()\n",  # the sandbox's own sys.path
            "scripts/use.py": "from bot.tune.loop import step\n",
            "tests/test_run.py": "from bot.agent.run import again, seen\n",
        },
    )
    assert sorted(d.name for d in script.dead(root)) == ["again", "seen"]


def test_an_allowed_entry_that_matches_no_unread_name_fails(
    script: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(script.ALLOWED, "bot.verdict.gate:gone", "removed long ago")
    monkeypatch.setitem(script.ALLOWED, "bot.verdict.gate:kernel_verdict", "read by bot/verdict/kernel.py")
    assert script.main([]) == 1
    out = capsys.readouterr().out
    assert "ALLOWED entry 'bot.verdict.gate:gone' matches no unread name (gone, or read now)" in out
    assert "ALLOWED entry 'bot.verdict.gate:kernel_verdict' matches no unread name" in out
