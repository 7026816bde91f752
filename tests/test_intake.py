"""bot/commands/intake.py: the event read once for /accept and /tune, and the command or why it is ignored."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bot.commands import accept, tune
from bot.commands.intake import intake
from bot.errors import InputError
from tests.github_server import load_fixture


def _event(tmp_path: Path, body: str, *, action: str = "created", login: str = "maint-bob") -> Path:
    event = load_fixture("issue_comment.created.json")
    event["action"] = action
    event["comment"]["body"] = body
    event["comment"]["user"]["login"] = event["sender"]["login"] = login
    event["comment"]["user"]["type"] = event["sender"]["type"] = "Bot" if login.endswith("[bot]") else "User"
    path = tmp_path / "event.json"
    path.write_text(json.dumps(event))
    return path


def test_the_command_on_the_first_line_is_read_for_the_command_asked(tmp_path):
    got = intake(_event(tmp_path, "/tune softmax\nplease"), tune.SLASH)
    assert got.ignored is None
    assert got.command.line == "/tune softmax"
    assert got.event.comment.user.login == "maint-bob"


@pytest.mark.parametrize(
    ("body", "action", "login", "why"),
    [
        ("/accept softmax", "edited", "maint-bob", "comment edited, not created: only new comments are commands"),
        ("/accept softmax", "created", "opgate[bot]", "comment by the bot account opgate[bot]"),
        ("/tune softmax", "created", "maint-bob", "no /accept command on the comment's first line"),
        ("thanks\n/accept softmax", "created", "maint-bob", "no /accept command on the comment's first line"),
    ],
)
def test_a_comment_not_ours_to_answer_says_why_and_is_not_parsed(tmp_path, body, action, login, why):
    got = intake(_event(tmp_path, body, action=action, login=login), accept.SLASH)
    assert (got.command, got.ignored) == (None, why)


def test_a_file_that_is_not_an_issue_comment_event_is_an_input_error(tmp_path):
    path = tmp_path / "event.json"
    path.write_text(json.dumps({"action": "created"}))
    with pytest.raises(InputError):
        intake(path, accept.SLASH)
