"""GitHub event payloads, parsed once at the edge into typed models."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from bot.errors import InputError

_Event = TypeVar("_Event", bound=BaseModel)


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
    return parse_pull_request_event(_read(path), str(path))


def parse_pull_request_event(raw: bytes, where: str = "event") -> PullRequestEvent:
    return _parse(raw, "pull_request", ("pull_request",), PullRequestEvent, where)


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
    return parse_issue_comment_event(_read(path), str(path))


def parse_issue_comment_event(raw: bytes, where: str = "event") -> IssueCommentEvent:
    return _parse(raw, "issue_comment", ("issue", "comment"), IssueCommentEvent, where)


MAX_EVENT_BYTES = 25 * 1024 * 1024  # GitHub caps webhook payloads at 25 MB
_SURROGATE = re.compile("[\ud800-\udfff]")
MAX_DEPTH = 64  # GitHub's payloads nest a few levels; anything deeper is not one


def _check(path: str, data: object) -> None:
    """Walk the payload iteratively (a hostile file cannot exhaust the stack here): InputError when containers
    nest deeper than MAX_DEPTH or a string is not Unicode text (a lone surrogate escape such as \\ud800)."""
    stack: list[tuple[object, int]] = [(data, 1)]
    while stack:
        node, level = stack.pop()
        if isinstance(node, str):
            if _SURROGATE.search(node):
                raise InputError(f"{path}: the event file holds a string that is not Unicode text (a lone surrogate)")
            continue
        if not isinstance(node, dict | list):
            continue
        if level > MAX_DEPTH:
            raise InputError(f"{path}: the event file nests deeper than {MAX_DEPTH} levels")
        children = [*node.keys(), *node.values()] if isinstance(node, dict) else node
        stack.extend((child, level + 1) for child in children)


def _json(path: str, raw: bytes) -> object:
    """The event file's JSON: UTF-8 (BOM allowed), bounded in size and nesting."""
    if len(raw) > MAX_EVENT_BYTES:
        raise InputError(f"{path}: the event file is over {MAX_EVENT_BYTES // 2**20} MiB, not a webhook payload")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(
            f"{path}: the event file is not UTF-8 (byte {exc.start}: {raw[exc.start : exc.start + 1]!r})"
        ) from exc
    try:
        data = json.loads(text)
    except RecursionError as exc:
        raise InputError(f"{path}: the event file nests deeper than {MAX_DEPTH} levels") from exc
    except ValueError as exc:  # JSONDecodeError, and integers too long to convert
        raise InputError(f"{path}: the event file is not valid JSON: {exc}") from exc
    _check(path, data)
    return data


def _read(path: Path) -> bytes:
    """A webhook payload file as bytes (one byte past the size limit, so that _json can refuse it)."""
    try:
        with path.open("rb") as f:
            return f.read(MAX_EVENT_BYTES + 1)
    except OSError as exc:
        raise InputError(f"{path}: cannot read the event file: {exc.strerror}") from exc


def _parse(raw: bytes, kind: str, required: tuple[str, ...], model: type[_Event], path: str) -> _Event:
    """A webhook payload's bytes as `model` (pure); bad encoding, JSON, nesting or types: one InputError."""
    data = _json(path, raw)
    if not isinstance(data, dict) or any(key not in data for key in required):
        objects = " and ".join(f"'{key}'" for key in required)
        raise InputError(f"{path}: not a {kind} event (no {objects} object{'s' if len(required) > 1 else ''})")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        raise InputError(f"{path}: {kind} event: {'.'.join(map(str, err['loc']))}: {err['msg']}") from exc
