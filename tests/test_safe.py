"""Untrusted text cannot start a GitHub Actions workflow command or rewrite a log line."""

from __future__ import annotations

import pytest

from bot.text.safe import LogSafeFormatter, code, fence, log_safe, one_line, untrusted
from tests.hostile import html, problems, table_breaks


@pytest.mark.parametrize(
    "hostile",
    [
        "::error title=forged::PASS",
        "  ::add-mask::x",
        "benign\n::set-output name=verdict::pass",
        "\t::stop-commands::tok",
        "##[error]legacy form",
        "ok\n  ##[group]x",
    ],
)
def test_no_line_can_start_a_workflow_command(hostile: str) -> None:
    for line in log_safe(hostile).splitlines():
        assert not line.lstrip().startswith(("::", "##["))


def test_carriage_returns_and_terminal_escapes_become_visible() -> None:
    assert log_safe("verdict FAIL\rverdict PASS") == "verdict FAIL\\rverdict PASS"
    assert log_safe("\x1b[2K\x1b[1Agone") == "\\e[2K\\e[1Agone"
    assert log_safe("abc\u202edcba") == "abc\\u202edcba"
    assert log_safe("nel\x85x") == "nel\\x85x"


def test_ordinary_text_is_unchanged() -> None:
    text = "build ok: 3 cases\n\tregisters 96, a::b is C++"
    assert log_safe(text) == text


def test_one_line_joins_and_truncates() -> None:
    assert one_line("a\nb\n::error::c") == "a | b | :\u200b:error::c"
    assert len(one_line("x" * 1000, limit=50)) == 50


# -- comment-safe -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "link",
    [
        "www.evil.example/x",
        "see WWW.evil.example",
        "HTTPS://evil.example/a",
        "Https://evil.example/b",
        "ftp://evil.example/c",
        "1https://evil.example/d",
        "<https://evil.example/e>",
        "[click](https://evil.example/f)",
        "[relative](/settings)",
        "![pixel](https://evil.example/p.gif)",
        "[ref][r] [r]: https://evil.example/g",
        "mail me@evil.example",
        "mailto:me@evil.example",
        "xmpp:me@evil.example",
    ],
)
def test_links_in_every_form_render_as_plain_text(link: str) -> None:
    out = untrusted(link)
    rendered = html(f"- {out}\n")
    assert "<a " not in rendered and "<img" not in rendered, rendered
    assert problems(f"- {out}\n") == []


@pytest.mark.parametrize("cell", ["a | b", "a \\| b", "a \\\\| b", "trailing \\", "\\|\\|"])
def test_a_pipe_in_any_escaping_cannot_end_a_table_cell(cell: str) -> None:
    for safe, wrap in ((untrusted, "{}"), (code, "`{}`")):
        table = "| name | verdict |\n|---|---|\n| " + wrap.format(safe(cell)) + " | pass |\n"
        assert table_breaks(table) == [], (safe.__name__, table)
        assert "<td>pass</td>" in html(table), (safe.__name__, html(table))


def test_an_escaped_pipe_shows_as_typed() -> None:
    assert "<td>a \\| b</td>" in html("| x |\n|---|\n| " + untrusted("a \\| b") + " |\n")


@pytest.mark.parametrize("text", ["# PASS", "> quoted", "- item", "1. first", "---", "~~~"])
def test_text_at_the_start_of_a_list_item_starts_no_block(text: str) -> None:
    rendered = html(f"- {untrusted(text)}\n")
    assert rendered.count("<li>") == 1
    assert not any(tag in rendered for tag in ("<h1>", "<blockquote>", "<ol>", "<hr", "<pre>")), rendered


def test_a_fence_cannot_be_closed_by_the_text_inside_it() -> None:
    log = "ok\n```\n<img src=x>\n````\n@team https://evil.example"
    rendered = html(f"```text\n{fence(log)}\n```\n")
    assert rendered.count("<pre") == 1 and "<img" not in rendered and "<a " not in rendered


def test_backticks_in_text_cannot_unpair_the_code_spans_around_it() -> None:
    line = f"- {untrusted('``` `x`')} model `{code('<img src=x>')}` key `{code('www.evil.example')}`\n"
    assert html(line).count("<code>") == 2 and problems(line) == []


def test_control_characters_are_visible_in_comments_too() -> None:
    assert untrusted("a\rb\x1b[2Kc\u202ed") == "a\\\\rb\\\\e\\[2Kc\\\\u202ed"
    assert code("a\rb") == "a\\rb" and fence("a\r\nb\x07") == "a\nb\\x07"


def test_every_log_line_of_opgate_is_log_safe() -> None:
    import logging

    record = logging.LogRecord("bot.x", logging.INFO, __file__, 1, "kernel %s ignored", ("x\n::error::forged\r",), None)
    line = LogSafeFormatter("opgate: %(message)s").format(record)
    assert line == "opgate: kernel x\n:\u200b:error::forged\\r ignored"
