"""GitHub's own recorded webhook payloads (octokit/webhooks, tests/fixtures/github/octokit/SOURCE.md) where they
differ from ours: a pull request whose fork was deleted (`head.repo: null`), a bot's comment, edited and deleted
comments, a comment on an issue, a pull request without a body."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bot.edges.events import parse_issue_comment_event, parse_pull_request_event
from bot.edges.github import GitHubEdge
from bot.edges.publish import skip_reason
from tests.github_server import FIXTURES, FakeGitHub
from tests.test_workflows import PULL_EVENT, TRUST, fake_gh, run_script, script  # noqa: F401  (fake_gh: fixture)

RECORDED = FIXTURES / "octokit"


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


def test_the_edge_reads_a_pull_request_whose_head_repository_is_gone() -> None:
    token, repo = "ghs_recordedEvents0123456789", "octo-org/kernels"
    with FakeGitHub(token) as gh:
        gh.add_repo(repo)
        n = gh.add_pull(repo, head_sha="a1" * 20, base_sha="b2" * 20, head_repo_deleted=True)
        with GitHubEdge(gh.base_url, token, repo, seconds_between_requests=None) as edge:
            info = edge.pull_request(n)
    assert info.head_repo is None and info.base_repo == "octo-org/kernels" and info.head_sha == "a1" * 20


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
