"""The README, docs/ and .env.example stay true: every variable, every command, every exit code, every page."""

from __future__ import annotations

import re
from pathlib import Path

from bot.cli import EXIT_CODES, parser, subcommands
from bot.config.settings import VARIABLES
from tests.conftest import REPO_CONFIG

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
PAGES = sorted((ROOT / "docs").glob("*.md"))
DOCS = "\n".join(p.read_text() for p in PAGES)
CONFIGURATION = (ROOT / "docs" / "configuration.md").read_text()
CLI = (ROOT / "docs" / "cli.md").read_text()
ARCHITECTURE = (ROOT / "ARCHITECTURE.md").read_text()
ENV_EXAMPLE = (ROOT / ".env.example").read_text()
README_LIMIT = 15 * 1024  # an adopting team reads it in minutes; the reference lives in docs/


def _instances(name: str) -> list[str]:
    """A variable, or for a per-domain pattern its name for each of this repository's configured domains."""
    if name == "<DOMAIN KEY>":
        return [REPO_CONFIG.key_variable(d) for d in REPO_CONFIG.domains]
    if "<DOMAIN>" in name:
        return [name.replace("<DOMAIN>", d.upper()) for d in REPO_CONFIG.domains]
    return [name]


def test_every_variable_is_documented_and_in_the_env_example():
    for name in VARIABLES:
        assert f"`{name}`" in CONFIGURATION, f"{name} missing from docs/configuration.md's table"
        for instance in _instances(name):
            assert f"\n{instance}=" in ENV_EXAMPLE, f"{instance} missing from .env.example"


def test_every_command_and_flag_has_help_and_is_in_the_cli_reference():
    commands = subcommands()
    assert {"review", "ledger", "ledger export"} <= set(commands)
    for name, sub in commands.items():
        assert sub.description, f"`opgate {name}` has no help text"
        assert f"opgate {name}" in CLI, f"`opgate {name}` is not in docs/cli.md"
        assert EXIT_CODES in sub.format_help(), f"`opgate {name} --help` does not list the exit codes"
        for flag in set(re.findall(r"(?<![\w-])--[a-z][\w-]*", sub.format_help())):  # each option is in the help
            if flag not in ("--help", "--quiet", "--verbose", "--json", "--create-ledger"):
                documented = re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", CLI)
                assert documented, f"`opgate {name} {flag}` is not in docs/cli.md"
    assert EXIT_CODES in parser().format_help()


def test_the_readme_quick_start_commands_exist():
    for script in ("scripts/demo.sh", "scripts/test.sh"):
        assert f"./{script}" in README
        assert (ROOT / script).stat().st_mode & 0o111
    assert "scripts/test.sh" in (ROOT / ".ci" / "run").read_text()


def test_the_readme_is_short_and_every_docs_page_is_reachable_from_it():
    assert len(README.encode()) <= README_LIMIT, f"README.md is {len(README.encode()):,} bytes"
    for page in PAGES:
        assert f"(docs/{page.name})" in README, f"docs/{page.name} is not linked from the README"
    assert "(ARCHITECTURE.md)" in README


def test_every_relative_link_in_the_docs_points_at_a_file():
    for path in [ROOT / "README.md", ROOT / "ARCHITECTURE.md", *PAGES]:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", path.read_text()):
            if not target.startswith(("http://", "https://", "mailto:")):
                assert (path.parent / target).exists(), f"{path.name}: a link to {target}, which does not exist"


def test_no_link_in_the_docs_leads_outside_the_repository():
    """A reader of a clone, or of the repository on GitHub, can follow every relative link."""
    for path in [ROOT / "README.md", ROOT / "ARCHITECTURE.md", *PAGES]:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", path.read_text()):
            if not target.startswith(("http://", "https://", "mailto:")):
                where = (path.parent / target).resolve()
                assert where.is_relative_to(ROOT), f"{path.name}: a link to {target}, outside the repository"


def test_the_architecture_code_map_names_every_room_of_bot():
    rooms = sorted(p.name for p in (ROOT / "bot").iterdir() if p.is_dir() and p.name != "__pycache__")
    for room in rooms:
        assert f"`bot/{room}/`" in ARCHITECTURE, f"ARCHITECTURE.md's code map does not name bot/{room}/"


def test_the_manifest_page_names_every_key_a_kernel_toml_may_hold():
    from bot.config import manifest_tables as m
    from bot.config.manifest import KernelManifest

    page = (ROOT / "docs" / "manifest.md").read_text()
    models = (KernelManifest, m.BuildSpec, m.ReferenceSpec, m.Constraints, m.OutputLimits, m.Launch, m.Case, m.Buffer)
    for model in (*models, m.LaunchFunction, m.AgentCases, m.AgentBound):
        for key in model.model_fields:
            named = re.search(rf"(?m)(^#?\s*{key}\s*=|`{key}`|\[\[?([\w.]+\.)?{key}[.\]])", page)
            assert named, f"docs/manifest.md does not name {model.__name__}'s key `{key}`"
