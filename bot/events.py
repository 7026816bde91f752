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
