"""The GitHub edge: a thin layer over PyGithub behind a small interface of our own.

Everything opgate asks of GitHub goes through `GitHubEdge`; what comes back is a small pydantic model,
never a PyGithub object. The connection, the login opgate posts as, and every call's retries and errors are
`GitHubClient`'s (bot/edges/github_client.py), which the edge extends.

opgate finds and edits only what its own identity wrote (`login`): a marker or a title in someone else's
comment, issue or pull request is ignored, and opgate posts its own.

Settings come as arguments; the CLI reads GITHUB_API_URL, GITHUB_TOKEN, GITHUB_REPOSITORY and
OPGATE_GITHUB_LOGIN.
"""

from __future__ import annotations

import base64
import urllib.parse
import uuid
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any, cast

from github import GithubException, InputGitAuthor, InputGitTreeElement
from github.Commit import Commit
from github.GithubObject import NotSet
from github.IssueComment import IssueComment

from bot.edges.github_client import GitHubClient
from bot.models.github import (
    BASE_ROLES,
    REACTIONS,
    STATUS_STATES,
    Annotation,
    BaseRole,
    CheckRunRef,
    CommentRef,
    CommitPeople,
    FileBlob,
    IssueRef,
    PullInfo,
    PullRef,
    Reaction,
    ReviewNote,
    ReviewRef,
    Role,
    StatusRef,
    StatusState,
)
from bot.text.redact import redact

MAX_BODY_CHARS = 65536  # GitHub's limit for issue and comment bodies
MAX_DESCRIPTION_CHARS = 140  # GitHub's limit for a commit status description
MAX_ANNOTATIONS = 50  # GitHub's limit of check-run annotations per request (create or update)
MAX_CHECK_TITLE_CHARS = 255  # a check run's output title (GitHub documents no lower limit; its UI cuts long ones)
TRUNCATION_NOTE = "\n\n… (truncated: GitHub allows at most 65536 characters)"


def truncate(text: str, limit: int, note: str = "…") -> str:
    """`text` cut to at most `limit` characters, ending in `note` when cut."""
    if len(text) <= limit:
        return text
    return text[: max(0, limit - len(note))] + note[:limit]


class GitHubEdge(GitHubClient):
    """opgate's view of one GitHub repository: pull requests, comments, statuses, check runs, roles, issues,
    branches and pull-request reviews (the constructor's settings are `GitHubClient`'s)."""

    # ------------------------------------------------------------------ lifecycle

    def close(self) -> None:
        self._gh.close()

    def __enter__(self) -> GitHubEdge:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"GitHubEdge({self.api_url!r}, repository={self.repository!r})"

    # ------------------------------------------------------------------ pull requests

    def pull_request(self, number: int) -> PullInfo:
        def op() -> PullInfo:
            pr = self._repo.get_pull(number)
            head_repo = pr.head.repo
            return PullInfo(
                number=pr.number,
                state=pr.state,
                draft=bool(pr.draft),
                merged=bool(pr.merged),
                title=pr.title or "",
                author=pr.user.login,
                head_sha=pr.head.sha,
                base_sha=pr.base.sha,
                head_ref=pr.head.ref,
                base_ref=pr.base.ref,
                head_repo=head_repo.full_name if head_repo is not None else None,
                base_repo=pr.base.repo.full_name,
                commits=int(pr.commits or 0),
            )

        return self._call(f"read pull request #{number}", op)

    def pull_commits(self, number: int) -> list[CommitPeople]:
        """The commits of pull request `number` as GitHub lists them (`GET …/pulls/{n}/commits`, every page as its
        `Link` header names them; oldest first; GitHub lists at most 250, `PullInfo.commits` says how many there
        are), each with the logins GitHub maps its author and committer to."""

        def op() -> list[CommitPeople]:
            listed = self._repo.get_pull(number).get_commits()  # lazy: no GET of the pull request itself
            return [
                CommitPeople(
                    sha=c.sha,
                    author=str(c.author.login) if c.author is not None else None,
                    committer=str(c.committer.login) if c.committer is not None else None,
                )
                for c in listed
            ]

        return self._call(f"read the commits of pull request #{number}", op)

    # ------------------------------------------------------------------ comments

    def upsert_comment(self, number: int, marker: str, body: str) -> CommentRef:
        """Edit our comment on issue/PR `number` (the one by `login` whose body starts with `marker`), else post it.

        The body is made to start with the marker, so the next run finds it. All pages of comments are
        searched; the oldest match wins; a comment by anyone else is never edited, whatever it holds. Retries
        re-read the comments first, so a POST whose answer was lost is found and edited instead of duplicated.
        """
        if not marker.strip():
            raise ValueError("upsert_comment needs a non-empty marker")
        text = body if body.lstrip().startswith(marker) else f"{marker}\n{body}"
        text = truncate(redact(text), MAX_BODY_CHARS, TRUNCATION_NOTE)
        self.login()  # who we are, known before anything is read or written

        def op() -> CommentRef:
            issue = self._repo.get_issue(number)
            mine = self._find_comment(issue.get_comments(), marker)
            if mine is None:
                created = issue.create_comment(text)
                self._check_author(created.user, f"comment {created.id} on #{number}")
                return CommentRef(id=created.id, created=True, url=created.html_url or "")
            if mine.body == text:
                return CommentRef(id=mine.id, created=False, updated=False, url=mine.html_url or "")
            mine.edit(text)
            return CommentRef(id=mine.id, created=False, updated=True, url=mine.html_url or "")

        return self._call(f"post the {marker.strip()} comment on #{number}", op)

    def _find_comment(self, comments: Iterable[IssueComment], marker: str) -> IssueComment | None:
        for comment in comments:
            if (comment.body or "").lstrip().startswith(marker) and self._mine(comment.user):
                return comment
        return None

    def reply(self, number: int, body: str) -> CommentRef:
        """Post a new comment on issue/PR `number`. (A retried POST whose answer was lost may post twice.)"""
        text = truncate(redact(body), MAX_BODY_CHARS, TRUNCATION_NOTE)

        def op() -> CommentRef:
            created = self._repo.get_issue(number).create_comment(text)
            return CommentRef(id=created.id, created=True, url=created.html_url or "")

        return self._call(f"reply on #{number}", op)

    def react(self, comment_id: int, content: Reaction) -> None:
        """Add a reaction to an issue/PR comment (GitHub answers 200 when it is already there)."""
        if content not in REACTIONS:
            raise ValueError(f"unknown reaction {content!r}; one of {', '.join(REACTIONS)}")

        def op() -> None:
            comment = IssueComment(self._repo.requester, url=f"{self._repo.url}/issues/comments/{int(comment_id)}")
            comment.create_reaction(content)

        self._call(f"react {content} to comment {comment_id}", op)

    # ------------------------------------------------------------------ statuses

    def set_status(
        self,
        sha: str,
        context: str,
        state: StatusState,
        description: str,
        target_url: str | None = None,
    ) -> StatusRef:
        """Set commit status `context` on `sha`; the description is cut to GitHub's 140 characters."""
        if state not in STATUS_STATES:
            raise ValueError(f"unknown status state {state!r}; one of {', '.join(STATUS_STATES)}")
        if not sha or not context:
            raise ValueError("set_status needs a sha and a context")
        short = truncate(" ".join(redact(description).split()), MAX_DESCRIPTION_CHARS)

        def op() -> StatusRef:
            kwargs: dict[str, Any] = {"state": state, "description": short, "context": context}
            if target_url:
                kwargs["target_url"] = target_url
            status = self._repo.get_commit(sha).create_status(**kwargs)
            return StatusRef(
                id=status.id, sha=sha, context=status.context, state=status.state, description=status.description
            )

        return self._call(f"set status {context}={state} on {sha[:12]}", op)

    # ------------------------------------------------------------------ check runs

    def create_check_run(
        self,
        sha: str,
        name: str,
        title: str,
        summary: str,
        annotations: Iterable[Annotation] = (),
        *,
        conclusion: str = "neutral",
        details_url: str | None = None,
    ) -> CheckRunRef:
        """Create a completed check run `name` on `sha` carrying `annotations`: the first 50 with the POST, the rest
        in PATCHes of the same check run, 50 each (GitHub's limit; each update appends). A check run of its own per
        call: GitHub shows the newest of a name. Retries never add an annotation twice: the check run is looked up
        by a random `external_id` before a POST is repeated, and its `annotations_count` before a PATCH is.
        Creating check runs needs a GitHub App's token (Actions' GITHUB_TOKEN with `checks: write`)."""
        if not sha or not name:
            raise ValueError("create_check_run needs a sha and a name")
        items = [{k: redact(v) if isinstance(v, str) else v for k, v in a.payload().items()} for a in annotations]
        chunks = [items[i : i + MAX_ANNOTATIONS] for i in range(0, len(items), MAX_ANNOTATIONS)] or [[]]
        heading = truncate(" ".join(redact(title).split()), MAX_CHECK_TITLE_CHARS)
        text = truncate(redact(summary), MAX_BODY_CHARS - 1, TRUNCATION_NOTE)
        marker = uuid.uuid4().hex
        tried = {"create": False, "patch": False}

        def output(chunk: list[dict[str, str | int]]) -> dict[str, Any]:
            return {"title": heading, "summary": text, **({"annotations": chunk} if chunk else {})}

        def create() -> tuple[int, str]:
            if tried["create"]:
                for run in self._repo.get_commit(sha).get_check_runs(check_name=name):
                    if run.external_id == marker:
                        return int(run.id), str(run.html_url or "")
            tried["create"] = True
            run = self._repo.create_check_run(
                name=name,
                head_sha=sha,
                external_id=marker,
                status="completed",
                conclusion=conclusion,
                output=output(chunks[0]),
                details_url=details_url or NotSet,
            )
            return int(run.id), str(run.html_url or "")

        run_id, url = self._call(f"create the check run {name} on {sha[:12]}", create)
        requests = 1
        url_of = f"{self._repo.url}/check-runs/{run_id}"
        for n, chunk in enumerate(chunks[1:], start=1):
            carried = n * MAX_ANNOTATIONS  # what the check run holds before this update
            tried["patch"] = False

            def update(chunk: list[dict[str, str | int]] = chunk, carried: int = carried) -> None:
                if tried["patch"]:
                    _, data = self._repo.requester.requestJsonAndCheck("GET", url_of)
                    if int((data.get("output") or {}).get("annotations_count") or 0) >= carried + len(chunk):
                        return  # the lost answer's update took effect
                tried["patch"] = True
                self._repo.requester.requestJsonAndCheck("PATCH", url_of, input={"output": output(chunk)})

            self._call(f"add annotations {carried + 1}-{carried + len(chunk)} to the check run {name}", update)
            requests += 1
        return CheckRunRef(id=run_id, name=name, url=url, annotations=len(items), requests=requests)

    # ------------------------------------------------------------------ people

    def role(self, user: str) -> Role:
        """`user`'s role on the repository (GET …/collaborators/{user}/permission): its base role, from `role_name`
        when that is a base role, else from the `permissions` hash (a custom role counts as the base role it
        builds on), else from the legacy `permission` (older GitHub Enterprise Server); an unknown user (404) is
        "none"."""

        def op() -> Role:
            try:
                _, data = self._repo.requester.requestJsonAndCheck(
                    "GET", f"{self._repo.url}/collaborators/{urllib.parse.quote(user, safe='')}/permission"
                )
            except GithubException as exc:
                if exc.status == 404:
                    return Role(level="none", name="none")
                raise
            return role_of(data if isinstance(data, dict) else {})

        return self._call(f"read the role of {user}", op)

    # ------------------------------------------------------------------ issues

    def upsert_issue(self, title: str, body: str, labels: Iterable[str] = (), *, reopen: bool = False) -> IssueRef:
        """Edit opgate's issue titled exactly `title` (open or closed; the oldest if several), else open one.

        Only issues opened by `login` count: an issue of the same title by anyone else is left alone.

        With labels, candidates are listed by the first label (consistent right after a write); without,
        the search API is used (eventually consistent: an issue opened seconds ago may not be found).
        Labels are added to an existing issue, never removed; a closed issue stays closed unless `reopen`.
        """
        wanted = list(dict.fromkeys(label for label in labels if label))
        text = truncate(redact(body), MAX_BODY_CHARS, TRUNCATION_NOTE)
        if not title.strip():
            raise ValueError("upsert_issue needs a title")

        self.login()  # who we are, known before anything is read or written

        def op() -> IssueRef:
            existing = self._find_issue(title, wanted)
            if existing is None:
                issue = self._repo.create_issue(title=title, body=text, labels=wanted)
                self._check_author(issue.user, f"issue #{issue.number}")
                return IssueRef(number=issue.number, created=True, state=issue.state, url=issue.html_url or "")
            have = [label.name for label in existing.labels]
            missing = [name for name in wanted if name.lower() not in {h.lower() for h in have}]
            changes: dict[str, Any] = {}
            if (existing.body or "") != text:
                changes["body"] = text
            if missing:
                changes["labels"] = have + missing
            if reopen and existing.state == "closed":
                changes["state"] = "open"
            if changes:
                existing.edit(**changes)
            return IssueRef(
                number=existing.number,
                created=False,
                updated=bool(changes),
                state=existing.state,
                url=existing.html_url or "",
            )

        return self._call(f"file the issue {title!r}", op)

    def close_issue(self, title: str, body: str, labels: Iterable[str] = ()) -> IssueRef | None:
        """Edit opgate's issue titled exactly `title` to `body` and close it, if there is one still open; never
        creates one (and never closes an issue anyone else opened). None when no such issue exists (a closed one
        is left as it is, and returned)."""
        wanted = list(dict.fromkeys(label for label in labels if label))
        text = truncate(redact(body), MAX_BODY_CHARS, TRUNCATION_NOTE)

        self.login()  # who we are, known before anything is read or written

        def op() -> IssueRef | None:
            existing = self._find_issue(title, wanted)
            if existing is None:
                return None
            if existing.state == "closed":
                return IssueRef(number=existing.number, created=False, state="closed", url=existing.html_url or "")
            existing.edit(body=text, state="closed")
            return IssueRef(
                number=existing.number, created=False, updated=True, state="closed", url=existing.html_url or ""
            )

        return self._call(f"close the issue {title!r}", op)

    def _find_issue(self, title: str, labels: list[str]) -> Any:
        if labels:
            candidates: Iterable[Any] = self._repo.get_issues(
                state="all", labels=labels[:1], sort="created", direction="asc"
            )
        else:
            phrase = title.replace('"', " ")
            candidates = self._gh.search_issues(
                f'repo:{self.repository} is:issue in:title "{phrase}"', sort="created", order="asc"
            )
        for issue in candidates:
            # title first: reading a field an answer lacks (pull_request, on plain issues) costs a GET
            if issue.title == title and issue.pull_request is None and self._mine(issue.user):
                return issue
        return None

    # ------------------------------------------------------------------ branches and pull requests

    def default_branch(self) -> str:
        return self._call("read the default branch", lambda: str(self._repo.default_branch))

    def push_branch(
        self, branch: str, parent_sha: str, files: Iterable[FileBlob], message: str, *, author: tuple[str, str],
        date: datetime,
    ) -> str:  # fmt: skip
        """Commit `files` on top of `parent_sha` through the git data API (blobs, a tree on the parent's tree, a
        commit) and point refs/heads/`branch` at it; returns the commit's SHA.

        Idempotent: the same files, message, author and date give the same blobs, tree and commit, so a retry or a
        re-run finds the branch already there; a branch left at another commit is moved (it is opgate's own).
        """
        if not branch or branch.startswith(("/", "refs/")) or ".." in branch:
            raise ValueError(f"not a branch name: {branch!r}")
        items = list(files)
        who = InputGitAuthor(author[0], author[1], date.isoformat(timespec="seconds"))

        def op() -> str:
            parent = self._repo.get_git_commit(parent_sha)
            elements = []
            for f in items:
                if f.content is None:
                    elements.append(InputGitTreeElement(f.path, f.mode, "blob", sha=None))
                    continue
                blob = self._repo.create_git_blob(base64.b64encode(f.content).decode(), "base64")
                elements.append(InputGitTreeElement(f.path, f.mode, "blob", sha=blob.sha))
            tree = self._repo.create_git_tree(elements, parent.tree)
            commit = self._repo.create_git_commit(message, tree, [parent], author=who, committer=who)
            try:
                self._repo.create_git_ref(f"refs/heads/{branch}", commit.sha)
            except GithubException as exc:
                if exc.status != 422:
                    raise
                ref = self._repo.get_git_ref(f"heads/{branch}")
                if ref.object.sha != commit.sha:
                    ref.edit(commit.sha, force=True)
            return str(commit.sha)

        return self._call(f"push the branch {branch}", op)

    def open_pull(self, branch: str, base: str, title: str, body: str) -> PullRef:
        """Open a pull request from `branch` into `base`, or edit the one opgate already opened from that branch
        (a pull request from it by anyone else is not edited; GitHub then refuses a second one: ServiceError)."""
        text = truncate(redact(body), MAX_BODY_CHARS, TRUNCATION_NOTE)
        owner = self.repository.split("/")[0]

        self.login()  # who we are, known before anything is read or written

        def op() -> PullRef:
            for pr in self._repo.get_pulls(state="open", head=f"{owner}:{branch}", base=base):
                if not self._mine(pr.user):
                    continue
                changed = (pr.body or "") != text or pr.title != title
                if changed:
                    pr.edit(title=title, body=text)
                return PullRef(number=pr.number, url=pr.html_url or "", head_sha=pr.head.sha, created=False,
                               updated=changed)  # fmt: skip
            pr = self._repo.create_pull(base=base, head=branch, title=title, body=text)
            return PullRef(number=pr.number, url=pr.html_url or "", head_sha=pr.head.sha, created=True)

        return self._call(f"open a pull request from {branch}", op)

    def dispatch_workflow(self, workflow: str, ref: str, inputs: dict[str, str]) -> None:
        """Start `workflow` (a file name in .github/workflows) on `ref` with `inputs` (workflow_dispatch)."""

        def op() -> None:
            self._repo.get_workflow(workflow).create_dispatch(ref, inputs, throw=True)

        self._call(f"dispatch {workflow} on {ref}", op)

    # ------------------------------------------------------------------ pull-request reviews (inline notes)

    def upsert_review_notes(
        self, number: int, head_sha: str, marker: str, body: str, notes: Sequence[ReviewNote], replaced_body: str
    ) -> ReviewRef:
        """opgate's one pull-request review of `head_sha` with `notes` as inline comments (side RIGHT, GitHub's
        "create a review" with `comments`), found again by `marker` and opgate's login: a re-run whose notes sit on
        the same lines edits their text and removes the comments no longer wanted; notes on other lines make a new
        review, and the earlier one loses opgate's comments and gets `replaced_body` (a submitted review cannot be
        deleted). Nothing to place and nothing to clear: no write. A person's review or comment is never touched."""
        self.login()
        wanted = {(n.path, n.line): redact(n.body) for n in notes}
        body, replaced_body = redact(body), redact(replaced_body)

        def op() -> ReviewRef:
            pull = self._repo.get_pull(number)
            marked = [
                r
                for r in pull.get_reviews()
                if self._mine(r.user) and r.commit_id == head_sha and (r.body or "").lstrip().startswith(marker)
            ]
            current = marked[-1] if marked else None
            if current is not None:
                comments = [c for c in pull.get_single_review_comments(current.id) if self._mine(c.user)]
                have = {(c.path, c.line if c.line is not None else c.original_line): c for c in comments}
                if wanted and set(wanted) <= set(have):
                    edited = self._keep_review(current, have, wanted, body)
                    self._clear_reviews(pull, marked[:-1], replaced_body)
                    return ReviewRef(id=current.id, updated=edited, comments=len(wanted), url=current.html_url or "")
            if not wanted:
                self._clear_reviews(pull, marked, replaced_body)
                return ReviewRef(id=None, replaced=current.id if current is not None else None)
            commit = Commit(self._repo.requester, {}, {"sha": head_sha, "url": f"{self._repo.url}/commits/{head_sha}"})
            comments_in = [{"path": p, "line": ln, "side": "RIGHT", "body": text} for (p, ln), text in wanted.items()]
            created = pull.create_review(commit=commit, body=body, event="COMMENT", comments=comments_in)  # type: ignore[arg-type]
            self._check_author(created.user, f"review {created.id} on #{number}")
            self._clear_reviews(pull, marked, replaced_body)
            return ReviewRef(
                id=created.id,
                created=True,
                replaced=current.id if current is not None else None,
                comments=len(wanted),
                url=created.html_url or "",
            )

        return self._call(f"post opgate's review of {head_sha[:12]} on #{number}", op)

    def _keep_review(
        self, review: Any, have: dict[tuple[str, int], Any], wanted: dict[tuple[str, int], str], body: str
    ) -> bool:
        """Edit our review in place: each wanted comment's text, our other comments removed, the body. Whether
        anything changed."""
        edited = False
        for place, comment in have.items():
            if place not in wanted:
                comment.delete()
                edited = True
            elif comment.body != wanted[place]:
                comment.edit(wanted[place])
                edited = True
        if (review.body or "") != body:
            review.edit(body)
            edited = True
        return edited

    def _clear_reviews(self, pull: Any, reviews: Iterable[Any], replaced_body: str) -> None:
        """Remove opgate's comments from its earlier reviews of this head and mark each replaced."""
        for review in reviews:
            for comment in pull.get_single_review_comments(review.id):
                if self._mine(comment.user):
                    comment.delete()
            review.edit(replaced_body)


_HASH_LEVELS: tuple[tuple[str, BaseRole], ...] = (
    ("admin", "admin"), ("maintain", "maintain"), ("push", "write"), ("triage", "triage"), ("pull", "read"),
)  # fmt: skip
_LEGACY_LEVELS: dict[str, BaseRole] = {"admin": "admin", "write": "write", "read": "read"}


def role_of(data: dict[str, Any]) -> Role:
    """The Role in a collaborator-permission answer (pure): `permission` is the legacy level (maintain reads as
    write, triage as read), `role_name` the full name (custom roles too), the user's `permissions` hash the base."""
    name = data.get("role_name") if isinstance(data.get("role_name"), str) and data.get("role_name") else None
    user = data.get("user")
    hash_ = user.get("permissions") if isinstance(user, dict) else None
    level: BaseRole = _LEGACY_LEVELS.get(str(data.get("permission")), "none")
    if name in BASE_ROLES:
        level = cast(BaseRole, name)
    elif isinstance(hash_, dict):
        level = next((lvl for key, lvl in _HASH_LEVELS if hash_.get(key) is True), "none")
    return Role(level=level, name=name or level)


__all__ = ["GitHubEdge", "role_of", "truncate"]
