"""bot/edges/github.py against a local GitHub REST API: PyGithub really talks HTTP to tests/github_server.py."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from bot.edges.github import GitHubEdge
from bot.errors import InputError, ServiceError
from bot.models.github import Annotation, Role
from bot.present.render import REVIEW_MARKER
from tests.conftest import git
from tests.github_server import FakeGitHub

REPO = "octo-org/kernels"
TOKEN = "ghs_edgeTestToken0123456789abcdef"
HEAD, BASE = "a1" * 20, "b2" * 20
BOT = "opgate[bot]"


class Sleeps(list[float]):
    def __call__(self, seconds: float) -> None:
        self.append(seconds)


@pytest.fixture
def server() -> Iterator[FakeGitHub]:
    with FakeGitHub(TOKEN, bot_login=BOT) as gh:
        gh.add_repo(REPO)
        yield gh


@pytest.fixture
def sleeps() -> Sleeps:
    return Sleeps()


def make_edge(server: FakeGitHub, sleeps: Sleeps, **overrides: object) -> GitHubEdge:
    options: dict[str, object] = {
        "retries": 3,
        "backoff_s": 0.01,
        "max_backoff_s": 0.05,
        "timeout_s": 5,
        "seconds_between_requests": None,
        "seconds_between_writes": None,
        "sleep": sleeps,
        "bot_login": BOT,
    }
    options.update(overrides)
    token = str(options.pop("token", TOKEN))
    return GitHubEdge(server.base_url, token, REPO, **options)  # type: ignore[arg-type]


@pytest.fixture
def edge(server: FakeGitHub, sleeps: Sleeps) -> Iterator[GitHubEdge]:
    with make_edge(server, sleeps) as e:
        yield e


@pytest.fixture
def pr(server: FakeGitHub) -> int:
    return server.add_pull(
        REPO,
        number=42,
        head_sha=HEAD,
        base_sha=BASE,
        author="alice-dev",
        files=[
            {"filename": "kernels/deepgemm_tile/kernel.cu", "additions": 10, "deletions": 4},
            {"filename": "kernels/deepgemm_tile/new.cu", "status": "renamed", "previous_filename": "old.cu"},
        ],
    )


def comment_writes(server: FakeGitHub) -> list[tuple[str, str]]:
    return [(r.method, r.path) for r in server.writes() if "/comments" in r.path]


# ---------------------------------------------------------------------------- pull requests


def test_pull_request_and_files(edge: GitHubEdge, server: FakeGitHub, pr: int) -> None:
    info = edge.pull_request(pr)
    assert (info.number, info.state, info.draft, info.merged) == (42, "open", False, False)
    assert (info.head_sha, info.base_sha, info.author) == (HEAD, BASE, "alice-dev")
    assert (info.head_repo, info.base_repo) == (REPO, REPO)
    assert {r.authorization for r in server.requests} == {f"token {TOKEN}"}


def test_draft_pull_from_a_fork(edge: GitHubEdge, server: FakeGitHub) -> None:
    n = server.add_pull(REPO, head_sha=HEAD, base_sha=BASE, draft=True, head_repo="alice-dev/kernels")
    info = edge.pull_request(n)
    assert info.draft and info.head_repo == "alice-dev/kernels" and info.base_repo == REPO


def test_unknown_pull_request_is_a_service_error_without_retry(edge: GitHubEdge, server: FakeGitHub) -> None:
    with pytest.raises(ServiceError, match="HTTP 404") as err:
        edge.pull_request(999)
    assert err.value.exit_code == 3
    assert len(server.requests_to("GET", f"/repos/{REPO}/pulls/999")) == 1


def numbered(i: int) -> str:
    return f"{i + 1:040x}"


def test_pull_commits_reads_every_page_with_the_logins_github_maps(edge: GitHubEdge, server: FakeGitHub) -> None:
    commits = [{"author": "alice-dev", "sha": numbered(i)} for i in range(228)]
    commits += [{"author": None, "committer": "carol-coauthor", "sha": numbered(228)}, {"author": "alice-dev"}]
    n = server.add_pull(REPO, head_sha=HEAD, base_sha=BASE, author="alice-dev", commits=commits)
    assert edge.pull_request(n).commits == 230
    listed = edge.pull_commits(n)
    assert [c.sha for c in listed] == [*map(numbered, range(229)), HEAD]  # oldest first, the head last
    assert (listed[228].author, listed[228].committer) == (None, "carol-coauthor")
    assert {(c.author, c.committer) for c in listed[:228]} == {("alice-dev", "alice-dev")}
    pages = server.requests_to("GET", f"/repos/{REPO}/pulls/{n}/commits")
    assert [r.query.get("page", ["1"]) for r in pages] == [["1"], ["2"], ["3"]]  # followed by the Link header
    assert {r.query["per_page"][0] for r in pages} == {"100"}


def test_pull_commits_stop_at_githubs_250_while_the_pull_request_counts_all(edge: GitHubEdge, server) -> None:
    commits = [{"author": "alice-dev"} for _ in range(260)]
    n = server.add_pull(REPO, head_sha=HEAD, base_sha=BASE, commits=commits)
    assert edge.pull_request(n).commits == 260
    listed = edge.pull_commits(n)
    assert len(listed) == 250 and HEAD not in {c.sha for c in listed}


def test_server_lists_pull_commits_as_github_documents(server: FakeGitHub) -> None:
    commits = [{"author": "alice-dev", "sha": numbered(i)} for i in range(260)]
    commits[1] = {"author": None, "email": "ghost@example.invalid", "committer": "web-flow", "sha": numbered(1)}
    n = server.add_pull(REPO, head_sha=HEAD, base_sha=BASE, commits=commits)
    url, auth = f"{server.base_url}/repos/{REPO}/pulls/{n}/commits", {"Authorization": f"token {TOKEN}"}
    with requests.Session() as http:
        first = http.get(url, params={"per_page": 100}, headers=auth, timeout=5)
        assert first.links["next"]["url"].endswith("per_page=100&page=2")
        assert first.links["last"]["url"].endswith("per_page=100&page=3")  # 250 listed, not 260
        last = http.get(first.links["last"]["url"], headers=auth, timeout=5)
        assert len(last.json()) == 50 and "next" not in last.links and "first" in last.links
        assert len(http.get(url, headers=auth, timeout=5).json()) == 30  # GitHub's default page
        pull = http.get(f"{server.base_url}/repos/{REPO}/pulls/{n}", headers=auth, timeout=5).json()
    assert pull["commits"] == 260  # the pull request counts them all
    item, ghost = first.json()[:2]
    assert set(item) == {
        "url",
        "sha",
        "node_id",
        "html_url",
        "comments_url",
        "commit",
        "author",
        "committer",
        "parents",
    }
    assert item["sha"] == numbered(0) and item["parents"][0]["sha"] == BASE
    assert item["author"]["login"] == "alice-dev" and item["author"]["type"] == "User"
    assert item["commit"]["author"]["email"] == server.noreply("alice-dev")
    assert set(item["commit"]) >= {"url", "author", "committer", "message", "tree", "comment_count", "verification"}
    assert ghost["author"] is None and ghost["commit"]["author"]["email"] == "ghost@example.invalid"
    assert ghost["committer"]["login"] == "web-flow" and ghost["parents"][0]["sha"] == numbered(0)


def test_pull_commits_of_a_pushed_branch_map_each_email_to_its_account(
    edge: GitHubEdge, server: FakeGitHub, tmp_path: Path
) -> None:
    """A pull request on the server's git store: its commits are base..head as git holds them, and GitHub names
    the account whose verified or no-reply e-mail a commit carries (null for an e-mail of nobody)."""
    server.user("alice-dev", email="alice@example.com")
    work = tmp_path / "work"
    work.mkdir()
    git(work, "init", "-q", "-b", "main")

    def commit_as(name: str, email: str, message: str, committer: tuple[str, str] | None = None) -> str:
        (work / "kernel.cu").write_text(message)
        env = [
            "-c",
            f"user.name={committer[0] if committer else name}",
            "-c",
            f"user.email={(committer or (name, email))[1]}",
        ]
        git(work, *env, "add", "kernel.cu")
        git(work, *env, "commit", "-q", "--author", f"{name} <{email}>", "-m", message)
        return git(work, "rev-parse", "HEAD")

    base = commit_as("Maintainer", "maint@example.com", "base")
    git(work, "push", "-q", str(server.git(REPO).path), "main")
    git(work, "checkout", "-q", "-b", "feature")
    first = commit_as("Alice", "alice@example.com", "one")
    second = commit_as("Carol", server.noreply("carol-coauthor"), "two", committer=("Ghost", "ghost@example.invalid"))
    git(work, "push", "-q", str(server.git(REPO).path), "feature")
    n = server.add_pull(REPO, head_sha=second, base_sha=base, head_ref="feature", author="alice-dev")
    assert [(c.sha, c.author, c.committer) for c in edge.pull_commits(n)] == [
        (first, "alice-dev", "alice-dev"),
        (second, "carol-coauthor", None),
    ]
    assert edge.pull_request(n).commits == 2


# ---------------------------------------------------------------------------- comments


def test_upsert_creates_then_edits_the_same_comment(edge: GitHubEdge, server: FakeGitHub, pr: int) -> None:
    server.add_comment(REPO, pr, "LGTM, waiting for the bot", author="maint-bob")
    first = edge.upsert_comment(pr, REVIEW_MARKER, f"{REVIEW_MARKER}\n## opgate: pass")
    second = edge.upsert_comment(pr, REVIEW_MARKER, f"{REVIEW_MARKER}\n## opgate: fail")

    assert first.created and not first.updated
    assert second.id == first.id and not second.created and second.updated
    assert comment_writes(server) == [
        ("POST", f"/repos/{REPO}/issues/{pr}/comments"),
        ("PATCH", f"/repos/{REPO}/issues/comments/{first.id}"),
    ]
    ours = [c for c in server.comments(REPO, pr) if REVIEW_MARKER in c["body"]]
    assert len(ours) == 1 and ours[0]["body"].endswith("fail") and ours[0]["user"]["login"] == BOT
    assert server.writes()[-1].body == {"body": f"{REVIEW_MARKER}\n## opgate: fail"}


def test_upsert_with_an_unchanged_body_writes_nothing(edge: GitHubEdge, server: FakeGitHub, pr: int) -> None:
    edge.upsert_comment(pr, REVIEW_MARKER, "same")
    again = edge.upsert_comment(pr, REVIEW_MARKER, "same")
    assert not again.created and not again.updated
    assert len(comment_writes(server)) == 1
    assert server.comments(REPO, pr)[0]["body"] == f"{REVIEW_MARKER}\nsame"  # the marker is prepended


def test_upsert_finds_the_marker_beyond_the_first_page(edge: GitHubEdge, server: FakeGitHub, pr: int) -> None:
    for i in range(130):
        server.add_comment(REPO, pr, f"comment {i}", author="reviewer")
    ours = server.add_comment(REPO, pr, f"{REVIEW_MARKER}\nold review", author=BOT)
    for i in range(5):
        server.add_comment(REPO, pr, f"later {i}", author="reviewer")

    ref = edge.upsert_comment(pr, REVIEW_MARKER, f"{REVIEW_MARKER}\nnew review")

    assert ref.id == ours and ref.updated
    assert comment_writes(server) == [("PATCH", f"/repos/{REPO}/issues/comments/{ours}")]
    pages = [r.query.get("page", ["1"])[0] for r in server.requests_to("GET", f"/repos/{REPO}/issues/{pr}/comments")]
    assert pages == ["1", "2"]
    assert sum(REVIEW_MARKER in c["body"] for c in server.comments(REPO, pr)) == 1


def test_upsert_ignores_other_authors_when_the_bot_login_is_known(server: FakeGitHub, sleeps: Sleeps, pr: int) -> None:
    server.add_comment(REPO, pr, f"{REVIEW_MARKER}\nan imitation", author="mallory")
    server.add_comment(REPO, pr, f"quoting the bot: {REVIEW_MARKER}", author="reviewer")
    with make_edge(server, sleeps, bot_login=BOT) as edge:
        ref = edge.upsert_comment(pr, REVIEW_MARKER, "the review")
    assert ref.created
    bodies = [(c["user"]["login"], c["body"]) for c in server.comments(REPO, pr)]
    assert bodies[-1] == (BOT, f"{REVIEW_MARKER}\nthe review")


def test_an_oversized_body_is_cut_to_what_github_accepts(edge: GitHubEdge, server: FakeGitHub, pr: int) -> None:
    edge.upsert_comment(pr, REVIEW_MARKER, "x" * 70_000)
    (body,) = [c["body"] for c in server.comments(REPO, pr)]
    assert len(body) == 65_536 and body.startswith(REVIEW_MARKER) and body.endswith("characters)")


def test_a_post_whose_answer_was_lost_is_not_duplicated(edge: GitHubEdge, server: FakeGitHub, pr: int) -> None:
    server.fail(f"/repos/{REPO}/issues/{pr}/comments", method="POST", status=502, after=True)
    ref = edge.upsert_comment(pr, REVIEW_MARKER, "review")
    assert [c["body"] for c in server.comments(REPO, pr)] == [f"{REVIEW_MARKER}\nreview"]
    assert ref.id == server.comments(REPO, pr)[0]["id"]
    assert [r.status for r in server.requests_to("POST")] == [502]  # the retry re-read and found it


def test_reply_and_react(edge: GitHubEdge, server: FakeGitHub, pr: int) -> None:
    command = server.add_comment(REPO, pr, "/opgate review", author="maint-bob")
    edge.react(command, "eyes")
    edge.react(command, "eyes")  # GitHub answers 200 for a reaction already there
    edge.react(command, "+1")
    reply = edge.reply(pr, "Reviewing head `a1a1a1a1`.")
    assert reply.created and reply.url.endswith(f"#issuecomment-{reply.id}")
    assert [r["content"] for r in server.reactions(command)] == ["eyes", "+1"]
    posts = server.requests_to("POST", re.compile(rf"/repos/{REPO}/issues/comments/\d+/reactions"))
    assert [r.body for r in posts] == [{"content": "eyes"}, {"content": "eyes"}, {"content": "+1"}]
    with pytest.raises(ValueError, match="unknown reaction"):
        edge.react(command, "thumbsup")  # type: ignore[arg-type]


# ---------------------------------------------------------------------------- statuses and roles


def test_statuses_are_recorded_with_a_short_description(edge: GitHubEdge, server: FakeGitHub) -> None:
    edge.set_status(HEAD, "opgate/review", "pending", "building 2 kernels")
    long = "deepgemm_tile: p50 +7.3% over the 5% budget on case m4096_n4096_k4096; " * 4
    ref = edge.set_status(HEAD, "opgate/review", "failure", long, target_url="https://ci.example/run/7")

    statuses = server.statuses(REPO, HEAD)
    assert [(s["context"], s["state"]) for s in statuses] == [
        ("opgate/review", "pending"),
        ("opgate/review", "failure"),
    ]
    assert statuses[0]["description"] == "building 2 kernels"
    assert len(statuses[1]["description"]) == 140 and statuses[1]["description"].endswith("…")
    assert statuses[1]["target_url"] == "https://ci.example/run/7"
    assert ref.state == "failure" and ref.description == statuses[1]["description"]
    posted = server.requests_to("POST", f"/repos/{REPO}/statuses/{HEAD}")
    assert "target_url" not in posted[0].body and posted[1].body["target_url"] == "https://ci.example/run/7"
    with pytest.raises(ValueError, match="unknown status state"):
        edge.set_status(HEAD, "opgate/review", "passed", "x")  # type: ignore[arg-type]


def notes(n: int, path: str = "kernels/deepgemm_tile/gemm_cuda.cu") -> list[Annotation]:
    return [
        Annotation(path=path, start_line=i, end_line=i, annotation_level="warning", message=f"m{i}", title=f"t{i}")
        for i in range(1, n + 1)
    ]


def test_annotations_go_in_requests_of_50(edge: GitHubEdge, server: FakeGitHub) -> None:
    edge.create_check_run(HEAD, "opgate/review", "120 findings", "s", notes(120))
    assert [len(r.body["output"].get("annotations", [])) for r in server.writes()] == [50, 50, 20]
    edge.create_check_run(HEAD, "opgate/review", "none", "s", [])
    assert [len(r.body["output"].get("annotations", [])) for r in server.writes()][3:] == [0]  # one request, none


def test_more_than_50_annotations_go_in_50_a_request_to_one_check_run(edge: GitHubEdge, server: FakeGitHub) -> None:
    ref = edge.create_check_run(HEAD, "opgate/review", "51 findings", "the summary", notes(51))
    writes = [(r.method, r.path, len(r.body["output"]["annotations"])) for r in server.writes()]
    assert writes == [
        ("POST", f"/repos/{REPO}/check-runs", 50),
        ("PATCH", f"/repos/{REPO}/check-runs/{ref.id}", 1),
    ]
    (run,) = server.check_runs(REPO, HEAD)
    assert run["name"] == "opgate/review" and (run["status"], run["conclusion"]) == ("completed", "neutral")
    assert run["output"]["annotations_count"] == 51 and [a["message"] for a in run["annotations"]][-2:] == [
        "m50",
        "m51",
    ]
    assert run["output"]["title"] == "51 findings" and run["output"]["summary"] == "the summary"
    assert (ref.annotations, ref.requests, ref.url) == (51, 2, run["html_url"])


def test_github_refuses_51_annotations_in_one_request(edge: GitHubEdge, server: FakeGitHub) -> None:
    body = {"title": "t", "summary": "s", "annotations": [a.payload() for a in notes(51)]}
    answer = requests.post(
        f"{server.base_url}/repos/{REPO}/check-runs",
        json={"name": "x", "head_sha": HEAD, "status": "completed", "conclusion": "neutral", "output": body},
        headers={"Authorization": f"token {TOKEN}"},
        timeout=5,
    )
    assert answer.status_code == 422 and "50 annotations" in answer.text
    assert server.check_runs(REPO) == []


def test_a_check_run_without_annotations_is_one_request(edge: GitHubEdge, server: FakeGitHub) -> None:
    ref = edge.create_check_run(HEAD, "opgate/review", "no finding on a line", "nothing to place")
    assert [(r.method, r.path) for r in server.writes()] == [("POST", f"/repos/{REPO}/check-runs")]
    assert "annotations" not in server.writes()[0].body["output"]  # none rather than an empty list
    assert (ref.annotations, ref.requests) == (0, 1)


def test_a_lost_answer_adds_no_check_run_and_no_annotation_twice(
    edge: GitHubEdge, server: FakeGitHub, sleeps: Sleeps
) -> None:
    server.fail(f"/repos/{REPO}/check-runs", method="POST", status=502, times=1, after=True)
    server.fail(re.compile(rf"/repos/{REPO}/check-runs/\d+"), method="PATCH", status=502, times=1, after=True)
    ref = edge.create_check_run(HEAD, "opgate/review", "120 findings", "s", notes(120))
    (run,) = server.check_runs(REPO, HEAD)  # the first POST took effect: found by its external_id, not repeated
    assert run["id"] == ref.id and run["external_id"]
    assert [a["start_line"] for a in run["annotations"]] == list(range(1, 121))  # the lost PATCH not repeated
    assert [len(r.body["output"]["annotations"]) for r in server.requests_to("PATCH")] == [50, 20]
    assert len(sleeps) == 2


def test_a_token_that_may_not_create_check_runs_is_a_service_error(edge: GitHubEdge, server: FakeGitHub) -> None:
    server.fail(f"/repos/{REPO}/check-runs", method="POST", status=403, times=None)
    with pytest.raises(ServiceError, match="create the check run opgate/review"):
        edge.create_check_run(HEAD, "opgate/review", "t", "s", notes(3))


def test_role_reads_role_name_and_falls_back_to_permission(edge: GitHubEdge, server: FakeGitHub) -> None:
    server.set_permission(REPO, "maint-bob", "maintain")  # GitHub answers permission "write", role_name "maintain"
    server.set_permission(REPO, "old-admin", "admin", role_name=None)  # an older GHES: no role_name field
    server.user("passer-by")
    assert edge.role("maint-bob") == Role(level="maintain", name="maintain")
    assert edge.role("old-admin") == Role(level="admin", name="admin")
    assert edge.role("passer-by") == Role(level="read", name="read")  # public repository, not a collaborator
    assert edge.role("no-such-user") == Role(level="none", name="none")  # 404
    assert len(server.requests_to("GET", f"/repos/{REPO}/collaborators/no-such-user/permission")) == 1


# ---------------------------------------------------------------------------- issues


def test_issue_upsert_does_not_duplicate(edge: GitHubEdge, server: FakeGitHub) -> None:
    first = edge.upsert_issue("opgate nightly: regressions", "day 1", ["opgate", "perf"])
    second = edge.upsert_issue("opgate nightly: regressions", "day 2", ["opgate", "perf"])
    assert first.created and not second.created and second.updated and second.number == first.number
    issues = [i for i in server.issues(REPO) if i["title"] == "opgate nightly: regressions"]
    assert len(issues) == 1 and issues[0]["body"] == "day 2"
    assert {label["name"] for label in issues[0]["labels"]} == {"opgate", "perf"}
    assert [r.method for r in server.writes()] == ["POST", "PATCH"]


def test_issue_upsert_edits_a_closed_issue_and_keeps_it_closed(edge: GitHubEdge, server: FakeGitHub) -> None:
    server.add_issue(REPO, "opgate nightly: regressions (other)", labels=["opgate"])
    n = server.add_issue(REPO, "opgate nightly: regressions", "old", labels=["opgate", "triaged"], state="closed")
    server.add_pull(REPO, head_sha=HEAD, base_sha=BASE, title="opgate nightly: regressions", labels=["opgate"])

    ref = edge.upsert_issue("opgate nightly: regressions", "new", ["opgate"])

    assert (ref.number, ref.created, ref.state) == (n, False, "closed")
    assert len([i for i in server.issues(REPO) if i["title"] == "opgate nightly: regressions"]) == 1
    patch = server.requests_to("PATCH", f"/repos/{REPO}/issues/{n}")
    assert [p.body for p in patch] == [{"body": "new"}]  # labels kept (nothing missing), state untouched

    reopened = edge.upsert_issue("opgate nightly: regressions", "newer", ["opgate", "perf"], reopen=True)
    assert reopened.state == "open"
    issue = next(i for i in server.issues(REPO) if i["number"] == n)
    assert {label["name"] for label in issue["labels"]} == {"opgate", "triaged", "perf"}


def test_issue_upsert_without_labels_uses_search(edge: GitHubEdge, server: FakeGitHub) -> None:
    n = server.add_issue(REPO, 'Flaky "case" in flashmla', state="closed")
    server.add_issue(REPO, 'Flaky "case" in flashmla decode', state="open")
    ref = edge.upsert_issue('Flaky "case" in flashmla', "seen again")
    assert ref.number == n and not ref.created
    assert len(server.requests_to("GET", "/search/issues")) == 1
    assert server.requests_to("POST") == []


# ---------------------------------------------------------------------------- failures and retries


def test_a_502_is_retried_and_succeeds(edge: GitHubEdge, server: FakeGitHub, sleeps: Sleeps, pr: int) -> None:
    server.fail(f"/repos/{REPO}/pulls/{pr}", status=502, times=2)
    assert edge.pull_request(pr).head_sha == HEAD
    assert [r.status for r in server.requests_to("GET", f"/repos/{REPO}/pulls/{pr}")] == [502, 502, 200]
    assert sleeps == [0.01, 0.02]  # exponential backoff


def test_a_dropped_connection_is_retried(edge: GitHubEdge, server: FakeGitHub, sleeps: Sleeps) -> None:
    server.fail(f"/repos/{REPO}/statuses/{HEAD}", status=None, times=1)
    edge.set_status(HEAD, "opgate/review", "success", "all gates pass")
    assert [s["state"] for s in server.statuses(REPO, HEAD)] == ["success"]
    assert len(sleeps) == 1


def test_persistent_5xx_raises_service_error(edge: GitHubEdge, server: FakeGitHub, sleeps: Sleeps, pr: int) -> None:
    server.fail(re.compile(rf"/repos/{REPO}/issues/{pr}/comments"), status=503, times=None)
    with pytest.raises(ServiceError) as err:
        edge.upsert_comment(pr, REVIEW_MARKER, "review")
    assert err.value.exit_code == 3
    assert "HTTP 503" in str(err.value) and "after 4 attempts" in str(err.value)
    assert len(server.requests_to(path=f"/repos/{REPO}/issues/{pr}/comments")) == 4  # 1 + 3 retries
    assert sleeps == [0.01, 0.02, 0.04]
    assert server.requests_to("POST") == []


def test_429_is_retried_honouring_retry_after_in_full(edge: GitHubEdge, server: FakeGitHub, sleeps: Sleeps) -> None:
    server.fail(f"/repos/{REPO}/collaborators/maint-bob/permission", status=429, headers={"Retry-After": "60"})
    server.set_permission(REPO, "maint-bob", "admin")
    assert edge.role("maint-bob").level == "admin"
    assert sleeps == [60.0]  # Retry-After 60 s in full, never cut to the 5xx backoff's cap (max_backoff_s 0.05)


def test_a_secondary_rate_limit_403_with_retry_after_is_retried(
    edge: GitHubEdge, server: FakeGitHub, sleeps: Sleeps, pr: int
) -> None:
    server.fail(
        f"/repos/{REPO}/issues/{pr}/comments",
        method="POST",
        status=403,
        body='{"message": "You have exceeded a secondary rate limit. Please wait a few minutes before you try again."}',
        headers={"Retry-After": "0.03"},
    )
    assert edge.reply(pr, "hello").created
    assert [r.status for r in server.requests_to("POST")] == [403, 201] and sleeps == [0.03]


def test_a_422_says_what_github_refused(edge: GitHubEdge, server: FakeGitHub, pr: int) -> None:
    with pytest.raises(ServiceError, match=r"HTTP 422 Validation Failed .*\[body: missing_field\]"):
        edge.reply(pr, "")
    assert len(server.requests_to("POST")) == 1


def test_other_4xx_are_not_retried(edge: GitHubEdge, server: FakeGitHub, sleeps: Sleeps, pr: int) -> None:
    server.fail(f"/repos/{REPO}/issues/{pr}/comments", method="POST", status=403)
    with pytest.raises(ServiceError, match="HTTP 403"):
        edge.reply(pr, "hello")
    assert len(server.requests_to("POST")) == 1 and sleeps == []


def test_401_fails_at_once_and_never_shows_the_token(
    server: FakeGitHub, sleeps: Sleeps, pr: int, caplog: pytest.LogCaptureFixture
) -> None:
    wrong = "ghp_wrongButSecretToken9876543210"
    caplog.set_level(logging.DEBUG)
    with make_edge(server, sleeps, token=wrong) as edge, pytest.raises(ServiceError) as err:
        edge.upsert_comment(pr, REVIEW_MARKER, "review")
    message = str(err.value)
    assert "HTTP 401" in message and "Bad credentials" in message
    assert wrong not in message and TOKEN not in message
    assert wrong not in caplog.text
    assert len(server.requests) == 1 and sleeps == []
    assert server.requests[0].authorization == f"token {wrong}"


def test_retry_warnings_do_not_show_the_token(
    edge: GitHubEdge, server: FakeGitHub, pr: int, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    server.fail(f"/repos/{REPO}/pulls/{pr}", status=500)
    edge.pull_request(pr)
    assert "retry 1/3" in caplog.text and TOKEN not in caplog.text


def test_an_unreachable_server_is_a_service_error(sleeps: Sleeps) -> None:
    with FakeGitHub(TOKEN) as gone:
        url = gone.base_url
    edge = GitHubEdge(url, TOKEN, REPO, retries=1, backoff_s=0.0, sleep=sleeps, seconds_between_requests=None)
    with edge, pytest.raises(ServiceError, match="connection failed"):
        edge.role("anyone")
    assert sleeps == [0.0]


def test_settings_are_checked(server: FakeGitHub) -> None:
    with pytest.raises(InputError, match="owner/name"):
        GitHubEdge(server.base_url, TOKEN, "just-a-name")
    with pytest.raises(InputError, match="token"):
        GitHubEdge(server.base_url, " ", REPO)
    with pytest.raises(InputError, match="http"):
        GitHubEdge("ftp://example", TOKEN, REPO)
    with pytest.raises(InputError, match="credentials") as err:
        GitHubEdge(f"https://x:{TOKEN}@ghe.example/api/v3", TOKEN, REPO)
    assert TOKEN not in str(err.value)


# ---------------------------------------------------------------------------- the server itself


def test_enterprise_layout_under_api_v3(sleeps: Sleeps) -> None:
    with FakeGitHub(TOKEN, prefix="/api/v3", bot_login=BOT) as ghes:
        ghes.add_repo(REPO)
        n = ghes.add_pull(REPO, head_sha=HEAD, base_sha=BASE)
        for i in range(120):
            ghes.add_comment(REPO, n, f"c{i}")
        ghes.set_permission(REPO, "maint-bob", "maintain")
        with make_edge(ghes, sleeps) as edge:
            assert edge.pull_request(n).base_sha == BASE
            ref = edge.upsert_comment(n, REVIEW_MARKER, "x")
            edge.react(ref.id, "rocket")
            edge.set_status(HEAD, "opgate/review", "success", "ok")
            assert edge.role("maint-bob").level == "maintain"
            assert edge.upsert_issue("nightly", "body", ["opgate"]).created
        assert ref.created and [r["content"] for r in ghes.reactions(ref.id)] == ["rocket"]
        assert all(r.status is not None and r.status < 400 for r in ghes.requests)
        assert ghes.base_url.endswith("/api/v3")
        assert len(ghes.requests_to("GET", f"/repos/{REPO}/issues/{n}/comments")) == 2  # followed the Link


def test_server_diff_media_type_and_pagination_links(server: FakeGitHub, pr: int) -> None:
    with requests.Session() as http:
        headers = {"Authorization": f"Bearer {TOKEN}", "Accept": "application/vnd.github.diff"}
        diff = http.get(f"{server.base_url}/repos/{REPO}/pulls/{pr}", headers=headers, timeout=5)
        assert diff.status_code == 200 and diff.text.startswith("diff --git a/kernels/deepgemm_tile/kernel.cu")
        page = http.get(
            f"{server.base_url}/repos/{REPO}/pulls/{pr}/files",
            params={"per_page": 1},
            headers={"Authorization": f"token {TOKEN}"},
            timeout=5,
        )
        assert page.links["next"]["url"].endswith("per_page=1&page=2") and "last" in page.links
        denied = http.get(f"{server.base_url}/repos/{REPO}", timeout=5)
        assert denied.status_code == 401 and denied.json()["message"] == "Bad credentials"


# ---------------------------------------------------------------------------- event fixtures


def test_the_edge_reads_a_pull_request_whose_head_repository_is_gone() -> None:
    token, repo = "ghs_recordedEvents0123456789", "octo-org/kernels"
    with FakeGitHub(token) as gh:
        gh.add_repo(repo)
        n = gh.add_pull(repo, head_sha="a1" * 20, base_sha="b2" * 20, head_repo_deleted=True)
        with GitHubEdge(gh.base_url, token, repo, seconds_between_requests=None) as edge:
            info = edge.pull_request(n)
    assert info.head_repo is None and info.base_repo == "octo-org/kernels" and info.head_sha == "a1" * 20
