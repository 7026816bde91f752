"""Reading a report.json written before schema /3 (bot/models/before3.py): each English field beside its phrase is
read as the one phrase; an English line with no phrase beside it is read as written, never dropped or guessed."""

from __future__ import annotations

from bot.models.before3 import phrase_of, phrases_of, speedup_read
from bot.models.finding import Phrase

OFFLINE = {"key": "agent.offline", "params": {}, "phrases": {}}


def test_a_field_and_its_phrase_read_as_the_phrase_and_a_field_alone_as_written():
    assert phrase_of({"reason": "--offline given", "why": OFFLINE}, "reason") == {"reason": OFFLINE}
    assert phrase_of({"reason": "asked elsewhere", "why": None}, "reason") == {
        "reason": Phrase.as_written("asked elsewhere")
    }
    assert phrase_of({"reason": "", "why": None}, "reason") == {}  # "" said nothing
    assert phrase_of({"note": "", "why": None}, "note", empty=True) == {"note": Phrase.as_written("")}
    now = {"reason": OFFLINE}  # a /3 report: left as it is
    assert phrase_of(now, "reason") == now


def test_lines_read_as_their_phrases_only_when_each_line_has_one():
    said = [{"key": "launch.unused", "params": {}, "phrases": {}}]
    assert phrases_of({"launch_notes": ["x"], "launch_notes_why": said}, "launch_notes", "launch_notes_why") == {
        "launch_notes": said
    }
    two = phrases_of({"launch_notes": ["x", "y"], "launch_notes_why": said}, "launch_notes", "launch_notes_why")
    assert two == {"launch_notes": [Phrase.as_written("x"), Phrase.as_written("y")]}  # one phrase for two lines


def test_how_a_speedup_was_read_becomes_its_message():
    assert speedup_read("speedup ×1.25 read as a p50 change") == Phrase(
        key="expect.speedup_read", params={"speedup": "1.25"}
    )
    assert speedup_read("speedup of 1.25") is None
