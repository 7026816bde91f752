"""GitHub event payloads, parsed once at the edge into typed models."""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from bot.errors import InputError


class _Ref(BaseModel):
    model_config = ConfigDict(extra="ignore")
    sha: str
    ref: str = ""


class _PullRequest(BaseModel):
    model_config = ConfigDict(extra="ignore")
    number: int
    draft: bool = False
    state: str = "open"
    base: _Ref
    head: _Ref


class PullRequestEvent(BaseModel):
    """The parts of a `pull_request` webhook payload opgate uses."""

    model_config = ConfigDict(extra="ignore")
    action: str
    number: int
    pull_request: _PullRequest

    @property
    def base_sha(self) -> str:
        return self.pull_request.base.sha

    @property
    def head_sha(self) -> str:
        return self.pull_request.head.sha


def load_pull_request_event(path: Path) -> PullRequestEvent:
    try:
        data = json.loads(path.read_text())
    except OSError as exc:
        raise InputError(f"{path}: cannot read the event file: {exc.strerror}") from exc
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: the event file is not valid JSON: {exc}") from exc
    if not isinstance(data, dict) or "pull_request" not in data:
        raise InputError(f"{path}: not a pull_request event (no 'pull_request' object)")
    try:
        return PullRequestEvent.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        raise InputError(f"{path}: pull_request event: {'.'.join(map(str, err['loc']))}: {err['msg']}") from exc


class User(BaseModel):
    """A GitHub account as a webhook names it."""

    model_config = ConfigDict(extra="ignore")
    login: str
    type: str = "User"

    @property
    def is_bot(self) -> bool:
        """GitHub Apps and Actions post as `name[bot]` (type "Bot")."""
        return self.login.lower().endswith("[bot]") or self.type == "Bot"


class _Issue(BaseModel):
    model_config = ConfigDict(extra="ignore")
    number: int
    state: str = "open"
    pull_request: dict[str, object] | None = None


class _Comment(BaseModel):
    model_config = ConfigDict(extra="ignore")
    id: int
    body: str | None = None
    user: User


class IssueCommentEvent(BaseModel):
    """The parts of an `issue_comment` webhook payload opgate uses (a PR's comments are issue comments)."""

    model_config = ConfigDict(extra="ignore")
    action: str
    issue: _Issue
    comment: _Comment
    sender: User

    @property
    def number(self) -> int:
        return self.issue.number

    @property
    def is_pull_request(self) -> bool:
        return self.issue.pull_request is not None

    @property
    def body(self) -> str:
        return self.comment.body or ""


def load_issue_comment_event(path: Path) -> IssueCommentEvent:
    try:
        data = json.loads(path.read_text())
    except OSError as exc:
        raise InputError(f"{path}: cannot read the event file: {exc.strerror}") from exc
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: the event file is not valid JSON: {exc}") from exc
    if not isinstance(data, dict) or "comment" not in data or "issue" not in data:
        raise InputError(f"{path}: not an issue_comment event (no 'issue' and 'comment' objects)")
    try:
        return IssueCommentEvent.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        raise InputError(f"{path}: issue_comment event: {'.'.join(map(str, err['loc']))}: {err['msg']}") from exc
