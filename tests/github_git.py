"""A bare git repository behind the local GitHub server's git data API: real blobs, trees, commits and refs.

The server answers `POST /git/blobs|trees|commits`, `/git/refs` and `GET /git/commits/{sha}` from a real bare
repository (`git hash-object`, a scratch index + `git write-tree`, `git commit-tree`, `git update-ref`), so object
SHAs are git's own and a test can fetch the branch a client pushed and compare it with what `git` made locally.
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

SHA = re.compile(r"^[0-9a-f]{40}$")
MODES = ("100644", "100755", "040000", "160000", "120000")


class GitRefused(Exception):
    """What GitHub answers 422 for (a missing object, a ref that exists, a non-fast-forward update)."""

    def __init__(self, message: str, field: str = "") -> None:
        super().__init__(message)
        self.message, self.field = message, field


@dataclass(frozen=True)
class Person:
    name: str
    email: str
    date: str  # as git prints it: "<unix seconds> <+hhmm>"


@dataclass(frozen=True)
class CommitObject:
    sha: str
    tree: str
    parents: list[str]
    author: Person
    committer: Person
    message: str


class BareRepo:
    """One bare repository (created empty when `path` does not exist)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        if not (path / "HEAD").exists():
            path.mkdir(parents=True, exist_ok=True)
            self._git("init", "-q", "--bare", "-b", "main")

    def _git(self, *args: str, stdin: bytes | None = None, env: dict[str, str] | None = None) -> bytes:
        full = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
        full.update(GIT_DIR=str(self.path), **(env or {}))
        proc = subprocess.run(["git", *args], input=stdin, capture_output=True, env=full, check=False)
        if proc.returncode != 0:
            raise GitRefused(proc.stderr.decode(errors="replace").strip().splitlines()[-1] if proc.stderr else "failed")
        return proc.stdout

    def kind(self, sha: str) -> str | None:
        if not SHA.match(sha or ""):
            return None
        try:
            return self._git("cat-file", "-t", sha).decode().strip()
        except GitRefused:
            return None

    # -- objects --------------------------------------------------------------------------

    def blob(self, content: bytes) -> str:
        return self._git("hash-object", "-w", "--stdin", stdin=content).decode().strip()

    def blob_size(self, sha: str) -> int:
        return int(self._git("cat-file", "-s", sha).decode())

    def tree(self, entries: list[tuple[str, str, str | None]], base_tree: str | None) -> str:
        """A tree from `base_tree` (or empty) with each (path, mode, blob sha | None to delete) applied; paths may
        name files in subfolders, as GitHub's `POST /git/trees` allows."""
        if base_tree is not None and self.kind(base_tree) != "tree":
            raise GitRefused("base_tree is not a valid tree oid", "base_tree")
        with tempfile.TemporaryDirectory() as scratch:
            env = {"GIT_INDEX_FILE": str(Path(scratch) / "index")}
            self._git("read-tree", *([base_tree] if base_tree else ["--empty"]), env=env)
            for path, mode, sha in entries:
                if not path or path.startswith("/") or ".." in path.split("/"):
                    raise GitRefused(f"tree.path {path!r} is invalid", "tree.path")
                if sha is None:
                    self._git("update-index", "--force-remove", "--", path, env=env)
                    continue
                if mode not in MODES or self.kind(sha) != "blob":
                    raise GitRefused(f"tree.sha {sha} is not a valid blob", "tree.sha")
                self._git("update-index", "--add", "--cacheinfo", f"{mode},{sha},{path}", env=env)
            return self._git("write-tree", env=env).decode().strip()

    def tree_entries(self, sha: str) -> list[tuple[str, str, str, str]]:
        """(mode, type, sha, path) of the tree's own entries."""
        out = []
        for line in self._git("ls-tree", sha).decode().splitlines():
            meta, path = line.split("\t", 1)
            mode, kind, obj = meta.split()
            out.append((mode, kind, obj, path))
        return out

    def commit(self, tree: str, parents: list[str], message: str, author: Person, committer: Person) -> str:
        if self.kind(tree) != "tree":
            raise GitRefused("Tree SHA does not exist", "tree")
        for p in parents:
            if self.kind(p) != "commit":
                raise GitRefused("Parent SHA does not exist or is not a commit object", "parents")
        env = {
            "GIT_AUTHOR_NAME": author.name, "GIT_AUTHOR_EMAIL": author.email, "GIT_AUTHOR_DATE": author.date,
            "GIT_COMMITTER_NAME": committer.name, "GIT_COMMITTER_EMAIL": committer.email,
            "GIT_COMMITTER_DATE": committer.date,
        }  # fmt: skip
        args = ["commit-tree", tree, *[a for p in parents for a in ("-p", p)]]
        return self._git(*args, stdin=message.encode(), env=env).decode().strip()

    def read_commit(self, sha: str) -> CommitObject:
        if self.kind(sha) != "commit":
            raise KeyError(sha)
        text = self._git("cat-file", "commit", sha).decode()
        head, _, message = text.partition("\n\n")
        tree, parents, people = "", [], {}
        for line in head.splitlines():
            word, _, rest = line.partition(" ")
            if word == "tree":
                tree = rest
            elif word == "parent":
                parents.append(rest)
            elif word in ("author", "committer"):
                m = re.match(r"^(.*) <(.*)> (\d+ [+-]\d{4})$", rest)
                assert m, rest
                people[word] = Person(m.group(1), m.group(2), m.group(3))
        return CommitObject(sha, tree, parents, people["author"], people["committer"], message)

    # -- refs -----------------------------------------------------------------------------

    def ref(self, name: str) -> str | None:
        try:
            return self._git("rev-parse", "--verify", "--quiet", name).decode().strip() or None
        except GitRefused:
            return None

    def set_ref(self, name: str, sha: str, *, create: bool, force: bool) -> None:
        if not re.fullmatch(r"refs/[^\s~^:?*\[\\]+/[^\s~^:?*\[\\]+", name) or ".." in name:
            raise GitRefused("Reference name is not valid", "ref")
        if self.kind(sha) != "commit":
            raise GitRefused("Object does not exist", "sha")
        old = self.ref(name)
        if create and old is not None:
            raise GitRefused("Reference already exists", "ref")
        if not create and old is None:
            raise GitRefused("Reference does not exist", "ref")
        if old is not None and not force and not self.is_ancestor(old, sha):
            raise GitRefused("Update is not a fast forward", "sha")
        self._git("update-ref", name, sha)

    def is_ancestor(self, old: str, new: str) -> bool:
        try:
            self._git("merge-base", "--is-ancestor", old, new)
        except GitRefused:
            return False
        return True

    def commits_between(self, base: str, head: str) -> list[str]:
        """The commits reachable from `head` and not from `base`, oldest first (a pull request's commits)."""
        return self._git("rev-list", "--reverse", f"{base}..{head}").decode().split()

    # -- diffs (pull requests) ------------------------------------------------------------

    def numstat(self, base: str, head: str) -> list[tuple[str, int, int]]:
        out = []
        for line in self._git("diff", "--numstat", "--no-renames", f"{base}...{head}").decode().splitlines():
            added, removed, path = line.split("\t", 2)
            out.append((path, int(added) if added.isdigit() else 0, int(removed) if removed.isdigit() else 0))
        return out

    def diff(self, base: str, head: str, path: str | None = None) -> str:
        args = ["diff", "--no-color", "--no-renames", f"{base}...{head}"] + (["--", path] if path else [])
        return self._git(*args).decode(errors="replace")
