"""The README and .env.example stay true: every variable, every command, every exit code."""

from __future__ import annotations

import argparse
from pathlib import Path

from bot.cli import EXIT_CODES, _parser
from bot.settings import VARIABLES
from tests.conftest import REPO_CONFIG

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
ENV_EXAMPLE = (ROOT / ".env.example").read_text()


def _subcommands(parser: argparse.ArgumentParser, prefix: str = "") -> dict[str, argparse.ArgumentParser]:
    found = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                found[f"{prefix}{name}"] = sub
                found.update(_subcommands(sub, f"{prefix}{name} "))
    return found


def _instances(name: str) -> list[str]:
    """A variable, or for a per-domain pattern its name for each of this repository's configured domains."""
    if name == "<DOMAIN KEY>":
        return [REPO_CONFIG.key_variable(d) for d in REPO_CONFIG.domains]
    if "<DOMAIN>" in name:
        return [name.replace("<DOMAIN>", d.upper()) for d in REPO_CONFIG.domains]
    return [name]


def test_every_variable_is_documented_and_in_the_env_example():
    for name in VARIABLES:
        assert f"`{name}`" in README, f"{name} missing from the README's configuration table"
        for instance in _instances(name):
            assert f"\n{instance}=" in ENV_EXAMPLE, f"{instance} missing from .env.example"


def test_every_command_has_help_and_is_in_the_readme():
    commands = _subcommands(_parser())
    assert {"review", "ledger", "ledger export"} <= set(commands)
    for name, sub in commands.items():
        assert sub.description, f"`opgate {name}` has no help text"
        assert f"opgate {name}" in README, f"`opgate {name}` is not in the README"
        assert EXIT_CODES in sub.format_help(), f"`opgate {name} --help` does not list the exit codes"
    assert EXIT_CODES in _parser().format_help()


def test_the_readme_quick_start_commands_exist():
    for script in ("scripts/demo.sh", "scripts/test.sh"):
        assert f"./{script}" in README
        assert (ROOT / script).stat().st_mode & 0o111
    assert "scripts/test.sh" in (ROOT / ".ci" / "run").read_text()
