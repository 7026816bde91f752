"""Webhook events as opgate reads them (bot/edges/events.py): our fixtures, and GitHub's own recorded payloads
(octokit/webhooks, tests/fixtures/github/octokit/SOURCE.md) where they differ from ours: a pull request whose fork
was deleted (`head.repo: null`), a bot's comment, edited and deleted comments, a comment on an issue, a pull request
without a body."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from bot.edges.events import load_pull_request_event, parse_issue_comment_event, parse_pull_request_event
from bot.edges.publish import skip_reason
from tests.github_server import FIXTURES, iter_fixture_names, load_fixture, write_event
from tests.test_workflows import PULL_EVENT, TRUST, fake_gh, run_script, script  # noqa: F401  (fake_gh: fixture)

RECORDED = FIXTURES / "octokit"

HEAD, BASE = "a1" * 20, "b2" * 20


def recorded(name: str) -> bytes:
    return (RECORDED / name).read_bytes()


def test_every_recorded_payload_parses() -> None:
    names = sorted(p.name for p in RECORDED.glob("*.json"))
    assert len(names) == 6
    for name in names:
        raw = recorded(name)
        if name.startswith("pull_request."):
            event = parse_pull_request_event(raw, name)
            data = json.loads(raw)
            assert (event.number, event.head_sha) == (data["number"], data["pull_request"]["head"]["sha"]), name
        else:
            comment = parse_issue_comment_event(raw, name)
            assert comment.comment.id == json.loads(raw)["comment"]["id"], name


def test_a_pull_request_whose_fork_was_deleted_is_read_and_held_back_as_a_fork(fake_gh: Path) -> None:  # noqa: F811
    data = json.loads(recorded("pull_request.synchronize.head-repo-deleted.json"))
    event = parse_pull_request_event(json.dumps(data).encode())
    assert data["pull_request"]["head"]["repo"] is None and skip_reason(event) is None
    # ${{ github.event.pull_request.head.repo.full_name }} of a null repo is "": the trust job sees a fork
    text, _ = script(*TRUST)
    head = data["pull_request"]["head"]["sha"]
    change = {"PR_HEAD_REPO": "", "PR_HEAD_SHA": head, "PR_NUMBER": str(event.number)}
    code, out, _, log = run_script(text, PULL_EVENT | change, fake_gh)
    assert code == 0 and out == {"run": "false"} and "comes from a fork" in log


@pytest.mark.parametrize(
    ("name", "says"),
    [
        ("issue_comment.created.by-bot.json", "ignored, comment by the bot account octocoders-linter[bot]"),
        ("issue_comment.edited.json", "ignored, comment edited, not created"),
        ("issue_comment.deleted.json", "ignored, comment deleted, not created"),
        ("issue_comment.created.json", "ignored, no /accept command on the comment's first line"),
    ],
)
def test_recorded_comments_that_are_not_commands_do_nothing(opgate, tmp_path: Path, name: str, says: str) -> None:
    """No GitHub variable is set: a run that tried to read or write GitHub would exit 2 instead."""
    event = tmp_path / name
    event.write_bytes(recorded(name))
    for command in (["accept", "--event", str(event), "--post"], ["tune", "--event", str(event), "--post"]):
        run = opgate(*command)
        assert run.code == 0, run.stderr
        assert says.replace("/accept", "/tune" if command[0] == "tune" else "/accept") in run.stdout, run.stdout


def test_a_recorded_bot_sender_is_a_bot_and_a_pull_request_without_a_body_is_reviewed() -> None:
    comment = parse_issue_comment_event(recorded("issue_comment.created.by-bot.json"))
    assert comment.sender.type == "Bot" and comment.comment.user.is_bot and comment.body == "/accept"
    opened = parse_pull_request_event(recorded("pull_request.opened.with-null-body.json"))
    assert opened.action == "opened" and skip_reason(opened) is None
    edited = json.loads(recorded("issue_comment.edited.json"))
    assert edited["changes"]["body"]["from"] != edited["comment"]["body"]  # the shape GitHub records an edit in


def test_event_fixtures(tmp_path: Path) -> None:
    names = list(iter_fixture_names())
    assert set(names) >= {
        "pull_request.opened.json",
        "pull_request.synchronize.json",
        "pull_request.draft.json",
        "issue_comment.created.json",
        "issue_comment.edited.json",
        "issue_comment.on_issue.json",
        "schedule.json",
    }
    subs = {"head_sha": HEAD, "base_sha": BASE, "before_sha": "c3" * 20}
    for name in names:
        assert not re.search(r"@[A-Z_]+@", json.dumps(load_fixture(name, **subs))), name

    for name, draft in [
        ("pull_request.opened.json", False),
        ("pull_request.synchronize.json", False),
        ("pull_request.draft.json", True),
    ]:
        event = load_pull_request_event(write_event(tmp_path, name, **subs))
        assert (event.number, event.head_sha, event.base_sha, event.pull_request.draft) == (42, HEAD, BASE, draft)
    assert load_fixture("pull_request.synchronize.json", **subs)["before"] == "c3" * 20

    created = load_fixture("issue_comment.created.json")
    edited = load_fixture("issue_comment.edited.json")
    on_issue = load_fixture("issue_comment.on_issue.json")
    assert "pull_request" in created["issue"] and "pull_request" in edited["issue"]
    assert "pull_request" not in on_issue["issue"]
    assert edited["changes"]["body"]["from"] != edited["comment"]["body"]
    assert load_fixture("schedule.json")["schedule"]
