"""The agent's risk notes where they belong: a note that names a file and a line inside the diff becomes one inline
comment of opgate's pull-request review of the head (bot/review/notes.py places it, bot/edges/github.py posts it to
the local GitHub server), edited or replaced on a re-run, never a person's; any other note stays in the comment."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from bot.edges.github import GitHubEdge
from bot.edges.publish import post_notes
from bot.models.agent_report import AgentReport
from bot.models.diff import FileChange
from bot.models.report import Report
from bot.present.notes import notes_marker
from bot.review.notes import head_lines, place, place_notes
from tests import comment_reports as cr
from tests.github_server import FakeGitHub

REPO = "octo-org/kernels"
TOKEN = "ghs_notesTestToken0123456789abcdef"
BOT = "opgate[bot]"
PATH = "kernels/deepgemm_tile/gemm.cu"
# head's lines 10..16 are shown: 10-12 context, 13-14 added, 15-16 context (12 and 13 of base removed)
PATCH = "@@ -10,7 +10,7 @@ void gemm()\n ctx10\n ctx11\n ctx12\n-old13\n-old14\n+new13\n+new14\n ctx15\n ctx16"
DIFF = f"diff --git a/{PATH} b/{PATH}\n--- a/{PATH}\n+++ b/{PATH}\n{PATCH}\n"
CHANGES = [FileChange(path=PATH, added=2, removed=2, diff=DIFF)]


def test_the_lines_a_review_comment_may_sit_on_are_heads_shown_lines():
    assert head_lines(CHANGES[0]) == set(range(10, 17))


@pytest.mark.parametrize(
    "note",
    [
        f"{PATH}:13 reads one row past the tile when m % 16 == 15",
        "gemm.cu:13: the tail loop skips the last row",
        "in gemm.cu line 13 the tail loop skips the last row",
        "gemm.cu (line 13): the tail loop skips the last row",
    ],
)
def test_a_note_naming_a_diff_line_is_placed_on_it(note):
    placed = place(note, CHANGES)
    assert placed is not None and (placed.path, placed.line, placed.note) == (PATH, 13, note)


@pytest.mark.parametrize(
    "note",
    [
        "the tile size doubles shared memory",  # no line
        "gemm.cu:200 reads past the end",  # a line outside every hunk
        "other.cu:13 is wrong",  # a file the diff does not change
        "version 1.2 of gemm.cu",  # no line named
    ],
)
def test_a_note_without_a_diff_line_is_not_placed(note):
    assert place(note, CHANGES) is None


def _report(notes: list[str], head: str = cr.HEAD) -> Report:
    r = cr.fail_latency()
    agent = AgentReport(
        status="ok",
        domain="deepgemm",
        kernel="deepgemm_tile",
        risk_notes=notes,
        inline_notes=place_notes(notes, CHANGES),
    )
    return r.model_copy(update={"agents": [agent], "agent": agent, "pr": 7, "head_sha": head})


@pytest.fixture
def server() -> Iterator[FakeGitHub]:
    with FakeGitHub(TOKEN, bot_login=BOT) as gh:
        gh.add_repo(REPO)
        gh.add_pull(REPO, number=7, head_sha=cr.HEAD, base_sha=cr.BASE, files=[{"filename": PATH, "patch": PATCH}])
        yield gh


@pytest.fixture
def edge(server: FakeGitHub) -> Iterator[GitHubEdge]:
    with GitHubEdge(server.base_url, TOKEN, REPO, retries=1, backoff_s=0.01, bot_login=BOT) as e:
        yield e


def _mine(server: FakeGitHub) -> list[dict]:
    return [r for r in server.reviews(REPO, 7) if r["user"]["login"] == BOT]


def test_a_note_naming_a_diff_line_becomes_one_inline_review_comment(server, edge):
    ref = post_notes(edge, 7, _report(["gemm.cu:13: the tail loop skips the last row", "no line here"]))
    assert ref is not None and ref.created and ref.comments == 1
    (review,) = server.reviews(REPO, 7)
    assert review["commit_id"] == cr.HEAD and review["state"] == "COMMENTED"
    assert review["body"].startswith(notes_marker(cr.HEAD))
    (comment,) = review["comments"]
    assert (comment["path"], comment["line"], comment["side"]) == (PATH, 13, "RIGHT")
    assert "the tail loop skips the last row" in comment["body"] and "no line here" not in comment["body"]
    create = [r for r in server.requests if r.method == "POST" and r.path.endswith("/pulls/7/reviews")]
    assert create[0].body["event"] == "COMMENT" and create[0].body["commit_id"] == cr.HEAD


def test_a_rerun_on_the_same_lines_edits_the_comment_in_place(server, edge):
    post_notes(edge, 7, _report(["gemm.cu:13: the tail loop skips the last row"]))
    ref = post_notes(edge, 7, _report(["gemm.cu:13: the tail loop skips the last two rows"]))
    assert ref is not None and not ref.created and ref.updated
    (review,) = server.reviews(REPO, 7)
    (comment,) = review["comments"]
    assert "the last two rows" in comment["body"]
    again = post_notes(edge, 7, _report(["gemm.cu:13: the tail loop skips the last two rows"]))
    assert again is not None and not again.updated  # nothing changed: no write
    assert [r.method for r in server.requests if r.is_write].count("PATCH") == 1


def test_a_rerun_on_other_lines_replaces_the_review_and_leaves_a_persons_alone(server, edge):
    person = server.add_review(REPO, 7, "looks odd", comments=[{"path": PATH, "line": 13, "body": "why?"}])
    post_notes(edge, 7, _report(["gemm.cu:13: the tail loop skips the last row"]))
    ref = post_notes(edge, 7, _report(["gemm.cu:15: the store is unguarded", "gemm.cu:16 too"]))
    assert ref is not None and ref.created and ref.replaced is not None and ref.comments == 2
    old, new = _mine(server)
    assert old["comments"] == [] and "replaced by a later run" in old["body"]
    assert sorted(c["line"] for c in new["comments"]) == [15, 16]
    theirs = next(r for r in server.reviews(REPO, 7) if r["id"] == person)
    assert theirs["body"] == "looks odd" and [c["body"] for c in theirs["comments"]] == ["why?"]
    # a run whose notes name no line clears opgate's comments of this head
    cleared = post_notes(edge, 7, _report(["nothing on a line"]))
    assert cleared is not None and cleared.id is None
    assert all(r["comments"] == [] for r in _mine(server))


def test_a_new_head_gets_its_own_review(server, edge):
    post_notes(edge, 7, _report(["gemm.cu:13: the tail loop skips the last row"]))
    other = "c3" * 20
    post_notes(edge, 7, _report(["gemm.cu:14: the same"], head=other))
    first, second = _mine(server)
    assert (first["commit_id"], len(first["comments"])) == (cr.HEAD, 1)  # the earlier head's review is its own
    assert (second["commit_id"], len(second["comments"])) == (other, 1)


def test_no_note_on_a_line_and_no_earlier_review_writes_nothing(server, edge):
    assert post_notes(edge, 7, _report(["no line here"])) is not None
    assert server.writes() == []


def test_a_review_no_agent_answered_makes_no_call(server, edge):
    offline = cr.fail_latency().model_copy(update={"pr": 7})  # the agent offline: status "offline"
    assert post_notes(edge, 7, offline) is None
    assert server.requests == []


def test_a_line_github_refuses_is_a_warning_not_a_failed_publish(server, edge, caplog):
    r = _report([])
    bad = AgentReport.model_validate(
        {**r.agents[0].model_dump(), "inline_notes": [{"path": PATH, "line": 99, "note": "x"}]}
    )
    with caplog.at_level(logging.WARNING):
        assert post_notes(edge, 7, r.model_copy(update={"agents": [bad]})) is None
    assert "inline notes on #7 were not posted" in caplog.text and "Line could not be resolved" in caplog.text
