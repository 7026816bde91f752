"""GitHub's objects as opgate needs them: small frozen models the GitHub edge returns (never PyGithub objects)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

STATUS_STATES = ("error", "failure", "pending", "success")
REACTIONS = ("+1", "-1", "laugh", "confused", "heart", "hooray", "rocket", "eyes")

StatusState = Literal["error", "failure", "pending", "success"]
Reaction = Literal["+1", "-1", "laugh", "confused", "heart", "hooray", "rocket", "eyes"]


class _Result(BaseModel):
    model_config = ConfigDict(frozen=True)


class PullInfo(_Result):
    """A pull request as opgate needs it."""

    number: int
    state: str  # "open" or "closed"
    draft: bool
    merged: bool
    title: str
    author: str
    head_sha: str
    base_sha: str
    head_ref: str
    base_ref: str
    head_repo: str | None  # "owner/name" of the head; None when the fork was deleted
    base_repo: str
    commits: int  # how many commits the pull request has (GitHub's `commits`; its commit list stops at 250)


class CommitPeople(_Result):
    """One commit of a pull request and who GitHub says wrote and committed it: the accounts GitHub maps the
    commit's author and committer e-mail to (None where it maps that e-mail to no account)."""

    sha: str
    author: str | None
    committer: str | None


BASE_ROLES = ("none", "read", "triage", "write", "maintain", "admin")  # GitHub's base roles, lowest first
BaseRole = Literal["none", "read", "triage", "write", "maintain", "admin"]


class Role(_Result):
    """A person's role on a repository: the base role that decides (`level`) and the role's name for people.

    A custom repository role (e.g. "kernel-maintainer") builds on a base role; it counts as that base role."""

    level: BaseRole
    name: str  # GitHub's role_name: a base role, or a custom role's name

    def at_least(self, level: BaseRole) -> bool:
        return BASE_ROLES.index(self.level) >= BASE_ROLES.index(level)

    @property
    def shown(self) -> str:
        """How a comment names it: "write", or "kernel-maintainer (write)" for a custom role."""
        return self.name if self.name == self.level else f"{self.name} ({self.level})"


class CommentRef(_Result):
    id: int
    created: bool  # a new comment was posted
    updated: bool = False  # an existing comment was edited (False when its body was already right)
    url: str = ""  # html_url


class StatusRef(_Result):
    id: int
    sha: str
    context: str
    state: str
    description: str | None


class IssueRef(_Result):
    number: int
    created: bool
    updated: bool = False
    state: str = "open"
    url: str = ""  # html_url


class PullRef(_Result):
    """A pull request opgate opened (or found already open for the same branch)."""

    number: int
    url: str  # html_url
    head_sha: str
    created: bool
    updated: bool = False


class FileBlob(_Result):
    """One file of a commit pushed through the git data API; `content` None deletes the path."""

    path: str
    content: bytes | None
    mode: Literal["100644", "100755"] = "100644"


class ReviewNote(_Result):
    """One inline comment of a pull-request review: a line of head's file (GitHub's side RIGHT) and its text."""

    path: str
    line: int
    body: str


class ReviewRef(_Result):
    """opgate's pull-request review of one head commit: created, edited in place, or replaced by a new one."""

    id: int | None  # None: no review (no note to place and none to clear)
    created: bool = False
    updated: bool = False  # comments or the body edited in place
    replaced: int | None = None  # the earlier review for this head whose comments were removed
    comments: int = 0
    url: str = ""


AnnotationLevel = Literal["notice", "warning", "failure"]


class Annotation(_Result):
    """One check-run annotation as GitHub's Checks API takes it (`output.annotations[]`): a finding on head's lines.

    GitHub's limits: `title` at most 255 characters, `message` at most 64 KB, lines from 1, at most 50 annotations a
    request (further ones in PATCHes of the same check run, which append)."""

    path: str
    start_line: int = Field(ge=1)
    end_line: int = Field(ge=1)
    annotation_level: AnnotationLevel
    message: str = Field(min_length=1, max_length=4096)
    title: str = Field("", max_length=255)

    def payload(self) -> dict[str, str | int]:
        """The JSON object GitHub takes (no empty title)."""
        body: dict[str, str | int] = self.model_dump(exclude={"title"})
        if self.title:
            body["title"] = self.title
        return body


class CheckRunRef(_Result):
    """A check run opgate created, with how many annotations it carries and how many requests carried them."""

    id: int
    name: str
    url: str = ""  # html_url
    annotations: int = 0
    requests: int = 0  # the POST and every PATCH that added annotations
