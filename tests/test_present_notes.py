"""The text of opgate's pull-request review and the comment's pointer to it (bot/present/notes.py)."""

from __future__ import annotations

from bot.models.agent_report import AgentReport, InlineNote
from bot.present.notes import notes_marker, review_body, review_notes
from bot.present.render import render_comment
from tests import comment_reports as cr
from tests.test_review_notes import PATH, _report


def test_the_comment_keeps_the_notes_without_a_line_and_points_at_the_placed_ones():
    text = render_comment(_report(["gemm.cu:13: the tail loop skips the last row", "gemm.cu:200 reads past the end"]))
    assert "risk: gemm.cu:200 reads past the end" in text
    assert "the tail loop skips the last row" not in text
    assert f"1 risk note(s) on the lines they name, in opgate's review of this head: `{PATH}:13`" in text


def test_notes_on_one_line_become_one_comment_and_agent_text_stays_text():
    r = cr.fail_latency()
    notes = [InlineNote(path=PATH, line=13, note="<img src=x> one"), InlineNote(path=PATH, line=13, note="two")]
    a = AgentReport(status="ok", domain="deepgemm", kernel="deepgemm_tile", inline_notes=notes)
    (note,) = review_notes(r.model_copy(update={"agents": [a]}))
    assert (note.path, note.line) == (PATH, 13)
    assert "one" in note.body and "two" in note.body and "<img" not in note.body


def test_the_review_body_starts_with_the_heads_marker():
    body = review_body(cr.HEAD, 2)
    assert body.startswith(notes_marker(cr.HEAD)) and "2 risk note(s)" in body


def test_in_chinese_the_notes_line_and_the_review_speak_the_locale():
    from bot.text.i18n import english_runs, speaking

    with speaking("zh-CN"):
        text = render_comment(_report(["gemm.cu:13: the tail loop skips the last row"]))
    assert f"1 条风险提示标注在其所指的行上，见 opgate 对此 head 的审查： `{PATH}:13`" in text
    with speaking("zh-CN"):
        body = review_body(cr.HEAD, 2)
    assert body.startswith(notes_marker(cr.HEAD)) and "agent 的 2 条风险提示" in body and english_runs(body) == []
