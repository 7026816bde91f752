"""A local GitHub REST API (v3) for tests: real HTTP on 127.0.0.1, in-memory state, recorded requests.

PyGithub talks to it exactly as it talks to api.github.com or a GitHub Enterprise Server
(`base_url=server.base_url`; pass `prefix="/api/v3"` for the GHES layout). Payloads follow the
examples on docs.github.com (REST v3) closely enough for PyGithub's parsers: every object carries
`url`, `html_url`, `id`, `node_id`, `user{login,type}`, `created_at` and `updated_at`, and every URL
in a payload or a `Link` header points back at this server.

Supported endpoints (paths relative to the API root):

    GET    /repos/{o}/{r}
    GET    /repos/{o}/{r}/pulls/{n}                    (Accept: application/vnd.github.diff|patch -> text)
    GET    /repos/{o}/{r}/pulls/{n}/files              (paginated)
    GET    /repos/{o}/{r}/pulls/{n}/commits            (paginated, oldest first, at most 250; author/committer
                                                         are the accounts the commit's e-mails belong to, or null)
    GET    /repos/{o}/{r}/issues                       (state, labels, creator, sort, direction, since; paginated)
    POST   /repos/{o}/{r}/issues
    GET    /repos/{o}/{r}/issues/{n}
    PATCH  /repos/{o}/{r}/issues/{n}
    GET    /repos/{o}/{r}/issues/{n}/comments          (since; paginated)
    POST   /repos/{o}/{r}/issues/{n}/comments
    GET    /repos/{o}/{r}/issues/comments/{id}
    PATCH  /repos/{o}/{r}/issues/comments/{id}
    GET    /repos/{o}/{r}/issues/comments/{id}/reactions
    POST   /repos/{o}/{r}/issues/comments/{id}/reactions
    POST   /repos/{o}/{r}/statuses/{sha}
    GET    /repos/{o}/{r}/commits/{ref}/statuses       (paginated, newest first)
    GET    /repos/{o}/{r}/commits/{ref}/status         (combined status)
    POST   /repos/{o}/{r}/check-runs                   (output.annotations: at most 50, each checked as documented)
    PATCH  /repos/{o}/{r}/check-runs/{id}              (output.annotations are appended; at most 50 a request)
    GET    /repos/{o}/{r}/check-runs/{id}
    GET    /repos/{o}/{r}/check-runs/{id}/annotations  (paginated)
    GET    /repos/{o}/{r}/commits/{ref}/check-runs     (check_name; {total_count, check_runs})
    GET    /repos/{o}/{r}/collaborators/{user}/permission   (permission: the legacy level; role_name; user.permissions)
    GET    /user                                       (an installation token: 403, as on GitHub; user_token=True: 200)
    GET    /search/issues?q=...                        (repo:, is:, type:, state:, label:, author:, in:title|body)
    GET    /repos/{o}/{r}/pulls                        (state, head=owner:branch, base, sort, direction; paginated)
    POST   /repos/{o}/{r}/pulls                        (from a branch of the repository's git store)
    PATCH  /repos/{o}/{r}/pulls/{n}                    (title, body, state, base)
    POST   /repos/{o}/{r}/git/blobs                    (utf-8 or base64)
    POST   /repos/{o}/{r}/git/trees                    (base_tree; blob entries, paths with folders, sha null deletes)
    POST   /repos/{o}/{r}/git/commits                  (author/committer with date)
    GET    /repos/{o}/{r}/git/commits/{sha}
    GET    /repos/{o}/{r}/git/ref/{ref}                (heads/NAME)
    POST   /repos/{o}/{r}/git/refs
    PATCH  /repos/{o}/{r}/git/refs/{ref}               (force)
    POST   /repos/{o}/{r}/actions/workflows/{id}/dispatches   (recorded in `server.dispatches`; 204)
    GET    /repos/{o}/{r}/pulls/{n}/reviews            (paginated, oldest first)
    POST   /repos/{o}/{r}/pulls/{n}/reviews            (commit_id, body, event, comments[path, line, side]: a RIGHT line
                                                         must be one the pull request's diff shows, else 422)
    PUT    /repos/{o}/{r}/pulls/{n}/reviews/{id}       (body)
    GET    /repos/{o}/{r}/pulls/{n}/reviews/{id}/comments   (paginated)
    PATCH  /repos/{o}/{r}/pulls/comments/{id}          (body)
    DELETE /repos/{o}/{r}/pulls/comments/{id}          (204)

The git data endpoints are backed by a real bare repository per repository (tests/github_git.py): push a local
branch into `server.git(full_name).path` to seed it, fetch from it to see what a client pushed.

Every request is recorded (`server.requests`); `server.fail(...)` makes the next N matching requests
answer an error (or drop the connection), optionally after the request took effect. The
`Authorization: token <t>` / `Bearer <t>` header is checked against `token` (401 otherwise).
"""

from __future__ import annotations

import base64
import contextlib
import json
import math
import re
import shutil
import socket
import tempfile
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlencode, urlsplit

from tests.github_git import BareRepo, GitRefused, Person

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "github"
DOCS = "https://docs.github.com/rest"
REACTIONS = ("+1", "-1", "laugh", "confused", "heart", "hooray", "rocket", "eyes")
STATUS_STATES = ("error", "failure", "pending", "success")
CHECK_STATUSES = ("queued", "in_progress", "completed")
CHECK_CONCLUSIONS = ("action_required", "cancelled", "failure", "neutral", "success", "skipped", "stale", "timed_out")
ANNOTATION_LEVELS = ("notice", "warning", "failure")
MAX_ANNOTATIONS = 50  # per create or update request (docs.github.com/rest/checks/runs)
PERMISSIONS = {
    "admin": {"admin": True, "maintain": True, "push": True, "triage": True, "pull": True},
    "maintain": {"admin": False, "maintain": True, "push": True, "triage": True, "pull": True},
    "write": {"admin": False, "maintain": False, "push": True, "triage": True, "pull": True},
    "triage": {"admin": False, "maintain": False, "push": False, "triage": True, "pull": True},
    "read": {"admin": False, "maintain": False, "push": False, "triage": False, "pull": True},
    "none": {"admin": False, "maintain": False, "push": False, "triage": False, "pull": False},
}
_EPOCH = datetime(2024, 5, 1, 12, 0, 0, tzinfo=UTC)
MAX_PULL_COMMITS = 250  # GET …/pulls/{n}/commits lists at most this many; the pull request's `commits` counts all


# --------------------------------------------------------------------------- fixtures


def load_fixture(name: str, **substitutions: str) -> dict[str, Any]:
    """An event file from tests/fixtures/github, with `@KEY@` placeholders replaced (e.g. head_sha=...)."""
    text = (FIXTURES / name).read_text()
    for key, value in substitutions.items():
        text = text.replace(f"@{key.upper()}@", value)
    return json.loads(text)


def write_event(directory: Path, name: str, **substitutions: str) -> Path:
    """Write a substituted fixture to `directory/name` and return its path (for --event / GITHUB_EVENT_PATH)."""
    path = directory / name
    path.write_text(json.dumps(load_fixture(name, **substitutions), indent=2))
    return path


# --------------------------------------------------------------------------- records


@dataclass
class RecordedRequest:
    """One request as the server saw it; `path` has neither the API prefix nor the query string."""

    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]  # lower-case names
    body: Any  # the JSON body, parsed; None when there was none
    status: int | None = None  # what the server answered; None for a dropped connection

    @property
    def authorization(self) -> str | None:
        return self.headers.get("authorization")

    @property
    def is_write(self) -> bool:
        return self.method in ("POST", "PATCH", "PUT", "DELETE")


@dataclass
class Fault:
    path: str | re.Pattern[str]
    method: str | None
    status: int | None  # None: close the connection without an answer
    times: int | None  # None: every matching request, for ever
    after: bool  # let the request take effect first, then answer the fault
    body: str | None
    headers: dict[str, str]

    def matches(self, method: str, path: str) -> bool:
        if self.method is not None and self.method != method:
            return False
        if isinstance(self.path, re.Pattern):
            return self.path.fullmatch(path) is not None
        return self.path == path


class _Drop(Exception):
    """Close the connection without answering."""


@dataclass
class _Response:
    status: int
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)


class ApiError(Exception):
    def __init__(self, status: int, message: str, errors: list[dict[str, Any]] | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.errors = status, message, errors


def _not_found() -> ApiError:
    return ApiError(404, "Not Found")


def _invalid(resource: str, field_name: str, code: str = "invalid", message: str | None = None) -> ApiError:
    error: dict[str, Any] = {"resource": resource, "code": code, "field": field_name}
    if message:
        error["message"] = message
    return ApiError(422, "Validation Failed", [error])


# --------------------------------------------------------------------------- state


@dataclass
class _Repo:
    id: int
    owner: str
    name: str
    private: bool
    default_branch: str
    created_at: str
    issues: dict[int, dict[str, Any]] = field(default_factory=dict)  # number -> issue record (PRs too)
    labels: dict[str, dict[str, Any]] = field(default_factory=dict)  # lower name -> label record
    statuses: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # sha -> status records, oldest first
    check_runs: dict[int, dict[str, Any]] = field(default_factory=dict)  # id -> check run record, oldest first
    permissions: dict[str, tuple[str, str | None]] = field(default_factory=dict)  # lower login -> (perm, role)
    next_number: int = 1
    git: BareRepo | None = None  # the repository's objects and refs (created by FakeGitHub.git)
    workflows: set[str] | None = None  # known workflow files; None: any name can be dispatched

    @property
    def full_name(self) -> str:
        return f"{self.owner}/{self.name}"


class FakeGitHub:
    """The server. Use as a context manager (`with FakeGitHub() as gh:`) or call start()/close()."""

    def __init__(
        self,
        token: str | None = "ghs_test_token_0123456789",
        *,
        prefix: str = "",
        bot_login: str = "opgate[bot]",
        bot_type: str = "Bot",
        user_token: bool = False,
    ) -> None:
        """`bot_login` is who every write is authored by (the token's identity); `user_token` makes the token a
        person's (GET /user answers it) instead of an installation's (GET /user: 403, as GitHub answers)."""
        self.token = token
        self.user_token = user_token
        self.prefix = prefix.rstrip("/")
        self.bot_login, self.bot_type = bot_login, bot_type
        self.requests: list[RecordedRequest] = []
        self._lock = threading.RLock()
        self._repos: dict[str, _Repo] = {}
        self._forks: dict[str, _Repo] = {}
        self._users: dict[str, dict[str, Any]] = {}
        self._comments: dict[int, tuple[str, int, dict[str, Any]]] = {}  # id -> (repo key, number, record)
        self._review_comments: dict[int, tuple[str, int, dict[str, Any]]] = {}  # id -> (repo key, number, record)
        self._faults: list[Fault] = []
        self.dispatches: list[dict[str, Any]] = []  # workflow_dispatch events: workflow, ref, inputs
        self._scratch = Path(tempfile.mkdtemp(prefix="fake-github-"))
        self._ids = 1_000_000
        self._tick = 0
        self._httpd: _Server | None = None
        self._thread: threading.Thread | None = None
        self.user(bot_login, bot_type)

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> FakeGitHub:
        if self._httpd is None:
            self._httpd = _Server(("127.0.0.1", 0), _Handler, self)
            self._thread = threading.Thread(
                target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, name="fake-github", daemon=True
            )
            self._thread.start()
        return self

    def close(self) -> None:
        httpd, thread = self._httpd, self._thread
        if httpd is None:
            return
        httpd.shutdown()  # stop accepting
        httpd.close_connections()  # wake handlers blocked on kept-alive connections
        httpd.server_close()  # close the listening socket, join the handler threads
        if thread is not None:
            thread.join(timeout=5)
        self._httpd = self._thread = None
        shutil.rmtree(self._scratch, ignore_errors=True)

    def __enter__(self) -> FakeGitHub:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def port(self) -> int:
        assert self._httpd is not None, "server not started"
        return self._httpd.server_address[1]

    @property
    def root_url(self) -> str:
        """The host root, where `html_url`s live (like https://github.com or a GHES host)."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        """The API root, for PyGithub's base_url and GITHUB_API_URL."""
        return f"{self.root_url}{self.prefix}"

    # ------------------------------------------------------------------ setup

    def user(self, login: str, type: str = "User", *, email: str | None = None) -> dict[str, Any]:
        """Make a user known (authors are made known automatically); returns its record. `email` adds an address
        GitHub maps commits to this account by (its `ID+login@users.noreply.github.com` always is one)."""
        with self._lock:
            key = login.lower()
            if key not in self._users:
                self._users[key] = {"login": login, "id": self._new_id(), "type": type, "emails": []}
            if email is not None:
                self._users[key]["emails"].append(email.lower())
            return self._users[key]

    def noreply(self, login: str) -> str:
        """The user's no-reply commit e-mail, as GitHub gives it: ID+login@users.noreply.github.com."""
        user = self.user(login)
        return f"{user['id']}+{user['login']}@users.noreply.github.com"

    def _account_of(self, email: str) -> dict[str, Any] | None:
        """The account a commit e-mail belongs to, as GitHub maps it (a verified address or the no-reply one)."""
        email = email.lower()
        for user in self._users.values():
            noreply = (
                f"{user['id']}+{user['login']}@users.noreply.github.com",
                f"{user['login']}@users.noreply.github.com",
            )
            if email in user["emails"] or email in (n.lower() for n in noreply):
                return user
        return None

    def add_repo(self, full_name: str, *, private: bool = False, default_branch: str = "main") -> None:
        owner, name = full_name.split("/")
        with self._lock:
            self.user(owner, "Organization")
            self._repos[full_name.lower()] = _Repo(
                id=self._new_id(),
                owner=owner,
                name=name,
                private=private,
                default_branch=default_branch,
                created_at=self._now(),
            )

    def git(self, full_name: str) -> BareRepo:
        """The repository's bare git store (created empty on first use): push into `.path` to seed it."""
        with self._lock:
            repo = self._repo(full_name)
            if repo.git is None:
                repo.git = BareRepo(self._scratch / f"{repo.owner}__{repo.name}.git")
            return repo.git

    def add_pull(
        self,
        full_name: str,
        *,
        head_sha: str,
        base_sha: str,
        number: int | None = None,
        title: str = "Change a kernel",
        body: str = "",
        author: str = "contributor",
        draft: bool = False,
        state: str = "open",
        merged: bool = False,
        head_ref: str = "feature",
        base_ref: str = "main",
        head_repo: str | None = None,
        head_repo_deleted: bool = False,
        files: Iterable[dict[str, Any]] = (),
        diff: str | None = None,
        labels: Iterable[str] = (),
        commits: Iterable[dict[str, Any]] | None = None,
    ) -> int:
        """A pull request (it is an issue too). `files` items: filename, status, additions, deletions, patch,
        previous_filename. `head_repo` names a fork ("someone/fork"); default: the same repository.
        `head_repo_deleted`: the fork is gone, and GitHub answers `head.repo: null`.

        `commits`, oldest first: `author` (a login, or None for an e-mail GitHub maps to no account), `committer`
        (default: the author), optional `sha` (the last one's is `head_sha`), `email` and `committer_email` (default:
        the login's no-reply address), `message`. Without them: the
        commits between base and head of the repository's git store when it holds both, else one commit by
        `author` at `head_sha`."""
        with self._lock:
            repo = self._repo(full_name)
            record = self._new_issue(repo, title, body, author, labels, number)
            record["state"] = state
            if state == "closed":
                record["closed_at"] = self._now()
            record["pull"] = {
                "id": self._new_id(),
                "draft": draft,
                "merged": merged,
                "merged_at": self._now() if merged else None,
                "head": {
                    "sha": head_sha,
                    "ref": head_ref,
                    "repo": None if head_repo_deleted else head_repo or repo.full_name,
                },
                "base": {"sha": base_sha, "ref": base_ref},
                "files": [self._file_record(f) for f in files],
                "diff": diff,
                "commits": [],
                "reviews": [],
            }
            git = repo.git
            if commits is None and git is not None and git.kind(head_sha) == git.kind(base_sha) == "commit":
                self._fill_pull_commits(repo, record["pull"])
            else:
                self._set_pull_commits(record["pull"], [{"author": author}] if commits is None else list(commits))
            return record["number"]

    def _commit_person(self, login: str | None, email: str | None, date: str) -> dict[str, str]:
        """A commit's author or committer: a login's no-reply e-mail (or `email`); None: an address of nobody."""
        address = email or (self.noreply(login) if login else "someone@example.invalid")
        return {"name": login or "Someone", "email": address, "date": date}

    def _set_pull_commits(self, pull: dict[str, Any], commits: list[dict[str, Any]]) -> None:
        parent = pull["base"]["sha"]
        pull["commits"] = []
        for i, c in enumerate(commits):
            last = i == len(commits) - 1
            sha = c.get("sha") or (pull["head"]["sha"] if last else f"{self._new_id():040x}")
            now = self._now()
            author = self._commit_person(c.get("author"), c.get("email"), now)
            committer = (
                self._commit_person(c["committer"], c.get("committer_email"), now) if "committer" in c else author
            )
            pull["commits"].append(
                {
                    "sha": sha,
                    "author": author,
                    "committer": committer,
                    "message": c.get("message", f"commit {i + 1}"),
                    "tree": f"{self._new_id():040x}",
                    "parents": [parent],
                }
            )
            parent = sha

    def add_issue(
        self,
        full_name: str,
        title: str,
        body: str = "",
        *,
        labels: Iterable[str] = (),
        state: str = "open",
        author: str | None = None,
    ) -> int:
        with self._lock:
            repo = self._repo(full_name)
            record = self._new_issue(repo, title, body, author or self.bot_login, labels, None)
            if state == "closed":
                record.update(state="closed", state_reason="completed", closed_at=self._now())
            return record["number"]

    def add_comment(self, full_name: str, number: int, body: str, *, author: str = "reviewer") -> int:
        with self._lock:
            repo = self._repo(full_name)
            return self._new_comment(repo, self._issue(repo, number), body, self.user(author))["id"]

    def set_permission(self, full_name: str, login: str, base: str, role_name: str | None = "") -> None:
        """Make `login` a collaborator with the base role `base` (admin, maintain, write, triage, read, none).
        role_name "" (default) is the base role itself; another name is a custom role built on `base`; None omits
        the `role_name` field from answers (older GitHub Enterprise Server). Answers carry GitHub's legacy
        `permission` (maintain reads as write, triage as read) and the base role's `permissions` hash."""
        assert base in PERMISSIONS, base
        with self._lock:
            self.user(login)
            self._repo(full_name).permissions[login.lower()] = (base, base if role_name == "" else role_name)

    def fail(
        self,
        path: str | re.Pattern[str],
        *,
        status: int | None = 502,
        times: int | None = 1,
        method: str | None = None,
        after: bool = False,
        body: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        """The next `times` requests (None: all) to `path` (API path without prefix or query, or a regex
        matched in full) answer `status` (None: the connection is closed without an answer). With
        after=True the request takes effect first (a write that succeeded but whose answer was lost)."""
        with self._lock:
            self._faults.append(Fault(path, method, status, times, after, body, dict(headers or {})))

    def clear_faults(self) -> None:
        with self._lock:
            self._faults.clear()

    # ------------------------------------------------------------------ inspection

    def requests_to(
        self, method: str | None = None, path: str | re.Pattern[str] | None = None
    ) -> list[RecordedRequest]:
        with self._lock:
            return [
                r
                for r in self.requests
                if (method is None or r.method == method)
                and (
                    path is None
                    or (path.fullmatch(r.path) is not None if isinstance(path, re.Pattern) else r.path == path)
                )
            ]

    def move_head(self, full_name: str, number: int, head_sha: str) -> None:
        """A push to the pull request's branch: its head is `head_sha` from now on (what `synchronize` reports)."""
        with self._lock:
            self._issue(self._repo(full_name), number)["pull"]["head"]["sha"] = head_sha

    def writes(self) -> list[RecordedRequest]:
        with self._lock:
            return [r for r in self.requests if r.is_write]

    def comments(self, full_name: str, number: int) -> list[dict[str, Any]]:
        """The comments on an issue or PR, oldest first, as API payloads."""
        with self._lock:
            repo = self._repo(full_name)
            issue = self._issue(repo, number)
            return [self._comment_payload(repo, c) for c in issue["comments"]]

    def reviews(self, full_name: str, number: int) -> list[dict[str, Any]]:
        """The reviews of a pull request, oldest first, as API payloads, each with its live `comments` (payloads)."""
        with self._lock:
            repo = self._repo(full_name)
            issue = self._issue(repo, number)
            return [
                {
                    **self._review_payload(repo, issue, r),
                    "comments": [self._review_comment_payload(repo, issue, c) for c in self._live_comments(r)],
                }
                for r in issue["pull"]["reviews"]
            ]

    def add_review(
        self,
        full_name: str,
        number: int,
        body: str,
        *,
        author: str = "reviewer",
        comments: Iterable[dict[str, Any]] = (),
    ) -> int:
        """A person's review of the pull request's head (a COMMENT review) with inline `comments` (path, line, body)."""
        with self._lock:
            repo = self._repo(full_name)
            issue = self._issue(repo, number)
            review = self._new_review(repo, issue, body, issue["pull"]["head"]["sha"], self.user(author), comments)
            return int(review["id"])

    def issues(self, full_name: str, *, include_pulls: bool = False) -> list[dict[str, Any]]:
        with self._lock:
            repo = self._repo(full_name)
            return [
                self._issue_payload(repo, i)
                for i in sorted(repo.issues.values(), key=lambda i: i["number"])
                if include_pulls or "pull" not in i
            ]

    def statuses(self, full_name: str, sha: str) -> list[dict[str, Any]]:
        """The statuses set on `sha`, oldest first."""
        with self._lock:
            repo = self._repo(full_name)
            return [self._status_payload(repo, s) for s in repo.statuses.get(sha, [])]

    def check_runs(self, full_name: str, sha: str | None = None) -> list[dict[str, Any]]:
        """The check runs (on `sha`), oldest first, as API payloads, each with its `annotations` as recorded."""
        with self._lock:
            repo = self._repo(full_name)
            return [
                {**self._check_run_payload(repo, run), "annotations": [dict(a) for a in run["annotations"]]}
                for run in repo.check_runs.values()
                if sha is None or run["head_sha"] == sha
            ]

    def reactions(self, comment_id: int) -> list[dict[str, Any]]:
        with self._lock:
            _, _, comment = self._comments[comment_id]
            return [self._reaction_payload(r) for r in comment["reactions"]]

    # ------------------------------------------------------------------ helpers: ids, clock, lookups

    def _new_id(self) -> int:
        self._ids += 1
        return self._ids

    def _now(self) -> str:
        self._tick += 1
        return (_EPOCH + timedelta(seconds=self._tick)).strftime("%Y-%m-%dT%H:%M:%SZ")

    def _repo(self, full_name: str) -> _Repo:
        try:
            return self._repos[full_name.lower()]
        except KeyError:
            raise _not_found() from None

    @staticmethod
    def _issue(repo: _Repo, number: int) -> dict[str, Any]:
        try:
            return repo.issues[number]
        except KeyError:
            raise _not_found() from None

    def _label(self, repo: _Repo, name: str) -> dict[str, Any]:
        key = name.lower()
        if key not in repo.labels:
            repo.labels[key] = {"id": self._new_id(), "name": name, "color": "ededed", "description": None}
        return repo.labels[key]

    def _new_issue(
        self, repo: _Repo, title: str, body: str | None, author: str, labels: Iterable[str], number: int | None
    ) -> dict[str, Any]:
        if number is None:
            number = repo.next_number
        if number in repo.issues:
            raise ValueError(f"#{number} exists in {repo.full_name}")
        repo.next_number = max(repo.next_number, number + 1)
        now = self._now()
        record = {
            "id": self._new_id(),
            "number": number,
            "title": title,
            "body": body,
            "user": self.user(author),
            "labels": [self._label(repo, name) for name in labels],
            "state": "open",
            "state_reason": None,
            "locked": False,
            "comments": [],
            "created_at": now,
            "updated_at": now,
            "closed_at": None,
            "closed_by": None,
        }
        repo.issues[number] = record
        return record

    def _new_comment(self, repo: _Repo, issue: dict[str, Any], body: str, user: dict[str, Any]) -> dict[str, Any]:
        now = self._now()
        record: dict[str, Any] = {
            "id": self._new_id(),
            "body": body,
            "user": user,
            "created_at": now,
            "updated_at": now,
            "reactions": [],
        }
        issue["comments"].append(record)
        issue["updated_at"] = now
        self._comments[record["id"]] = (repo.full_name.lower(), issue["number"], record)
        return record

    def _file_record(self, f: dict[str, Any]) -> dict[str, Any]:
        additions, deletions = int(f.get("additions", 1)), int(f.get("deletions", 0))
        record = {
            "sha": f.get("sha") or f"{self._new_id():040x}",
            "filename": f["filename"],
            "status": f.get("status", "modified"),
            "additions": additions,
            "deletions": deletions,
            "changes": additions + deletions,
            "patch": f.get("patch", "@@ -1 +1 @@\n-old\n+new"),
        }
        if f.get("previous_filename"):
            record["previous_filename"] = f["previous_filename"]
        return record

    # ------------------------------------------------------------------ payloads

    def _api(self, path: str) -> str:
        return f"{self.base_url}{path}"

    def _html(self, path: str) -> str:
        return f"{self.root_url}{path}"

    def _user_payload(self, user: dict[str, Any]) -> dict[str, Any]:
        login = user["login"]
        return {
            "login": login,
            "id": user["id"],
            "node_id": _node_id("U", user["id"]),
            "avatar_url": f"{self.root_url}/avatars/{quote(login)}",
            "gravatar_id": "",
            "url": self._api(f"/users/{quote(login)}"),
            "html_url": self._html(f"/{quote(login)}"),
            "type": user["type"],
            "site_admin": False,
        }

    def _repo_payload(self, repo: _Repo | str) -> dict[str, Any]:
        if isinstance(repo, str):  # a PR's head repository, possibly a fork we hold no state for
            known = self._repos.get(repo.lower()) or self._forks.get(repo.lower())
            if known is None:
                owner, name = repo.split("/")
                self.user(owner)
                known = _Repo(self._new_id(), owner, name, private=False, default_branch="main", created_at=self._now())
                self._forks[repo.lower()] = known
            repo = known
        api = self._api(f"/repos/{repo.full_name}")
        payload = {
            "id": repo.id,
            "node_id": _node_id("R", repo.id),
            "name": repo.name,
            "full_name": repo.full_name,
            "owner": self._user_payload(self._users[repo.owner.lower()]),
            "private": repo.private,
            "html_url": self._html(f"/{repo.full_name}"),
            "description": None,
            "fork": False,
            "url": api,
            "clone_url": self._html(f"/{repo.full_name}.git"),
            "issues_url": api + "/issues{/number}",
            "pulls_url": api + "/pulls{/number}",
            "statuses_url": api + "/statuses/{sha}",
            "collaborators_url": api + "/collaborators{/collaborator}",
            "comments_url": api + "/comments{/number}",
            "issue_comment_url": api + "/issues/comments{/number}",
            "labels_url": api + "/labels{/name}",
            "commits_url": api + "/commits{/sha}",
            "default_branch": repo.default_branch,
            "visibility": "private" if repo.private else "public",
            "archived": False,
            "disabled": False,
            "has_issues": True,
            "open_issues_count": sum(1 for i in repo.issues.values() if i["state"] == "open"),
            "created_at": repo.created_at,
            "updated_at": repo.created_at,
            "pushed_at": repo.created_at,
            "permissions": dict(PERMISSIONS["admin"]),
        }
        return payload

    def _label_payload(self, repo: _Repo, label: dict[str, Any]) -> dict[str, Any]:
        return {
            "id": label["id"],
            "node_id": _node_id("LA", label["id"]),
            "url": self._api(f"/repos/{repo.full_name}/labels/{quote(label['name'])}"),
            "name": label["name"],
            "description": label["description"],
            "color": label["color"],
            "default": False,
        }

    def _issue_payload(self, repo: _Repo, issue: dict[str, Any]) -> dict[str, Any]:
        n = issue["number"]
        api = self._api(f"/repos/{repo.full_name}/issues/{n}")
        is_pull = "pull" in issue
        payload: dict[str, Any] = {
            "id": issue["id"],
            "node_id": _node_id("PR" if is_pull else "I", issue["id"]),
            "url": api,
            "repository_url": self._api(f"/repos/{repo.full_name}"),
            "labels_url": api + "/labels{/name}",
            "comments_url": api + "/comments",
            "events_url": api + "/events",
            "html_url": self._html(f"/{repo.full_name}/{'pull' if is_pull else 'issues'}/{n}"),
            "number": n,
            "state": issue["state"],
            "state_reason": issue["state_reason"],
            "title": issue["title"],
            "body": issue["body"],
            "user": self._user_payload(issue["user"]),
            "labels": [self._label_payload(repo, label) for label in issue["labels"]],
            "assignee": None,
            "assignees": [],
            "milestone": None,
            "locked": issue["locked"],
            "active_lock_reason": None,
            "comments": len(issue["comments"]),
            "closed_at": issue["closed_at"],
            "closed_by": self._user_payload(issue["closed_by"]) if issue["closed_by"] else None,
            "created_at": issue["created_at"],
            "updated_at": issue["updated_at"],
            "author_association": "MEMBER",
        }
        if is_pull:
            pulls = self._api(f"/repos/{repo.full_name}/pulls/{n}")
            html = self._html(f"/{repo.full_name}/pull/{n}")
            payload["pull_request"] = {
                "url": pulls,
                "html_url": html,
                "diff_url": html + ".diff",
                "patch_url": html + ".patch",
                "merged_at": issue["pull"]["merged_at"],
            }
            payload["draft"] = issue["pull"]["draft"]
        return payload

    def _pull_payload(self, repo: _Repo, issue: dict[str, Any]) -> dict[str, Any]:
        pull = issue["pull"]
        n = issue["number"]
        api = self._api(f"/repos/{repo.full_name}/pulls/{n}")
        html = self._html(f"/{repo.full_name}/pull/{n}")
        issue_api = self._api(f"/repos/{repo.full_name}/issues/{n}")
        head_repo = self._repo_payload(pull["head"]["repo"]) if pull["head"]["repo"] is not None else None
        head_user = head_repo["owner"] if head_repo is not None else self._user_payload(issue["user"])
        base_repo = self._repo_payload(repo)
        files = pull["files"]
        return {
            "url": api,
            "id": pull["id"],
            "node_id": _node_id("PR", pull["id"]),
            "html_url": html,
            "diff_url": html + ".diff",
            "patch_url": html + ".patch",
            "issue_url": issue_api,
            "commits_url": api + "/commits",
            "review_comments_url": api + "/comments",
            "review_comment_url": self._api(f"/repos/{repo.full_name}/pulls/comments{{/number}}"),
            "comments_url": issue_api + "/comments",
            "statuses_url": self._api(f"/repos/{repo.full_name}/statuses/{pull['head']['sha']}"),
            "number": n,
            "state": issue["state"],
            "locked": issue["locked"],
            "title": issue["title"],
            "user": self._user_payload(issue["user"]),
            "body": issue["body"],
            "labels": [self._label_payload(repo, label) for label in issue["labels"]],
            "milestone": None,
            "active_lock_reason": None,
            "created_at": issue["created_at"],
            "updated_at": issue["updated_at"],
            "closed_at": issue["closed_at"],
            "merged_at": pull["merged_at"],
            "merge_commit_sha": None,
            "assignee": None,
            "assignees": [],
            "requested_reviewers": [],
            "requested_teams": [],
            "head": {
                "label": f"{head_user['login']}:{pull['head']['ref']}",
                "ref": pull["head"]["ref"],
                "sha": pull["head"]["sha"],
                "user": head_user,
                "repo": head_repo,
            },
            "base": {
                "label": f"{repo.owner}:{pull['base']['ref']}",
                "ref": pull["base"]["ref"],
                "sha": pull["base"]["sha"],
                "user": base_repo["owner"],
                "repo": base_repo,
            },
            "_links": {
                "self": {"href": api},
                "html": {"href": html},
                "issue": {"href": issue_api},
                "comments": {"href": issue_api + "/comments"},
                "review_comments": {"href": api + "/comments"},
                "commits": {"href": api + "/commits"},
                "statuses": {"href": self._api(f"/repos/{repo.full_name}/statuses/{pull['head']['sha']}")},
            },
            "author_association": "CONTRIBUTOR",
            "auto_merge": None,
            "draft": pull["draft"],
            "merged": pull["merged"],
            "mergeable": None if pull["merged"] else True,
            "rebaseable": None if pull["merged"] else True,
            "mergeable_state": "clean",
            "merged_by": None,
            "comments": len(issue["comments"]),
            "review_comments": 0,
            "maintainer_can_modify": False,
            "commits": len(pull["commits"]),
            "additions": sum(f["additions"] for f in files),
            "deletions": sum(f["deletions"] for f in files),
            "changed_files": len(files),
        }

    def _file_payload(self, repo: _Repo, pull: dict[str, Any], f: dict[str, Any]) -> dict[str, Any]:
        head = pull["head"]["sha"]
        name = quote(f["filename"])
        return {
            **{k: v for k, v in f.items()},
            "blob_url": self._html(f"/{repo.full_name}/blob/{head}/{name}"),
            "raw_url": self._html(f"/{repo.full_name}/raw/{head}/{name}"),
            "contents_url": self._api(f"/repos/{repo.full_name}/contents/{name}?ref={head}"),
        }

    def _pull_commit_payload(self, repo: _Repo, c: dict[str, Any]) -> dict[str, Any]:
        """One item of `GET …/pulls/{n}/commits`: the commit as git holds it, and the accounts GitHub maps its
        author's and committer's e-mails to (null where it maps one to no account)."""
        api, sha = self._api(f"/repos/{repo.full_name}"), c["sha"]
        author, committer = self._account_of(c["author"]["email"]), self._account_of(c["committer"]["email"])
        return {
            "url": f"{api}/commits/{sha}",
            "sha": sha,
            "node_id": _node_id("C", int(sha[:8], 16)),
            "html_url": self._html(f"/{repo.full_name}/commit/{sha}"),
            "comments_url": f"{api}/commits/{sha}/comments",
            "commit": {
                "url": f"{api}/git/commits/{sha}",
                "author": dict(c["author"]),
                "committer": dict(c["committer"]),
                "message": c["message"],
                "tree": {"url": f"{api}/git/trees/{c['tree']}", "sha": c["tree"]},
                "comment_count": 0,
                "verification": {"verified": False, "reason": "unsigned", "signature": None, "payload": None},
            },
            "author": self._user_payload(author) if author is not None else None,
            "committer": self._user_payload(committer) if committer is not None else None,
            "parents": [
                {"url": f"{api}/commits/{p}", "html_url": self._html(f"/{repo.full_name}/commit/{p}"), "sha": p}
                for p in c["parents"]
            ],
        }

    def _diff_text(self, pull: dict[str, Any]) -> str:
        if pull["diff"] is not None:
            return pull["diff"]
        parts = []
        for f in pull["files"]:
            old = f.get("previous_filename", f["filename"])
            parts.append(f"diff --git a/{old} b/{f['filename']}\n--- a/{old}\n+++ b/{f['filename']}\n{f['patch']}\n")
        return "".join(parts)

    def _comment_payload(self, repo: _Repo, comment: dict[str, Any], number: int | None = None) -> dict[str, Any]:
        if number is None:
            number = self._comments[comment["id"]][1]
        cid = comment["id"]
        is_pull = "pull" in repo.issues[number]
        api = self._api(f"/repos/{repo.full_name}/issues/comments/{cid}")
        counts = {content: 0 for content in REACTIONS}
        for reaction in comment["reactions"]:
            counts[reaction["content"]] += 1
        return {
            "id": cid,
            "node_id": _node_id("IC", cid),
            "url": api,
            "html_url": self._html(f"/{repo.full_name}/{'pull' if is_pull else 'issues'}/{number}#issuecomment-{cid}"),
            "body": comment["body"],
            "user": self._user_payload(comment["user"]),
            "created_at": comment["created_at"],
            "updated_at": comment["updated_at"],
            "issue_url": self._api(f"/repos/{repo.full_name}/issues/{number}"),
            "author_association": "MEMBER" if comment["user"]["type"] == "Bot" else "CONTRIBUTOR",
            "performed_via_github_app": None,
            "reactions": {"url": api + "/reactions", "total_count": len(comment["reactions"]), **counts},
        }

    def _new_review(
        self,
        repo: _Repo,
        issue: dict[str, Any],
        body: str,
        commit_id: str,
        user: dict[str, Any],
        comments: Iterable[dict[str, Any]],
        event: str = "COMMENT",
    ) -> dict[str, Any]:
        now = self._now()
        review: dict[str, Any] = {
            "id": self._new_id(),
            "user": user,
            "body": body,
            "commit_id": commit_id,
            "state": {"COMMENT": "COMMENTED", "APPROVE": "APPROVED", "REQUEST_CHANGES": "CHANGES_REQUESTED"}[event],
            "submitted_at": now,
            "comments": [],
        }
        for c in comments:
            record = {
                "id": self._new_id(),
                "review_id": review["id"],
                "path": c["path"],
                "line": int(c["line"]),
                "side": c.get("side", "RIGHT"),
                "body": c["body"],
                "user": user,
                "commit_id": commit_id,
                "created_at": now,
                "updated_at": now,
                "deleted": False,
            }
            review["comments"].append(record)
            self._review_comments[record["id"]] = (repo.full_name.lower(), issue["number"], record)
        issue["pull"]["reviews"].append(review)
        return review

    @staticmethod
    def _live_comments(review: dict[str, Any]) -> list[dict[str, Any]]:
        return [c for c in review["comments"] if not c["deleted"]]

    def _review_payload(self, repo: _Repo, issue: dict[str, Any], review: dict[str, Any]) -> dict[str, Any]:
        n = issue["number"]
        pull_api = self._api(f"/repos/{repo.full_name}/pulls/{n}")
        return {
            "id": review["id"],
            "node_id": _node_id("PRR", review["id"]),
            "user": self._user_payload(review["user"]),
            "body": review["body"],
            "state": review["state"],
            "html_url": self._html(f"/{repo.full_name}/pull/{n}#pullrequestreview-{review['id']}"),
            "pull_request_url": pull_api,
            "author_association": "MEMBER" if review["user"]["type"] == "Bot" else "CONTRIBUTOR",
            "submitted_at": review["submitted_at"],
            "commit_id": review["commit_id"],
        }

    def _review_comment_payload(self, repo: _Repo, issue: dict[str, Any], c: dict[str, Any]) -> dict[str, Any]:
        n = issue["number"]
        api = self._api(f"/repos/{repo.full_name}/pulls/comments/{c['id']}")
        return {
            "url": api,
            "id": c["id"],
            "node_id": _node_id("PRRC", c["id"]),
            "pull_request_review_id": c["review_id"],
            "diff_hunk": "",
            "path": c["path"],
            "commit_id": c["commit_id"],
            "original_commit_id": c["commit_id"],
            "user": self._user_payload(c["user"]),
            "body": c["body"],
            "created_at": c["created_at"],
            "updated_at": c["updated_at"],
            "html_url": self._html(f"/{repo.full_name}/pull/{n}#discussion_r{c['id']}"),
            "pull_request_url": self._api(f"/repos/{repo.full_name}/pulls/{n}"),
            "author_association": "MEMBER" if c["user"]["type"] == "Bot" else "CONTRIBUTOR",
            "line": c["line"],
            "original_line": c["line"],
            "side": c["side"],
            "start_line": None,
            "original_start_line": None,
            "start_side": None,
            "subject_type": "line",
        }

    def _diff_lines(self, pull: dict[str, Any]) -> dict[str, set[int]]:
        """Per path, the lines of head's file the pull request's diff shows (added or context): where GitHub lets a
        RIGHT-side review comment sit."""
        lines: dict[str, set[int]] = {}
        path = ""
        new = 0
        for text in self._diff_text(pull).split("\n"):
            if text.startswith("+++ "):
                path = text[4:].removeprefix("b/")
                lines.setdefault(path, set())
            elif text.startswith("@@"):
                match = re.match(r"@@ -\d+(?:,\d+)? \+(\d+)(?:,\d+)? @@", text)
                new = int(match.group(1)) if match else 0
            elif path and new and text[:1] in (" ", "+"):
                lines[path].add(new)
                new += 1
        return lines

    def _reaction_payload(self, reaction: dict[str, Any]) -> dict[str, Any]:
        return {
            "id": reaction["id"],
            "node_id": _node_id("REA", reaction["id"]),
            "user": self._user_payload(reaction["user"]),
            "content": reaction["content"],
            "created_at": reaction["created_at"],
        }

    def _status_payload(self, repo: _Repo, status: dict[str, Any]) -> dict[str, Any]:
        return {
            "url": self._api(f"/repos/{repo.full_name}/statuses/{status['sha']}"),
            "avatar_url": f"{self.root_url}/avatars/{quote(status['creator']['login'])}",
            "id": status["id"],
            "node_id": _node_id("SC", status["id"]),
            "state": status["state"],
            "description": status["description"],
            "target_url": status["target_url"],
            "context": status["context"],
            "created_at": status["created_at"],
            "updated_at": status["created_at"],
            "creator": self._user_payload(status["creator"]),
        }

    # ------------------------------------------------------------------ dispatch

    def handle(self, method: str, target: str, headers: dict[str, str], raw: bytes) -> _Response:
        """Answer one HTTP request (called from the handler threads). Raises _Drop to drop the connection."""
        split = urlsplit(target)
        path, query = split.path, parse_qs(split.query, keep_blank_values=True)
        body: Any = None
        if raw:
            try:
                body = json.loads(raw)
            except ValueError:
                body = None
        with self._lock:
            if not self.prefix:
                api_path = path
            elif path.startswith(self.prefix + "/"):
                api_path = path[len(self.prefix) :]
            else:
                api_path = "(outside the API root) " + path  # matches no route: 404
            record = RecordedRequest(method, api_path, query, headers, body)
            self.requests.append(record)
            fault = self._take_fault(method, api_path)
            try:
                if fault is not None and not fault.after:
                    return self._fault_response(record, fault)
                if not self._authorized(headers.get("authorization")):
                    raise ApiError(401, "Bad credentials")
                if raw and body is None:
                    raise ApiError(400, "Problems parsing JSON")
                response = self._route(method, api_path, query, headers, body)
            except ApiError as exc:
                payload: dict[str, Any] = {"message": exc.message, "documentation_url": DOCS, "status": str(exc.status)}
                if exc.errors:
                    payload["errors"] = exc.errors
                response = self._json(exc.status, payload)
            if fault is not None:
                return self._fault_response(record, fault)
            record.status = response.status
            return response

    def _take_fault(self, method: str, path: str) -> Fault | None:
        for fault in self._faults:
            if fault.matches(method, path) and (fault.times is None or fault.times > 0):
                if fault.times is not None:
                    fault.times -= 1
                return fault
        return None

    def _fault_response(self, record: RecordedRequest, fault: Fault) -> _Response:
        if fault.status is None:
            raise _Drop
        record.status = fault.status
        if fault.body is not None:
            text = fault.body
        elif fault.status >= 500:  # GitHub's front end answers gateway errors with HTML, not JSON
            text = f"<html><body><h1>{fault.status} Server Error</h1>Unicorn!</body></html>"
        else:
            text = json.dumps({"message": "Injected fault", "documentation_url": DOCS, "status": str(fault.status)})
        content_type = "application/json; charset=utf-8" if text.startswith("{") else "text/html; charset=utf-8"
        return _Response(fault.status, text.encode(), {"Content-Type": content_type, **fault.headers})

    def _authorized(self, header: str | None) -> bool:
        if self.token is None:
            return True
        if not header:
            return False
        scheme, _, value = header.partition(" ")
        return scheme.lower() in ("token", "bearer") and value.strip() == self.token

    def _json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> _Response:
        return _Response(
            status,
            json.dumps(payload).encode(),
            {"Content-Type": "application/json; charset=utf-8", **(headers or {})},
        )

    _ROUTES: tuple[tuple[str, re.Pattern[str], str], ...] = tuple(
        (method, re.compile(pattern), handler)
        for method, pattern, handler in (
            ("GET", r"/repos/(?P<o>[^/]+)/(?P<r>[^/]+)", "get_repo"),
            ("GET", r"/repos/(?P<o>[^/]+)/(?P<r>[^/]+)/pulls/(?P<n>\d+)", "get_pull"),
            ("GET", r"/repos/(?P<o>[^/]+)/(?P<r>[^/]+)/pulls/(?P<n>\d+)/files", "list_pull_files"),
            ("GET", r"/repos/(?P<o>[^/]+)/(?P<r>[^/]+)/pulls/(?P<n>\d+)/commits", "list_pull_commits"),
            ("GET", r"/repos/(?P<o>[^/]+)/(?P<r>[^/]+)/issues", "list_issues"),
            ("POST", r"/repos/(?P<o>[^/]+)/(?P<r>[^/]+)/issues", "create_issue"),
            ("GET", r"/repos/(?P<o>[^/]+)/(?P<r>[^/]+)/issues/(?P<n>\d+)", "get_issue"),
            ("PATCH", r"/repos/(?P<o>[^/]+)/(?P<r>[^/]+)/issues/(?P<n>\d+)", "edit_issue"),
            ("GET", r"/repos/(?P<o>[^/]+)/(?P<r>[^/]+)/issues/(?P<n>\d+)/comments", "list_comments"),
            ("POST", r"/repos/(?P<o>[^/]+)/(?P<r>[^/]+)/issues/(?P<n>\d+)/comments", "create_comment"),
            ("GET", r"/repos/(?P<o>[^/]+)/(?P<r>[^/]+)/issues/comments/(?P<id>\d+)", "get_comment"),
            ("PATCH", r"/repos/(?P<o>[^/]+)/(?P<r>[^/]+)/issues/comments/(?P<id>\d+)", "edit_comment"),
            ("GET", r"/repos/(?P<o>[^/]+)/(?P<r>[^/]+)/issues/comments/(?P<id>\d+)/reactions", "list_reactions"),
            ("POST", r"/repos/(?P<o>[^/]+)/(?P<r>[^/]+)/issues/comments/(?P<id>\d+)/reactions", "create_reaction"),
            ("POST", r"/repos/(?P<o>[^/]+)/(?P<r>[^/]+)/statuses/(?P<sha>[^/]+)", "create_status"),
            ("GET", r"/repos/(?P<o>[^/]+)/(?P<r>[^/]+)/commits/(?P<ref>[^/]+)/statuses", "list_statuses"),
            ("GET", r"/repos/(?P<o>[^/]+)/(?P<r>[^/]+)/commits/(?P<ref>[^/]+)/status", "combined_status"),
            (
                "GET",
                r"/repos/(?P<o>[^/]+)/(?P<r>[^/]+)/collaborators/(?P<user>[^/]+)/permission",
                "get_permission",
            ),
            ("POST", r"/repos/(?P<o>[^/]+)/(?P<r>[^/]+)/check-runs", "create_check_run"),
            ("PATCH", r"/repos/(?P<o>[^/]+)/(?P<r>[^/]+)/check-runs/(?P<id>\d+)", "update_check_run"),
            ("GET", r"/repos/(?P<o>[^/]+)/(?P<r>[^/]+)/check-runs/(?P<id>\d+)", "get_check_run"),
            ("GET", r"/repos/(?P<o>[^/]+)/(?P<r>[^/]+)/check-runs/(?P<id>\d+)/annotations", "list_annotations"),
            ("GET", r"/repos/(?P<o>[^/]+)/(?P<r>[^/]+)/commits/(?P<ref>[^/]+)/check-runs", "list_check_runs"),
            ("GET", r"/search/issues", "search_issues"),
            ("GET", r"/user", "get_user"),
            ("GET", r"/repos/(?P<o>[^/]+)/(?P<r>[^/]+)/pulls", "list_pulls"),
            ("POST", r"/repos/(?P<o>[^/]+)/(?P<r>[^/]+)/pulls", "create_pull"),
            ("PATCH", r"/repos/(?P<o>[^/]+)/(?P<r>[^/]+)/pulls/(?P<n>\d+)", "edit_pull"),
            ("POST", r"/repos/(?P<o>[^/]+)/(?P<r>[^/]+)/git/blobs", "create_blob"),
            ("POST", r"/repos/(?P<o>[^/]+)/(?P<r>[^/]+)/git/trees", "create_tree"),
            ("POST", r"/repos/(?P<o>[^/]+)/(?P<r>[^/]+)/git/commits", "create_git_commit"),
            ("GET", r"/repos/(?P<o>[^/]+)/(?P<r>[^/]+)/git/commits/(?P<sha>[^/]+)", "get_git_commit"),
            ("GET", r"/repos/(?P<o>[^/]+)/(?P<r>[^/]+)/git/ref/(?P<ref>.+)", "get_ref"),
            ("POST", r"/repos/(?P<o>[^/]+)/(?P<r>[^/]+)/git/refs", "create_ref"),
            ("PATCH", r"/repos/(?P<o>[^/]+)/(?P<r>[^/]+)/git/refs/(?P<ref>.+)", "update_ref"),
            ("POST", r"/repos/(?P<o>[^/]+)/(?P<r>[^/]+)/actions/workflows/(?P<wf>[^/]+)/dispatches", "dispatch"),
            ("GET", r"/repos/(?P<o>[^/]+)/(?P<r>[^/]+)/pulls/(?P<n>\d+)/reviews", "list_reviews"),
            ("POST", r"/repos/(?P<o>[^/]+)/(?P<r>[^/]+)/pulls/(?P<n>\d+)/reviews", "create_review"),
            ("PUT", r"/repos/(?P<o>[^/]+)/(?P<r>[^/]+)/pulls/(?P<n>\d+)/reviews/(?P<id>\d+)", "update_review"),
            (
                "GET",
                r"/repos/(?P<o>[^/]+)/(?P<r>[^/]+)/pulls/(?P<n>\d+)/reviews/(?P<id>\d+)/comments",
                "list_review_comments",
            ),
            ("PATCH", r"/repos/(?P<o>[^/]+)/(?P<r>[^/]+)/pulls/comments/(?P<id>\d+)", "edit_review_comment"),
            ("DELETE", r"/repos/(?P<o>[^/]+)/(?P<r>[^/]+)/pulls/comments/(?P<id>\d+)", "delete_review_comment"),
        )
    )

    def _route(
        self, method: str, path: str, query: dict[str, list[str]], headers: dict[str, str], body: Any
    ) -> _Response:
        for route_method, pattern, name in self._ROUTES:
            match = pattern.fullmatch(path)
            if match and route_method == method:
                params = {k: unquote(v) for k, v in match.groupdict().items()}
                return getattr(self, f"_h_{name}")(params=params, query=query, headers=headers, body=body, path=path)
        raise _not_found()

    # ------------------------------------------------------------------ pagination

    def _paged(
        self, path: str, query: dict[str, list[str]], items: list[Any], *, wrap: dict[str, Any] | None = None
    ) -> _Response:
        try:
            per_page = min(100, max(1, int(_first(query, "per_page") or 30)))
            page = max(1, int(_first(query, "page") or 1))
        except ValueError:
            raise ApiError(422, "Invalid page parameters") from None
        last = max(1, math.ceil(len(items) / per_page))
        chunk = items[(page - 1) * per_page : page * per_page]

        def link(to: int) -> str:
            params = {k: v[-1] for k, v in query.items()}
            params["page"] = str(to)
            return f"{self._api(path)}?{urlencode(params)}"

        rels = []
        if page > 1:
            rels += [f'<{link(page - 1)}>; rel="prev"', f'<{link(1)}>; rel="first"']
        if page < last:
            rels += [f'<{link(page + 1)}>; rel="next"', f'<{link(last)}>; rel="last"']
        headers = {"Link": ", ".join(rels)} if rels else {}
        payload: Any = chunk if wrap is None else {**wrap, "items": chunk}
        return self._json(200, payload, headers)

    # ------------------------------------------------------------------ handlers

    def _h_get_repo(self, params: dict[str, str], **_: Any) -> _Response:
        return self._json(200, self._repo_payload(self._repo(f"{params['o']}/{params['r']}")))

    def _pull_record(self, params: dict[str, str]) -> tuple[_Repo, dict[str, Any]]:
        repo = self._repo(f"{params['o']}/{params['r']}")
        issue = self._issue(repo, int(params["n"]))
        if "pull" not in issue:
            raise _not_found()
        return repo, issue

    def _h_get_pull(self, params: dict[str, str], headers: dict[str, str], **_: Any) -> _Response:
        repo, issue = self._pull_record(params)
        accept = headers.get("accept", "")
        for kind in ("diff", "patch"):
            if f"application/vnd.github.{kind}" in accept or f"application/vnd.github.v3.{kind}" in accept:
                text = self._diff_text(issue["pull"])
                return _Response(200, text.encode(), {"Content-Type": f"application/vnd.github.{kind}; charset=utf-8"})
        return self._json(200, self._pull_payload(repo, issue))

    def _h_list_pull_files(self, params: dict[str, str], query: dict[str, list[str]], path: str, **_: Any) -> _Response:
        repo, issue = self._pull_record(params)
        pull = issue["pull"]
        return self._paged(path, query, [self._file_payload(repo, pull, f) for f in pull["files"]])

    def _h_list_pull_commits(
        self, params: dict[str, str], query: dict[str, list[str]], path: str, **_: Any
    ) -> _Response:
        """At most 250 commits, as GitHub documents ("Lists a maximum of 250 commits for a pull request")."""
        repo, issue = self._pull_record(params)
        listed = issue["pull"]["commits"][:MAX_PULL_COMMITS]
        return self._paged(path, query, [self._pull_commit_payload(repo, c) for c in listed])

    def _h_list_issues(self, params: dict[str, str], query: dict[str, list[str]], path: str, **_: Any) -> _Response:
        repo = self._repo(f"{params['o']}/{params['r']}")
        state = _first(query, "state") or "open"
        if state not in ("open", "closed", "all"):
            raise _invalid("Issue", "state")
        wanted = {name.strip().lower() for name in (_first(query, "labels") or "").split(",") if name.strip()}
        creator = (_first(query, "creator") or "").lower()
        since = _first(query, "since") or ""
        items = [
            issue
            for issue in repo.issues.values()
            if (state == "all" or issue["state"] == state)
            and wanted <= {label["name"].lower() for label in issue["labels"]}
            and (not creator or issue["user"]["login"].lower() == creator)
            and (not since or issue["updated_at"] >= since)
        ]
        sort = _first(query, "sort") or "created"
        key = {
            "created": lambda i: (i["created_at"], i["number"]),
            "updated": lambda i: (i["updated_at"], i["number"]),
            "comments": lambda i: (len(i["comments"]), i["number"]),
        }.get(sort)
        if key is None:
            raise _invalid("Issue", "sort")
        items.sort(key=key, reverse=(_first(query, "direction") or "desc") == "desc")
        return self._paged(path, query, [self._issue_payload(repo, i) for i in items])

    def _labels_from(self, repo: _Repo, value: Any) -> list[dict[str, Any]]:
        if not isinstance(value, list):
            raise _invalid("Issue", "labels")
        names = [v["name"] if isinstance(v, dict) else v for v in value]
        if not all(isinstance(n, str) and n for n in names):
            raise _invalid("Issue", "labels")
        unique: dict[str, dict[str, Any]] = {}
        for name in names:
            unique.setdefault(name.lower(), self._label(repo, name))
        return list(unique.values())

    def _h_create_issue(self, params: dict[str, str], body: Any, **_: Any) -> _Response:
        repo = self._repo(f"{params['o']}/{params['r']}")
        if not isinstance(body, dict) or not isinstance(body.get("title"), str | int) or body.get("title") == "":
            raise _invalid("Issue", "title", "missing_field")
        text = body.get("body")
        if text is not None and not isinstance(text, str):
            raise _invalid("Issue", "body")
        labels = body.get("labels", [])
        issue = self._new_issue(repo, str(body["title"]), text, self.bot_login, [], None)
        issue["labels"] = self._labels_from(repo, labels)
        return self._json(
            201,
            self._issue_payload(repo, issue),
            {"Location": self._api(f"/repos/{repo.full_name}/issues/{issue['number']}")},
        )

    def _h_get_issue(self, params: dict[str, str], **_: Any) -> _Response:
        repo = self._repo(f"{params['o']}/{params['r']}")
        return self._json(200, self._issue_payload(repo, self._issue(repo, int(params["n"]))))

    def _h_edit_issue(self, params: dict[str, str], body: Any, **_: Any) -> _Response:
        repo = self._repo(f"{params['o']}/{params['r']}")
        issue = self._issue(repo, int(params["n"]))
        if not isinstance(body, dict):
            raise _invalid("Issue", "body")
        if "title" in body:
            if not isinstance(body["title"], str) or not body["title"]:
                raise _invalid("Issue", "title")
            issue["title"] = body["title"]
        if "body" in body:
            if body["body"] is not None and not isinstance(body["body"], str):
                raise _invalid("Issue", "body")
            issue["body"] = body["body"]
        if "labels" in body:
            issue["labels"] = self._labels_from(repo, body["labels"])
        if "state" in body:
            state = body["state"]
            if state not in ("open", "closed"):
                raise _invalid("Issue", "state")
            if state == "closed" and issue["state"] == "open":
                issue.update(
                    state="closed",
                    state_reason=body.get("state_reason") or "completed",
                    closed_at=self._now(),
                    closed_by=self.user(self.bot_login),
                )
            elif state == "open" and issue["state"] == "closed":
                issue.update(state="open", state_reason="reopened", closed_at=None, closed_by=None)
        issue["updated_at"] = self._now()
        return self._json(200, self._issue_payload(repo, issue))

    def _h_list_comments(self, params: dict[str, str], query: dict[str, list[str]], path: str, **_: Any) -> _Response:
        repo = self._repo(f"{params['o']}/{params['r']}")
        number = int(params["n"])
        issue = self._issue(repo, number)
        since = _first(query, "since") or ""
        items = [c for c in issue["comments"] if not since or c["updated_at"] >= since]
        return self._paged(path, query, [self._comment_payload(repo, c, number) for c in items])

    def _h_create_comment(self, params: dict[str, str], body: Any, **_: Any) -> _Response:
        repo = self._repo(f"{params['o']}/{params['r']}")
        number = int(params["n"])
        issue = self._issue(repo, number)
        if not isinstance(body, dict) or not isinstance(body.get("body"), str) or not body["body"]:
            raise _invalid("IssueComment", "body", "missing_field")
        if len(body["body"]) > 65536:
            raise _invalid("IssueComment", "body", "custom", "Body is too long (maximum is 65536 characters)")
        if issue["locked"]:
            raise ApiError(403, "Unable to create comment because issue is locked.")
        comment = self._new_comment(repo, issue, body["body"], self.user(self.bot_login, self.bot_type))
        payload = self._comment_payload(repo, comment, number)
        return self._json(201, payload, {"Location": payload["url"]})

    def _comment_record(self, params: dict[str, str]) -> tuple[_Repo, dict[str, Any]]:
        repo = self._repo(f"{params['o']}/{params['r']}")
        found = self._comments.get(int(params["id"]))
        if found is None or found[0] != repo.full_name.lower():
            raise _not_found()
        return repo, found[2]

    def _h_get_comment(self, params: dict[str, str], **_: Any) -> _Response:
        repo, comment = self._comment_record(params)
        return self._json(200, self._comment_payload(repo, comment))

    def _h_edit_comment(self, params: dict[str, str], body: Any, **_: Any) -> _Response:
        repo, comment = self._comment_record(params)
        if not isinstance(body, dict) or not isinstance(body.get("body"), str) or not body["body"]:
            raise _invalid("IssueComment", "body", "missing_field")
        if len(body["body"]) > 65536:
            raise _invalid("IssueComment", "body", "custom", "Body is too long (maximum is 65536 characters)")
        comment["body"] = body["body"]
        comment["updated_at"] = self._now()
        return self._json(200, self._comment_payload(repo, comment))

    def _h_list_reactions(self, params: dict[str, str], query: dict[str, list[str]], path: str, **_: Any) -> _Response:
        _repo, comment = self._comment_record(params)
        return self._paged(path, query, [self._reaction_payload(r) for r in comment["reactions"]])

    def _h_create_reaction(self, params: dict[str, str], body: Any, **_: Any) -> _Response:
        _repo, comment = self._comment_record(params)
        content = body.get("content") if isinstance(body, dict) else None
        if content not in REACTIONS:
            raise _invalid("Reaction", "content")
        me = self.user(self.bot_login, self.bot_type)
        for reaction in comment["reactions"]:
            if reaction["content"] == content and reaction["user"] is me:
                return self._json(200, self._reaction_payload(reaction))
        reaction = {"id": self._new_id(), "user": me, "content": content, "created_at": self._now()}
        comment["reactions"].append(reaction)
        return self._json(201, self._reaction_payload(reaction))

    def _h_create_status(self, params: dict[str, str], body: Any, **_: Any) -> _Response:
        repo = self._repo(f"{params['o']}/{params['r']}")
        if not isinstance(body, dict) or body.get("state") not in STATUS_STATES:
            raise _invalid("Status", "state")
        description = body.get("description")
        if description is not None and (not isinstance(description, str) or len(description) > 140):
            raise _invalid("Status", "description", "custom", "description is too long (maximum is 140 characters)")
        context = body.get("context") or "default"
        status = {
            "id": self._new_id(),
            "sha": params["sha"],
            "state": body["state"],
            "description": description,
            "target_url": body.get("target_url"),
            "context": context,
            "creator": self.user(self.bot_login, self.bot_type),
            "created_at": self._now(),
        }
        repo.statuses.setdefault(params["sha"], []).append(status)
        return self._json(201, self._status_payload(repo, status))

    def _h_list_statuses(self, params: dict[str, str], query: dict[str, list[str]], path: str, **_: Any) -> _Response:
        repo = self._repo(f"{params['o']}/{params['r']}")
        items = list(reversed(repo.statuses.get(params["ref"], [])))
        return self._paged(path, query, [self._status_payload(repo, s) for s in items])

    def _h_combined_status(self, params: dict[str, str], **_: Any) -> _Response:
        repo = self._repo(f"{params['o']}/{params['r']}")
        latest: dict[str, dict[str, Any]] = {}
        for status in repo.statuses.get(params["ref"], []):
            latest[status["context"]] = status
        states = {s["state"] for s in latest.values()}
        if not latest or "pending" in states:
            overall = "pending"
        elif states & {"error", "failure"}:
            overall = "failure"
        else:
            overall = "success"
        api = self._api(f"/repos/{repo.full_name}/commits/{params['ref']}")
        return self._json(
            200,
            {
                "state": overall,
                "statuses": [self._status_payload(repo, s) for s in latest.values()],
                "sha": params["ref"],
                "total_count": len(latest),
                "repository": self._repo_payload(repo),
                "commit_url": api,
                "url": api + "/status",
            },
        )

    # check runs: docs.github.com/rest/checks/runs (create, update, get, list for a ref, list annotations)

    def _check_run_payload(self, repo: _Repo, run: dict[str, Any]) -> dict[str, Any]:
        api = self._api(f"/repos/{repo.full_name}/check-runs/{run['id']}")
        return {
            "id": run["id"],
            "node_id": _node_id("CR", run["id"]),
            "head_sha": run["head_sha"],
            "external_id": run["external_id"],
            "url": api,
            "html_url": self._html(f"/{repo.full_name}/runs/{run['id']}"),
            "details_url": run["details_url"],
            "status": run["status"],
            "conclusion": run["conclusion"],
            "started_at": run["started_at"],
            "completed_at": run["completed_at"],
            "name": run["name"],
            "output": {
                "title": run["output"].get("title"),
                "summary": run["output"].get("summary"),
                "text": run["output"].get("text"),
                "annotations_count": len(run["annotations"]),
                "annotations_url": api + "/annotations",
            },
            "check_suite": {"id": run["id"] + 1},
            "app": {"id": 15368, "slug": "github-actions", "name": "GitHub Actions"},
            "pull_requests": [],
        }

    def _check_output(self, body: dict[str, Any]) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
        """The output of a create or update, checked as GitHub checks it (422 otherwise), and its annotations."""
        output = body.get("output")
        if output is None:
            return None, []
        if not isinstance(output, dict):
            raise _invalid("CheckRun", "output")
        for key in ("title", "summary"):
            if not isinstance(output.get(key), str) or not output[key]:
                raise _invalid("CheckRun", f"output.{key}", "missing_field")
        if len(output["summary"]) > 65535:
            raise _invalid("CheckRun", "output.summary", "custom", "summary is too long (maximum is 65535 characters)")
        annotations = output.get("annotations") or []
        if not isinstance(annotations, list):
            raise _invalid("CheckRun", "output.annotations")
        if len(annotations) > MAX_ANNOTATIONS:
            raise _invalid(
                "CheckRun",
                "output.annotations",
                "custom",
                f"only {MAX_ANNOTATIONS} annotations are allowed per request",
            )
        for a in annotations:
            self._check_annotation(a)
        return output, [dict(a) for a in annotations]

    def _check_annotation(self, a: Any) -> None:
        if not isinstance(a, dict):
            raise _invalid("CheckRun", "output.annotations")
        for key in ("path", "message"):
            if not isinstance(a.get(key), str) or not a[key]:
                raise _invalid("CheckRun", f"annotation.{key}", "missing_field")
        for key in ("start_line", "end_line"):
            if not isinstance(a.get(key), int) or isinstance(a.get(key), bool) or a[key] < 1:
                raise _invalid("CheckRun", f"annotation.{key}", "missing_field")
        if a["end_line"] < a["start_line"]:
            raise _invalid("CheckRun", "annotation.end_line", "custom", "end_line must not be before start_line")
        if a.get("annotation_level") not in ANNOTATION_LEVELS:
            raise _invalid("CheckRun", "annotation.annotation_level")
        if ("start_column" in a or "end_column" in a) and a["start_line"] != a["end_line"]:
            raise _invalid("CheckRun", "annotation.start_column", "custom", "columns only on one line")
        if len(str(a.get("title") or "")) > 255:
            raise _invalid("CheckRun", "annotation.title", "custom", "title is too long (maximum is 255 characters)")
        if len(a["message"].encode()) > 64 * 1024 or len(str(a.get("raw_details") or "").encode()) > 64 * 1024:
            raise _invalid("CheckRun", "annotation.message", "custom", "message is too long (maximum is 64 KB)")

    def _check_state(self, run: dict[str, Any], body: dict[str, Any]) -> None:
        status = body.get("status", run["status"])
        conclusion = body.get("conclusion", run["conclusion"])
        if status not in CHECK_STATUSES:
            raise _invalid("CheckRun", "status")
        if conclusion is not None and conclusion not in CHECK_CONCLUSIONS:
            raise _invalid("CheckRun", "conclusion")
        if conclusion is not None:
            status = "completed"  # GitHub: giving a conclusion completes the run
        if status == "completed" and conclusion is None:
            raise _invalid("CheckRun", "conclusion", "missing_field", "conclusion is required when status is completed")
        run["status"], run["conclusion"] = status, conclusion
        if status == "completed" and run["completed_at"] is None:
            run["completed_at"] = body.get("completed_at") or self._now()

    def _h_create_check_run(self, params: dict[str, str], body: Any, **_: Any) -> _Response:
        repo = self._repo(f"{params['o']}/{params['r']}")
        if not isinstance(body, dict):
            raise ApiError(400, "Problems parsing JSON")
        for key in ("name", "head_sha"):
            if not isinstance(body.get(key), str) or not body[key]:
                raise _invalid("CheckRun", key, "missing_field")
        output, annotations = self._check_output(body)
        run: dict[str, Any] = {
            "id": self._new_id(),
            "name": body["name"],
            "head_sha": body["head_sha"],
            "external_id": body.get("external_id") or "",
            "details_url": body.get("details_url"),
            "status": "queued",
            "conclusion": None,
            "started_at": body.get("started_at") or self._now(),
            "completed_at": None,
            "output": dict(output or {}),
            "annotations": annotations,
            "requests": [len(annotations)],  # annotations per request that carried output
        }
        self._check_state(run, body)
        repo.check_runs[run["id"]] = run
        return self._json(201, self._check_run_payload(repo, run))

    def _check_run_record(self, params: dict[str, str]) -> tuple[_Repo, dict[str, Any]]:
        repo = self._repo(f"{params['o']}/{params['r']}")
        run = repo.check_runs.get(int(params["id"]))
        if run is None:
            raise _not_found()
        return repo, run

    def _h_update_check_run(self, params: dict[str, str], body: Any, **_: Any) -> _Response:
        repo, run = self._check_run_record(params)
        if not isinstance(body, dict):
            raise ApiError(400, "Problems parsing JSON")
        output, annotations = self._check_output(body)
        self._check_state(run, body)
        for key in ("name", "details_url", "external_id"):
            if key in body:
                run[key] = body[key]
        if output is not None:
            run["output"] = {k: v for k, v in output.items() if k != "annotations"}
            run["annotations"].extend(annotations)  # GitHub appends an update's annotations
            run["requests"].append(len(annotations))
        return self._json(200, self._check_run_payload(repo, run))

    def _h_get_check_run(self, params: dict[str, str], **_: Any) -> _Response:
        repo, run = self._check_run_record(params)
        return self._json(200, self._check_run_payload(repo, run))

    def _h_list_annotations(
        self, params: dict[str, str], query: dict[str, list[str]], path: str, **_: Any
    ) -> _Response:
        repo, run = self._check_run_record(params)
        blob = self._html(f"/{repo.full_name}/blob/{run['head_sha']}")
        items = [
            {
                "path": a["path"],
                "start_line": a["start_line"],
                "end_line": a["end_line"],
                "start_column": a.get("start_column"),
                "end_column": a.get("end_column"),
                "annotation_level": a["annotation_level"],
                "title": a.get("title"),
                "message": a["message"],
                "raw_details": a.get("raw_details"),
                "blob_href": f"{blob}/{quote(a['path'])}",
            }
            for a in run["annotations"]
        ]
        return self._paged(path, query, items)

    def _h_list_check_runs(self, params: dict[str, str], query: dict[str, list[str]], **_: Any) -> _Response:
        repo = self._repo(f"{params['o']}/{params['r']}")
        name = _first(query, "check_name")
        runs = [
            self._check_run_payload(repo, run)
            for run in reversed(list(repo.check_runs.values()))  # newest first
            if run["head_sha"] == params["ref"] and (name is None or run["name"] == name)
        ]
        return self._json(200, {"total_count": len(runs), "check_runs": runs})

    def _h_get_permission(self, params: dict[str, str], **_: Any) -> _Response:
        repo = self._repo(f"{params['o']}/{params['r']}")
        login = params["user"]
        user = self._users.get(login.lower())
        if user is None:
            raise _not_found()
        default = "read" if not repo.private else "none"
        base, role_name = repo.permissions.get(login.lower(), (default, default))
        legacy = {"maintain": "write", "triage": "read"}.get(base, base)  # the `permission` field's legacy levels
        user_payload = {**self._user_payload(user), "permissions": dict(PERMISSIONS[base])}
        payload: dict[str, Any] = {"permission": legacy, "user": user_payload}
        if role_name is not None:
            payload["role_name"] = role_name
            user_payload["role_name"] = role_name
        return self._json(200, payload)

    def _h_get_user(self, **_: Any) -> _Response:
        if not self.user_token:
            raise ApiError(403, "Resource not accessible by integration")
        return self._json(200, self._user_payload(self.user(self.bot_login, self.bot_type)))

    def _h_search_issues(self, query: dict[str, list[str]], path: str, **_: Any) -> _Response:
        q = _first(query, "q")
        if not q:
            raise _invalid("Search", "q", "missing")
        qualifiers, terms = _parse_search(q)
        repos = [self._repo(name) for name in qualifiers.get("repo", [])] or list(self._repos.values())
        where = set(qualifiers.get("in", [])) or {"title", "body"}
        hits: list[tuple[_Repo, dict[str, Any]]] = []
        for repo in repos:
            for issue in repo.issues.values():
                if not _search_matches(issue, qualifiers, terms, where):
                    continue
                hits.append((repo, issue))
        order = _first(query, "order") or "desc"
        sort = _first(query, "sort")
        key = "updated_at" if sort == "updated" else "created_at"
        if sort:
            hits.sort(key=lambda h: (h[1][key], h[1]["number"]), reverse=order == "desc")
        items = [{**self._issue_payload(repo, issue), "score": 1.0} for repo, issue in hits]
        return self._paged(path, query, items, wrap={"total_count": len(items), "incomplete_results": False})

    # ------------------------------------------------------------------ git data and pull requests from branches

    def _git_of(self, params: dict[str, str]) -> tuple[_Repo, BareRepo]:
        repo = self._repo(f"{params['o']}/{params['r']}")
        if repo.git is None:
            raise ApiError(409, "Git Repository is empty.")
        return repo, repo.git

    def _refused(self, resource: str, exc: GitRefused) -> ApiError:
        return _invalid(resource, exc.field or "sha", "custom", exc.message)

    def _git_commit_payload(self, repo: _Repo, git: BareRepo, sha: str) -> dict[str, Any]:
        c = git.read_commit(sha)
        api = self._api(f"/repos/{repo.full_name}/git/commits/{sha}")

        def person(p: Person) -> dict[str, str]:
            seconds = int(p.date.split()[0])
            when = datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            return {"name": p.name, "email": p.email, "date": when}

        return {
            "sha": c.sha,
            "node_id": _node_id("C", int(c.sha[:8], 16)),
            "url": api,
            "html_url": self._html(f"/{repo.full_name}/commit/{c.sha}"),
            "author": person(c.author),
            "committer": person(c.committer),
            "message": c.message.rstrip("\n"),
            "tree": {"sha": c.tree, "url": self._api(f"/repos/{repo.full_name}/git/trees/{c.tree}")},
            "parents": [
                {
                    "sha": p,
                    "url": self._api(f"/repos/{repo.full_name}/git/commits/{p}"),
                    "html_url": self._html(f"/{repo.full_name}/commit/{p}"),
                }
                for p in c.parents
            ],
            "verification": {"verified": False, "reason": "unsigned", "signature": None, "payload": None},
        }

    def _ref_payload(self, repo: _Repo, name: str, sha: str) -> dict[str, Any]:
        return {
            "ref": name,
            "node_id": _node_id("REF", int(sha[:8], 16)),
            "url": self._api(f"/repos/{repo.full_name}/git/{name}"),
            "object": {"sha": sha, "type": "commit", "url": self._api(f"/repos/{repo.full_name}/git/commits/{sha}")},
        }

    def _h_create_blob(self, params: dict[str, str], body: Any, **_: Any) -> _Response:
        repo, git = self._git_of(params)
        if not isinstance(body, dict) or not isinstance(body.get("content"), str):
            raise _invalid("Blob", "content", "missing_field")
        encoding = body.get("encoding", "utf-8")
        if encoding not in ("utf-8", "base64"):
            raise _invalid("Blob", "encoding", "invalid")
        try:
            data = (
                base64.b64decode(body["content"], validate=True) if encoding == "base64" else body["content"].encode()
            )
        except ValueError:
            raise _invalid("Blob", "content", "invalid") from None
        sha = git.blob(data)
        return self._json(201, {"url": self._api(f"/repos/{repo.full_name}/git/blobs/{sha}"), "sha": sha})

    def _h_create_tree(self, params: dict[str, str], body: Any, **_: Any) -> _Response:
        repo, git = self._git_of(params)
        if not isinstance(body, dict) or not isinstance(body.get("tree"), list):
            raise _invalid("Tree", "tree", "missing_field")
        entries: list[tuple[str, str, str | None]] = []
        for item in body["tree"]:
            if not isinstance(item, dict) or item.get("type", "blob") != "blob":
                raise _invalid("Tree", "tree.type", "invalid")  # this fake holds blob entries only
            if "content" in item:
                sha: str | None = git.blob(str(item["content"]).encode())
            elif "sha" in item:
                sha = item["sha"]
            else:
                raise _invalid("Tree", "tree.sha", "missing_field")
            entries.append((str(item.get("path", "")), str(item.get("mode", "")), sha))
        try:
            tree = git.tree(entries, body.get("base_tree"))
        except GitRefused as exc:
            raise self._refused("Tree", exc) from None
        api = self._api(f"/repos/{repo.full_name}/git/trees/{tree}")
        listing = [
            {
                "path": path,
                "mode": mode,
                "type": kind,
                "sha": obj,
                **({"size": git.blob_size(obj)} if kind == "blob" else {}),
                "url": self._api(f"/repos/{repo.full_name}/git/{kind}s/{obj}"),
            }
            for mode, kind, obj, path in git.tree_entries(tree)
        ]
        return self._json(201, {"sha": tree, "url": api, "tree": listing, "truncated": False})

    def _person(self, value: Any, default: Person) -> Person:
        if value is None:
            return default
        if not isinstance(value, dict) or not value.get("name") or not value.get("email"):
            raise _invalid("Commit", "author", "invalid")
        date = value.get("date")
        if date is None:
            return Person(value["name"], value["email"], default.date)
        try:
            when = datetime.fromisoformat(str(date).replace("Z", "+00:00"))
        except ValueError:
            raise _invalid("Commit", "author.date", "invalid") from None
        return Person(value["name"], value["email"], f"{int(when.timestamp())} +0000")

    def _h_create_git_commit(self, params: dict[str, str], body: Any, **_: Any) -> _Response:
        repo, git = self._git_of(params)
        if not isinstance(body, dict) or not isinstance(body.get("message"), str) or not body.get("tree"):
            raise _invalid(
                "Commit", "message" if isinstance(body, dict) and "tree" in body else "tree", "missing_field"
            )
        parents = body.get("parents", [])
        if not isinstance(parents, list) or not all(isinstance(p, str) for p in parents):
            raise _invalid("Commit", "parents", "invalid")
        bot = self.user(self.bot_login, self.bot_type)
        now = datetime.strptime(self._now(), "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
        default = Person(
            bot["login"], f"{bot['id']}+{bot['login']}@users.noreply.github.com", f"{int(now.timestamp())} +0000"
        )
        author = self._person(body.get("author"), default)
        committer = self._person(body.get("committer"), author)
        try:
            sha = git.commit(str(body["tree"]), parents, body["message"], author, committer)
        except GitRefused as exc:
            raise self._refused("Commit", exc) from None
        payload = self._git_commit_payload(repo, git, sha)
        return self._json(201, payload, {"Location": payload["url"]})

    def _h_get_git_commit(self, params: dict[str, str], **_: Any) -> _Response:
        repo, git = self._git_of(params)
        try:
            return self._json(200, self._git_commit_payload(repo, git, params["sha"]))
        except KeyError:
            raise _not_found() from None

    def _h_get_ref(self, params: dict[str, str], **_: Any) -> _Response:
        repo, git = self._git_of(params)
        name = f"refs/{params['ref']}"
        sha = git.ref(name)
        if sha is None:
            raise _not_found()
        return self._json(200, self._ref_payload(repo, name, sha))

    def _h_create_ref(self, params: dict[str, str], body: Any, **_: Any) -> _Response:
        repo, git = self._git_of(params)
        if not isinstance(body, dict) or not isinstance(body.get("ref"), str) or not isinstance(body.get("sha"), str):
            raise _invalid("Reference", "ref", "missing_field")
        name = body["ref"]
        if not name.startswith("refs/") or name.count("/") < 2:
            raise _invalid("Reference", "ref", "custom", "ref must be formatted as 'refs/heads/branch_name'")
        try:
            git.set_ref(name, body["sha"], create=True, force=False)
        except GitRefused as exc:
            raise self._refused("Reference", exc) from None
        self._move_pulls(repo, name, body["sha"])
        return self._json(201, self._ref_payload(repo, name, body["sha"]))

    def _h_update_ref(self, params: dict[str, str], body: Any, **_: Any) -> _Response:
        repo, git = self._git_of(params)
        if not isinstance(body, dict) or not isinstance(body.get("sha"), str):
            raise _invalid("Reference", "sha", "missing_field")
        name = f"refs/{params['ref']}"
        try:
            git.set_ref(name, body["sha"], create=False, force=bool(body.get("force", False)))
        except GitRefused as exc:
            raise self._refused("Reference", exc) from None
        self._move_pulls(repo, name, body["sha"])
        return self._json(200, self._ref_payload(repo, name, body["sha"]))

    def _move_pulls(self, repo: _Repo, ref: str, sha: str) -> None:
        """A push to a branch moves the head of the open pull requests from it, as on GitHub."""
        for issue in repo.issues.values():
            pull = issue.get("pull")
            if pull and issue["state"] == "open" and f"refs/heads/{pull['head']['ref']}" == ref:
                pull["head"]["sha"] = sha
                self._fill_pull_files(repo, pull)

    def _fill_pull_files(self, repo: _Repo, pull: dict[str, Any]) -> None:
        git = repo.git
        if git is None:
            return
        base, head = pull["base"]["sha"], pull["head"]["sha"]
        pull["files"] = [
            self._file_record({"filename": path, "additions": a, "deletions": d, "patch": git.diff(base, head, path)})
            for path, a, d in git.numstat(base, head)
        ]
        pull["diff"] = git.diff(base, head)
        self._fill_pull_commits(repo, pull)

    def _fill_pull_commits(self, repo: _Repo, pull: dict[str, Any]) -> None:
        """The pull request's commits from the git store (base..head, oldest first), as GitHub reads them."""
        git = repo.git
        assert git is not None

        def person(p: Person) -> dict[str, str]:
            when = datetime.fromtimestamp(int(p.date.split()[0]), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            return {"name": p.name, "email": p.email, "date": when}

        pull["commits"] = []
        for sha in git.commits_between(pull["base"]["sha"], pull["head"]["sha"]):
            c = git.read_commit(sha)
            pull["commits"].append(
                {
                    "sha": c.sha,
                    "author": person(c.author),
                    "committer": person(c.committer),
                    "message": c.message.rstrip("\n"),
                    "tree": c.tree,
                    "parents": c.parents,
                }
            )

    def _h_list_pulls(self, params: dict[str, str], query: dict[str, list[str]], path: str, **_: Any) -> _Response:
        repo = self._repo(f"{params['o']}/{params['r']}")
        state = _first(query, "state") or "open"
        if state not in ("open", "closed", "all"):
            raise _invalid("PullRequest", "state")
        head = _first(query, "head") or ""
        base = _first(query, "base") or ""
        items = []
        for issue in repo.issues.values():
            pull = issue.get("pull")
            if pull is None or (state != "all" and issue["state"] != state):
                continue
            owner = (pull["head"]["repo"] or "").split("/")[0]
            if head and head not in (f"{owner}:{pull['head']['ref']}",):
                continue
            if base and pull["base"]["ref"] != base:
                continue
            items.append(issue)
        items.sort(
            key=lambda i: (i["created_at"], i["number"]), reverse=(_first(query, "direction") or "desc") == "desc"
        )
        return self._paged(path, query, [self._pull_payload(repo, i) for i in items])

    def _h_create_pull(self, params: dict[str, str], body: Any, **_: Any) -> _Response:
        repo = self._repo(f"{params['o']}/{params['r']}")
        if not isinstance(body, dict) or not body.get("head") or not body.get("base"):
            raise _invalid(
                "PullRequest", "head" if isinstance(body, dict) and body.get("base") else "base", "missing_field"
            )
        if not isinstance(body.get("title"), str) or not body["title"]:
            raise _invalid("PullRequest", "title", "missing_field")
        owner, _, branch = str(body["head"]).rpartition(":")
        if owner and owner.lower() != repo.owner.lower():
            raise _invalid("PullRequest", "head")  # forks are not modelled here
        git = repo.git
        head_sha = git.ref(f"refs/heads/{branch}") if git is not None else None
        base_sha = git.ref(f"refs/heads/{body['base']}") if git is not None else None
        if head_sha is None:
            raise _invalid("PullRequest", "head")
        if base_sha is None:
            raise _invalid("PullRequest", "base")
        for issue in repo.issues.values():
            pull = issue.get("pull")
            if (
                pull
                and issue["state"] == "open"
                and pull["head"]["ref"] == branch
                and pull["base"]["ref"] == body["base"]
            ):
                raise _invalid("PullRequest", "", "custom", f"A pull request already exists for {repo.owner}:{branch}.")
        assert git is not None
        if git.is_ancestor(head_sha, base_sha):
            raise _invalid("PullRequest", "", "custom", f"No commits between {body['base']} and {branch}")
        record = self._new_issue(repo, body["title"], body.get("body"), self.bot_login, [], None)
        record["pull"] = {
            "id": self._new_id(),
            "draft": bool(body.get("draft", False)),
            "merged": False,
            "merged_at": None,
            "head": {"sha": head_sha, "ref": branch, "repo": repo.full_name},
            "base": {"sha": base_sha, "ref": body["base"]},
            "files": [],
            "diff": None,
        }
        self._fill_pull_files(repo, record["pull"])
        payload = self._pull_payload(repo, record)
        return self._json(201, payload, {"Location": payload["url"]})

    def _h_edit_pull(self, params: dict[str, str], body: Any, **_: Any) -> _Response:
        repo, issue = self._pull_record(params)
        if not isinstance(body, dict):
            raise _invalid("PullRequest", "body")
        for key in ("title", "body"):
            if key in body:
                if body[key] is not None and not isinstance(body[key], str):
                    raise _invalid("PullRequest", key)
                issue[key] = body[key]
        if "state" in body:
            if body["state"] not in ("open", "closed"):
                raise _invalid("PullRequest", "state")
            issue["state"] = body["state"]
            issue["closed_at"] = self._now() if body["state"] == "closed" else None
        issue["updated_at"] = self._now()
        return self._json(200, self._pull_payload(repo, issue))

    def _review_of(self, params: dict[str, str]) -> tuple[_Repo, dict[str, Any], dict[str, Any]]:
        repo, issue = self._pull_record(params)
        for review in issue["pull"]["reviews"]:
            if review["id"] == int(params["id"]):
                return repo, issue, review
        raise _not_found()

    def _h_list_reviews(self, params: dict[str, str], query: dict[str, list[str]], path: str, **_: Any) -> _Response:
        repo, issue = self._pull_record(params)
        items = [self._review_payload(repo, issue, r) for r in issue["pull"]["reviews"]]
        return self._paged(path, query, items)

    def _h_create_review(self, params: dict[str, str], body: Any, **_: Any) -> _Response:
        repo, issue = self._pull_record(params)
        pull = issue["pull"]
        if not isinstance(body, dict):
            raise ApiError(400, "Problems parsing JSON")
        event = body.get("event", "PENDING")
        if event not in ("COMMENT", "APPROVE", "REQUEST_CHANGES"):
            raise _invalid("PullRequestReview", "event", "custom", "this server records submitted reviews only")
        commit_id = body.get("commit_id") or pull["head"]["sha"]
        comments = body.get("comments") or []
        if event == "COMMENT" and not body.get("body") and not comments:
            raise ApiError(422, "Unprocessable Entity", [{"message": "Review body or comments are required"}])
        shown = self._diff_lines(pull)
        for c in comments:
            if not isinstance(c, dict) or not c.get("path") or not isinstance(c.get("line"), int) or not c.get("body"):
                raise _invalid("PullRequestReviewComment", "comments", "missing_field")
            if c.get("side", "RIGHT") != "RIGHT" or c["line"] not in shown.get(c["path"], set()):
                raise ApiError(
                    422,
                    "Unprocessable Entity",
                    [{"message": f"Line could not be resolved: {c['path']}:{c['line']} is not in the diff"}],
                )
        user = self.user(self.bot_login, self.bot_type)
        review = self._new_review(repo, issue, body.get("body") or "", commit_id, user, comments, event)
        return self._json(200, self._review_payload(repo, issue, review))

    def _h_update_review(self, params: dict[str, str], body: Any, **_: Any) -> _Response:
        repo, issue, review = self._review_of(params)
        if not isinstance(body, dict) or not isinstance(body.get("body"), str):
            raise _invalid("PullRequestReview", "body", "missing_field")
        if review["user"]["login"].lower() != self.bot_login.lower():
            raise ApiError(403, "Resource not accessible by integration")
        review["body"] = body["body"]
        return self._json(200, self._review_payload(repo, issue, review))

    def _h_list_review_comments(
        self, params: dict[str, str], query: dict[str, list[str]], path: str, **_: Any
    ) -> _Response:
        repo, issue, review = self._review_of(params)
        items = [self._review_comment_payload(repo, issue, c) for c in self._live_comments(review)]
        return self._paged(path, query, items)

    def _review_comment(self, params: dict[str, str]) -> tuple[_Repo, dict[str, Any], dict[str, Any]]:
        repo = self._repo(f"{params['o']}/{params['r']}")
        found = self._review_comments.get(int(params["id"]))
        if found is None or found[0] != repo.full_name.lower() or found[2]["deleted"]:
            raise _not_found()
        if found[2]["user"]["login"].lower() != self.bot_login.lower():
            raise ApiError(403, "Resource not accessible by integration")
        return repo, self._issue(repo, found[1]), found[2]

    def _h_edit_review_comment(self, params: dict[str, str], body: Any, **_: Any) -> _Response:
        repo, issue, comment = self._review_comment(params)
        if not isinstance(body, dict) or not isinstance(body.get("body"), str) or not body["body"]:
            raise _invalid("PullRequestReviewComment", "body", "missing_field")
        comment["body"] = body["body"]
        comment["updated_at"] = self._now()
        return self._json(200, self._review_comment_payload(repo, issue, comment))

    def _h_delete_review_comment(self, params: dict[str, str], **_: Any) -> _Response:
        _repo, _issue, comment = self._review_comment(params)
        comment["deleted"] = True
        return _Response(204, b"", {})

    def _h_dispatch(self, params: dict[str, str], body: Any, **_: Any) -> _Response:
        repo = self._repo(f"{params['o']}/{params['r']}")
        workflow = params["wf"]
        if repo.workflows is not None and workflow not in repo.workflows:
            raise _not_found()
        if not isinstance(body, dict) or not isinstance(body.get("ref"), str) or not body["ref"]:
            raise _invalid("Workflow", "ref", "missing_field")
        inputs = body.get("inputs", {})
        if not isinstance(inputs, dict) or not all(isinstance(v, str | bool | int) for v in inputs.values()):
            raise _invalid("Workflow", "inputs")
        if len(inputs) > 25:
            raise ApiError(422, "you may only define up to 25 `inputs` for a `workflow_dispatch` event")
        if repo.git is not None and repo.git.ref(f"refs/heads/{body['ref']}") is None:
            raise ApiError(422, f"No ref found for: {body['ref']}")
        self.dispatches.append(
            {"repository": repo.full_name, "workflow": workflow, "ref": body["ref"], "inputs": inputs}
        )
        return _Response(204)


def _parse_search(q: str) -> tuple[dict[str, list[str]], list[str]]:
    qualifiers: dict[str, list[str]] = {}
    terms: list[str] = []
    for m in re.finditer(r'(\w+):("[^"]*"|\S+)|"([^"]*)"|(\S+)', q):
        if m.group(1):
            qualifiers.setdefault(m.group(1).lower(), []).append(m.group(2).strip('"'))
        else:
            terms.append(m.group(3) if m.group(3) is not None else m.group(4))
    return qualifiers, [t for t in terms if t]


def _search_matches(issue: dict[str, Any], qualifiers: dict[str, list[str]], terms: list[str], where: set[str]) -> bool:
    is_pull = "pull" in issue
    kinds = {v.lower() for v in qualifiers.get("is", []) + qualifiers.get("type", [])}
    if ("issue" in kinds and is_pull) or (kinds & {"pr", "pull-request"} and not is_pull):
        return False
    states = ({"open", "closed"} & kinds) | {v.lower() for v in qualifiers.get("state", [])}
    if states and issue["state"] not in states:
        return False
    labels = {label["name"].lower() for label in issue["labels"]}
    if any(v.lower() not in labels for v in qualifiers.get("label", [])):
        return False
    if any(v.lower() != issue["user"]["login"].lower() for v in qualifiers.get("author", [])):
        return False
    fields = [issue["title"] if "title" in where else "", (issue["body"] or "") if "body" in where else ""]
    haystack = f" {_words(' '.join(fields))} "
    return all(f" {_words(term)} " in haystack for term in terms)  # words and phrases, punctuation ignored


def _words(text: str) -> str:
    return " ".join(re.findall(r"\w+", text.lower()))


def _first(query: dict[str, list[str]], name: str) -> str | None:
    values = query.get(name)
    return values[-1] if values else None


def _node_id(kind: str, number: int) -> str:
    return f"{kind}_" + base64.b64encode(f"{kind}{number}".encode()).decode().rstrip("=")


# --------------------------------------------------------------------------- HTTP plumbing


class _Server(ThreadingHTTPServer):
    daemon_threads = False  # joined by server_close()
    block_on_close = True

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler], app: FakeGitHub) -> None:
        super().__init__(address, handler)
        self.app = app
        self._open: set[socket.socket] = set()
        self._open_lock = threading.Lock()

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._open_lock:
            self._open.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._open_lock:
            self._open.discard(request)
        super().shutdown_request(request)

    def close_connections(self) -> None:
        with self._open_lock:
            sockets = list(self._open)
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "GitHub.com"
    sys_version = ""
    timeout = 30  # a stuck client cannot hold a handler thread for ever
    disable_nagle_algorithm = True  # headers and body go out at once (no 40 ms delayed-ACK stalls)
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def _dispatch(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        headers = {k.lower(): v for k, v in self.headers.items()}
        try:
            response = self.server.app.handle(self.command, self.path, headers, raw)
        except _Drop:
            self.close_connection = True
            return
        self.send_response(response.status)
        headers = {
            "X-GitHub-Media-Type": "github.v3; format=json",
            "X-RateLimit-Limit": "5000",
            "X-RateLimit-Remaining": "4999",
            "X-RateLimit-Reset": "1714568400",
            "X-RateLimit-Used": "1",
            "X-RateLimit-Resource": "core",
            "X-GitHub-Request-Id": f"FAKE:{id(response):X}",
        }
        for name, value in response.headers.items():  # a fault's headers replace the defaults, whatever their case
            headers = {k: v for k, v in headers.items() if k.lower() != name.lower()} | {name: value}
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(response.body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(response.body)

    do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = do_HEAD = _dispatch


def iter_fixture_names() -> Iterator[str]:
    yield from sorted(p.name for p in FIXTURES.glob("*.json"))


__all__ = [
    "FIXTURES",
    "FakeGitHub",
    "RecordedRequest",
    "iter_fixture_names",
    "load_fixture",
    "write_event",
]
