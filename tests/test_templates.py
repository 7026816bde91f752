"""bot.templates: the templates folder and the one way a Jinja environment over it is set up."""

from __future__ import annotations

import ast
from pathlib import Path

import jinja2
import pytest
from bot.templates import environment

from tests.conftest import ROOT


def _makes_an_environment(path: Path) -> bool:
    """Whether the module calls jinja2.Environment (or a bare `Environment` imported from jinja2) itself."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call):
            f = node.func
            if isinstance(f, ast.Attribute) and f.attr == "Environment" and ast.unparse(f.value) == "jinja2":
                return True
            if isinstance(f, ast.Name) and f.id == "Environment":
                return True
    return False


def test_only_bot_templates_sets_up_a_jinja_environment():
    """The comment, the prompts, `opgate init` and the dashboard each ask bot.templates.environment, passing only
    what differs; none repeats the settings they share."""
    makers = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "bot").rglob("*.py") if _makes_an_environment(p))
    assert makers == []
    assert _makes_an_environment(ROOT / "templates" / "__init__.py")


def test_the_environment_is_strict_and_leaves_no_blank_line_for_a_block_tag(tmp_path):
    (tmp_path / "t.j2").write_text("{% if on %}\n  {% for x in xs %}\n{{ x }}\n  {% endfor %}\n{% endif %}\n")
    env = environment(tmp_path)
    assert env.get_template("t.j2").render(on=True, xs=["a", "<b>"]) == "a\n<b>\n"
    with pytest.raises(jinja2.UndefinedError):
        env.get_template("t.j2").render(on=True)


def test_the_parameters_are_what_differs(tmp_path):
    (tmp_path / "t.j2").write_text("{{ v }}\n")
    assert environment(tmp_path).get_template("t.j2").render(v="<b>") == "<b>\n"
    html = environment(tmp_path, autoescape=True, keep_trailing_newline=False)
    assert html.get_template("t.j2").render(v="<b>") == "&lt;b&gt;"
    marked = environment(tmp_path, finalize=lambda v: f"[{v}]", extensions=["jinja2.ext.i18n"])
    assert marked.get_template("t.j2").render(v="x") == "[x]\n"
    assert "jinja2.ext.InternationalizationExtension" in marked.extensions
