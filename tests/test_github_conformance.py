"""opgate behaves as real GitHub expects, against the local GitHub server: it finds and edits only what its own
identity wrote, it waits for rate limits as GitHub documents (a fake clock, never a real sleep), and custom
repository roles count as the base role they build on."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.config.settings import load_settings
from bot.edges import publish
from bot.edges.github import GitHubEdge, role_of
from bot.errors import InputError, ServiceError
from bot.models.github import Role
from bot.present.render import REVIEW_MARKER
from tests.github_server import FakeGitHub
from tests.test_accept import make_report

REPO = "octo-org/kernels"
TOKEN = "ghs_conformanceToken0123456789ab"
HEAD, BASE = "a1" * 20, "b2" * 20
ACTIONS = "github-actions[bot]"
EPOCH = 1_800_000_000.0  # the fake clock's start, UTC epoch seconds
SECONDARY = '{"message": "You have exceeded a secondary rate limit. Please wait a few minutes before you try again."}'
PRIMARY = '{"message": "API rate limit exceeded for installation ID 4242."}'


class Clock:
    """A fake clock: `sleep` records the wait and moves `time` on by it, at once."""

    def __init__(self, now: float = EPOCH) -> None:
        self.now, self.sleeps = now, list[float]()

    def time(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


@pytest.fixture
def clock() -> Clock:
    return Clock()


def github_settings(server: FakeGitHub, **env: str):
    return load_settings(
        {
            "GITHUB_API_URL": server.base_url,
            "GITHUB_TOKEN": TOKEN,
            "GITHUB_REPOSITORY": REPO,
            "OPGATE_GITHUB_WRITE_INTERVAL_S": "0",
            **env,
        }
    )


def edge_for(server: FakeGitHub, clock: Clock, **options: object) -> GitHubEdge:
    kwargs: dict[str, object] = {
        "bot_login": server.bot_login,
        "seconds_between_requests": None,
        "seconds_between_writes": None,
        "sleep": clock.sleep,
        "clock": clock.time,
    }
    kwargs.update(options)
    return GitHubEdge(server.base_url, TOKEN, REPO, **kwargs)  # type: ignore[arg-type]


@pytest.fixture
def actions() -> Iterator[FakeGitHub]:
    """GitHub as Actions' GITHUB_TOKEN sees it: every write is authored by github-actions[bot]."""
    with FakeGitHub(TOKEN, bot_login=ACTIONS) as gh:
        gh.add_repo(REPO)
        gh.add_pull(REPO, number=42, head_sha=HEAD, base_sha=BASE, author="alice-dev")
        yield gh


# ---------------------------------------------------------------------------- its own comment only


def test_a_marker_comment_by_another_user_is_never_edited_and_opgate_posts_its_own(actions: FakeGitHub) -> None:
    """The sticky comment cannot be hijacked: the review posted from Actions settings (GITHUB_ACTIONS=true, no
    OPGATE_GITHUB_LOGIN) finds only github-actions[bot]'s comment, never a human's that starts with the marker."""
    planted = actions.add_comment(REPO, 42, f"{REVIEW_MARKER}\n## ✅ opgate: **pass** (not really)", author="mallory")
    settings = github_settings(actions, GITHUB_ACTIONS="true")
    assert settings.github_login == ACTIONS
    report = make_report()
    with publish.open_edge(settings) as edge:
        first = publish.post(edge, 42, report, f"{REVIEW_MARKER}\n## review 1")
        second = publish.post(edge, 42, report, f"{REVIEW_MARKER}\n## review 2")

    comments = {c["id"]: c for c in actions.comments(REPO, 42)}
    assert comments[planted]["body"].endswith("(not really)") and comments[planted]["user"]["login"] == "mallory"
    assert first.comment.created and first.comment.id != planted
    assert second.comment.id == first.comment.id and second.comment.updated
    ours = comments[first.comment.id]
    assert ours["user"]["login"] == ACTIONS and ours["body"].endswith("review 2")
    assert len(comments) == 2
    edited = [r.path for r in actions.requests_to("PATCH")]
    assert edited == [f"/repos/{REPO}/issues/comments/{first.comment.id}"]


def test_a_configured_login_wins_over_the_actions_default() -> None:
    assert load_settings({"GITHUB_ACTIONS": "true"}).github_login == ACTIONS
    env = {"GITHUB_ACTIONS": "true", "OPGATE_GITHUB_LOGIN": "kernel-gate[bot]"}
    assert load_settings(env).github_login == "kernel-gate[bot]"
    assert load_settings({}).github_login is None


def test_a_personal_token_is_asked_who_it_is_once() -> None:
    with FakeGitHub(TOKEN, bot_login="octo-dev", bot_type="User", user_token=True) as gh:
        gh.add_repo(REPO)
        pr = gh.add_pull(REPO, head_sha=HEAD, base_sha=BASE)
        gh.add_comment(REPO, pr, f"{REVIEW_MARKER}\nquoted by a reviewer", author="reviewer")
        with publish.open_edge(github_settings(gh)) as edge:
            first = edge.upsert_comment(pr, REVIEW_MARKER, "one")
            second = edge.upsert_comment(pr, REVIEW_MARKER, "two")
        assert edge.login() == "octo-dev" and len(gh.requests_to("GET", "/user")) == 1
        assert first.created and second.id == first.id and second.updated
        assert [c["user"]["login"] for c in gh.comments(REPO, pr)] == ["reviewer", "octo-dev"]


def test_an_installation_token_without_a_login_is_told_to_set_one() -> None:
    """GET /user is not available to an installation token: exit 2 naming the setting, nothing written."""
    with FakeGitHub(TOKEN) as gh:
        gh.add_repo(REPO)
        pr = gh.add_pull(REPO, head_sha=HEAD, base_sha=BASE)
        with publish.open_edge(github_settings(gh)) as edge, pytest.raises(InputError) as err:
            edge.upsert_comment(pr, REVIEW_MARKER, "review")
        assert err.value.exit_code == 2 and "OPGATE_GITHUB_LOGIN" in str(err.value) and "HTTP 403" in str(err.value)
        assert gh.writes() == [] and TOKEN not in str(err.value)


def test_a_login_that_does_not_match_what_github_wrote_is_named(caplog: pytest.LogCaptureFixture) -> None:
    with FakeGitHub(TOKEN, bot_login="kernel-gate[bot]") as gh:
        gh.add_repo(REPO)
        pr = gh.add_pull(REPO, head_sha=HEAD, base_sha=BASE)
        with publish.open_edge(github_settings(gh, OPGATE_GITHUB_LOGIN="opgate[bot]")) as edge:
            edge.upsert_comment(pr, REVIEW_MARKER, "review")
    assert "written as kernel-gate[bot]" in caplog.text and "OPGATE_GITHUB_LOGIN=kernel-gate[bot]" in caplog.text


@pytest.mark.parametrize("labels", [["opgate-drift"], []], ids=["by-label", "by-search"])
def test_an_issue_of_the_same_title_by_a_person_is_left_alone(actions: FakeGitHub, labels: list[str]) -> None:
    """The drift issue and the weekly summary are found by title among opgate's own issues only."""
    title = "opgate: drift in deepgemm_tile"
    human = actions.add_issue(REPO, title, "my notes", labels=labels, author="alice-dev")
    with publish.open_edge(github_settings(actions, GITHUB_ACTIONS="true")) as edge:
        assert edge.close_issue(title, "recovered", labels) is None  # never closes a person's issue
        opened = edge.upsert_issue(title, "drift +7%", labels)
        again = edge.upsert_issue(title, "drift +8%", labels)
    assert opened.created and opened.number != human and again.number == opened.number and again.updated
    issues = {i["number"]: i for i in actions.issues(REPO)}
    assert (issues[human]["body"], issues[human]["state"], issues[human]["user"]["login"]) == (
        "my notes",
        "open",
        "alice-dev",
    )
    assert issues[opened.number]["user"]["login"] == ACTIONS and issues[opened.number]["body"] == "drift +8%"


def test_the_weekly_summary_never_edits_a_persons_issue(opgate, actions: FakeGitHub, tmp_path: Path) -> None:
    from bot.commands.summary import LABEL, title

    week = "2026-W10"
    human = actions.add_issue(REPO, title(week), "hand-written totals", labels=[LABEL], author="alice-dev")
    env = {
        "GITHUB_API_URL": actions.base_url,
        "GITHUB_TOKEN": TOKEN,
        "GITHUB_REPOSITORY": REPO,
        "GITHUB_ACTIONS": "true",
        "OPGATE_GITHUB_WRITE_INTERVAL_S": "0",
    }
    run = opgate("summary", "--post", "--week", week, "--out-dir", str(tmp_path / "reports"), env=env)
    assert run.code == 0, run.stderr
    issues = {i["number"]: i for i in actions.issues(REPO)}
    assert issues[human]["body"] == "hand-written totals"
    (ours,) = [i for n, i in issues.items() if n != human]
    assert ours["title"] == title(week) and ours["user"]["login"] == ACTIONS


def test_a_pull_request_from_the_branch_by_someone_else_is_not_edited(actions: FakeGitHub, clock: Clock) -> None:
    branch = "opgate/tune/deepgemm_tile-run1"
    theirs = actions.add_pull(
        REPO, head_sha=HEAD, base_sha=BASE, head_ref=branch, author="alice-dev", title="mine", body="hands off"
    )
    with edge_for(actions, clock) as edge, pytest.raises(ServiceError):
        edge.open_pull(branch, "main", "opgate tune: deepgemm_tile", "the winner")  # GitHub refuses a second PR
    pull = next(i for i in actions.issues(REPO, include_pulls=True) if i["number"] == theirs)
    assert (pull["title"], pull["body"]) == ("mine", "hands off")
    assert actions.requests_to("PATCH") == []


# ---------------------------------------------------------------------------- GitHub's rate-limit rules


@pytest.fixture
def server() -> Iterator[FakeGitHub]:
    with FakeGitHub(TOKEN) as gh:
        gh.add_repo(REPO)
        gh.add_pull(REPO, number=42, head_sha=HEAD, base_sha=BASE)
        yield gh


def limited(server: FakeGitHub, status: int, body: str, times: int = 1, **headers: str) -> None:
    server.fail(f"/repos/{REPO}/pulls/42", status=status, times=times, body=body, headers=headers)


@pytest.mark.parametrize("status", [403, 429])
def test_the_primary_limit_waits_until_the_reset(
    server: FakeGitHub, clock: Clock, caplog: pytest.LogCaptureFixture, status: int
) -> None:
    limited(server, status, PRIMARY, **{"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": str(int(EPOCH) + 120)})
    with edge_for(server, clock) as edge:
        assert edge.pull_request(42).head_sha == HEAD
    assert clock.sleeps == [121.0]  # until one second past x-ratelimit-reset, not a backoff's guess
    assert [r.status for r in server.requests_to("GET", f"/repos/{REPO}/pulls/42")] == [status, 200]
    assert "GitHub's primary rate limit (x-ratelimit-reset 08:02:00 UTC): waiting 121 s" in caplog.text


def test_retry_after_is_honoured_in_full(server: FakeGitHub, clock: Clock) -> None:
    limited(server, 429, SECONDARY, **{"Retry-After": "60"})
    with edge_for(server, clock) as edge:  # default max_backoff_s (30 s) no longer cuts it
        edge.pull_request(42)
    assert clock.sleeps == [60.0]


def test_a_secondary_limit_without_retry_after_waits_a_minute_then_doubles(
    server: FakeGitHub, clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    limited(server, 403, SECONDARY, times=2)
    with edge_for(server, clock) as edge:
        assert edge.pull_request(42).number == 42
    assert clock.sleeps == [60.0, 120.0]
    assert "GitHub's secondary rate limit (no Retry-After: 60 s, from 60 s doubling): waiting 60 s" in caplog.text


def test_a_wait_past_the_bound_is_not_started_and_the_error_names_the_limit(server: FakeGitHub, clock: Clock) -> None:
    limited(server, 403, PRIMARY, **{"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": str(int(EPOCH) + 3000)})
    with edge_for(server, clock) as edge, pytest.raises(ServiceError) as err:
        edge.pull_request(42)
    message = str(err.value)
    assert err.value.exit_code == 3 and clock.sleeps == []  # not a single request more while limited
    assert "GitHub's primary rate limit (x-ratelimit-reset 08:50:00 UTC) asks to wait 3e+03 s" in message
    assert "over the 300 s opgate waits for GitHub in all" in message and "OPGATE_GITHUB_MAX_WAIT_S" in message
    assert len(server.requests_to("GET", f"/repos/{REPO}/pulls/42")) == 1


def test_the_bound_holds_across_the_operations_of_one_command(server: FakeGitHub, clock: Clock) -> None:
    settings = github_settings(server, OPGATE_GITHUB_MAX_WAIT_S="200", OPGATE_GITHUB_LOGIN=server.bot_login)
    with publish.open_edge(settings) as from_settings:
        assert from_settings.max_wait_s == 200
    edge = edge_for(server, clock, max_wait_s=settings.github_max_wait_s)
    limited(server, 403, SECONDARY, times=1)
    with edge:
        edge.pull_request(42)  # 60 s
        limited(server, 403, SECONDARY, times=3)
        with pytest.raises(ServiceError, match=r"asks to wait 120 s, over the 200 s .* \(120 s waited already"):
            edge.pull_request(42)  # 60 s more fits (120 s in all); the next 120 s would pass 200 s
    assert clock.sleeps == [60.0, 60.0]


def test_a_secondary_limit_gives_up_after_the_retries_and_says_how_long_it_waited(
    server: FakeGitHub, clock: Clock
) -> None:
    limited(server, 403, SECONDARY, times=None)  # type: ignore[arg-type]
    with edge_for(server, clock, retries=2, max_wait_s=3600) as edge, pytest.raises(ServiceError) as err:
        edge.pull_request(42)
    assert clock.sleeps == [60.0, 120.0]
    assert "secondary rate limit" in str(err.value) and "no retry left, 180 s waited after 3 attempts" in str(err.value)


def test_a_403_that_is_not_a_rate_limit_fails_at_once(server: FakeGitHub, clock: Clock) -> None:
    limited(server, 403, '{"message": "Resource not accessible by integration"}')
    with edge_for(server, clock) as edge, pytest.raises(ServiceError, match="Resource not accessible"):
        edge.pull_request(42)
    assert clock.sleeps == []


# ---------------------------------------------------------------------------- custom repository roles


def test_a_custom_role_counts_as_the_base_role_it_builds_on(server: FakeGitHub, clock: Clock) -> None:
    server.set_permission(REPO, "kay", "write", role_name="kernel-maintainer")
    server.set_permission(REPO, "rex", "read", role_name="kernel-reader")
    server.set_permission(REPO, "mona", "maintain", role_name="release-captain")
    with edge_for(server, clock) as edge:
        assert edge.role("kay") == Role(level="write", name="kernel-maintainer")
        assert edge.role("rex") == Role(level="read", name="kernel-reader")
        assert edge.role("mona") == Role(level="maintain", name="release-captain")
    answer = json.loads(json.dumps({"permission": "write", "role_name": "kernel-maintainer"}))
    assert role_of(answer) == Role(level="write", name="kernel-maintainer")  # no hash: the legacy permission
    assert role_of({"permission": "write", "role_name": "maintain"}).level == "maintain"


def test_the_log_never_shows_the_token_while_waiting(
    server: FakeGitHub, clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    limited(server, 429, SECONDARY, **{"Retry-After": "5"})
    with edge_for(server, clock) as edge:
        edge.pull_request(42)
    assert "waiting 5 s" in caplog.text and TOKEN not in caplog.text
