"""Untrusted text cannot start a GitHub Actions workflow command or rewrite a log line."""

from __future__ import annotations

import pytest

from bot.safe import log_safe, one_line


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
