"""The `opgate` command line as people expect it: --verbose, NO_COLOR, one JSON flag, --create-ledger only where
the ledger is written, argparse's public API only."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest

from bot.cli import COMMANDS, main, parser, subcommands
from bot.present import progress

ROOT = Path(__file__).resolve().parent.parent
WRITERS = {"review", "accept", "tune", "history record"}


def test_verbose_logs_debug_lines_and_the_default_does_not(opgate, tmp_path: Path) -> None:
    """A fresh ledger's migrations are logged at debug level: seen with --verbose only, before or after the name."""

    def summary(name: str, before: tuple[str, ...] = (), after: tuple[str, ...] = ()):
        env = {"OPGATE_DATABASE_URL": str(tmp_path / f"{name}.sqlite")}  # each run migrates its own new ledger
        return opgate(*before, "summary", "--out-dir", str(tmp_path / name), *after, env=env)

    plain, after, before = summary("plain"), summary("after", after=("--verbose",)), summary("before", before=("-v",))
    assert plain.code == after.code == before.code == 0, after.stderr
    for run in (after, before):
        assert re.search(r"migration \S+ applied", run.stderr), run.stderr
    assert "migration" not in plain.stderr


def test_verbose_sets_the_root_logger_to_debug_and_masks_secrets(monkeypatch, capsys) -> None:
    import logging

    monkeypatch.setenv("GITHUB_TOKEN", "ghs_verboseSecret0123456789abcdef")
    main(["lint", "--verbose", "--json", str(ROOT / "opgate.toml")])
    assert logging.getLogger().level == logging.DEBUG
    logging.getLogger("opgate.test").debug("token %s", "ghs_verboseSecret0123456789abcdef")
    err = capsys.readouterr().err
    assert "token " in err and "ghs_verboseSecret0123456789abcdef" not in err
    main(["lint", "--json", str(ROOT / "opgate.toml")])  # without --verbose: logging left as it was
    capsys.readouterr()


def test_quiet_and_verbose_together_is_bad_input(capsys) -> None:
    for argv in (["-q", "-v", "lint"], ["-q", "lint", "--verbose"], ["lint", "-v", "--quiet"]):
        with pytest.raises(SystemExit) as exc:
            main(argv)
        assert exc.value.code == 2 and "-q/--quiet and -v/--verbose exclude each other" in capsys.readouterr().err


@pytest.mark.parametrize(("value", "colour"), [("1", False), ("", True), (None, True)])
def test_no_color_set_and_not_empty_turns_colour_off(monkeypatch, value: str | None, colour: bool) -> None:
    if value is None:
        monkeypatch.delenv("NO_COLOR", raising=False)
    else:
        monkeypatch.setenv("NO_COLOR", value)
    out = io.StringIO()
    console = progress.console(file=out, force_terminal=True, color_system="standard")
    console.print("building", style="bold cyan", markup=False, highlight=False)
    text = out.getvalue()
    assert "building" in text and "\x1b[1" in text  # bold is not colour: it stays
    assert bool(re.search(r"\x1b\[[0-9;]*3[0-7]m|\x1b\[1;3[0-7]m", text)) is colour


def test_lint_asks_for_json_with_json_and_its_format_flag_is_a_deprecated_alias(capsys) -> None:
    config = str(ROOT / "opgate.toml")
    code = main(["lint", "--json", config])
    new = capsys.readouterr()
    assert main(["lint", "--format", "json", config]) == code
    old = capsys.readouterr()
    assert json.loads(new.out) == json.loads(old.out) and "deprecated" not in new.err
    assert "--format json is deprecated; use --json" in old.err


def test_create_ledger_is_offered_by_the_commands_that_write_the_ledger_only() -> None:
    for name, sub in subcommands().items():
        offered = "--create-ledger" in sub.format_help()
        assert offered is (name in WRITERS), name
    assert "--create-ledger" not in parser().format_help()


def test_every_command_is_registered_once() -> None:
    names = [n for n in subcommands() if " " not in n]
    assert sorted(names) == sorted(COMMANDS) and len(names) == len(set(names))


def test_no_private_argparse_api() -> None:
    private = re.compile(r"argparse\._|\._actions\b|_add_container_actions|_option_string_actions|_SubParsersAction")
    for path in [*sorted((ROOT / "bot").rglob("*.py")), *sorted((ROOT / "tests").glob("*.py"))]:
        if path.name == "test_cli.py":
            continue
        assert not private.search(path.read_text()), f"{path.relative_to(ROOT)} uses argparse's private API"


def test_every_json_output_is_a_models_dump_not_a_hand_built_dict() -> None:
    """`--json` prints a pydantic model (bot/models/output.py, bot/lint/output.py): no command dumps a dict itself."""
    root = Path(__file__).resolve().parents[1]
    for path in [*sorted((root / "bot" / "commands").glob("*.py")), root / "bot" / "lint" / "output.py"]:
        source = path.read_text()
        assert "print(json.dumps(" not in source and "return json.dumps(" not in source, path.name
    from bot.models.output import ExportOutput, SlashOutput

    assert json.loads(ExportOutput(rows=2, csv="t.csv").text()) == {"rows": 2, "csv": "t.csv"}
    ignored = SlashOutput(ignored="a bot", granted=None, posted=False)
    assert json.loads(ignored.model_dump_json(exclude_unset=True)) == {
        "ignored": "a bot",
        "granted": None,
        "posted": False,
    }
