"""The agent's answer as data: parsed, validated, never executed."""

from __future__ import annotations

import json
import re
from pathlib import PurePosixPath

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from unidiff import PatchSet
from unidiff.errors import UnidiffParseError

from bot.manifest import KERNELS_DIR

MAX_PATCH_BYTES = 64 * 1024
MAX_PATCH_LINES = 400  # added + removed: "small, explainable, revertible on its own"
MAX_PATCH_FILES = 20


class AgentReview(BaseModel):
    """What the users' task file asks for (`acceptance_outputs`)."""

    model_config = ConfigDict(extra="ignore")

    candidate_patch: str | None = Field(None, max_length=MAX_PATCH_BYTES)
    risk_notes: list[str] = Field(default_factory=list, max_length=50)
    local_commands: list[str] = Field(default_factory=list, max_length=50)
    expected_metrics: dict[str, float | str] = Field(default_factory=dict)


class AgentOutputError(ValueError):
    """The reply was not the JSON object the prompt asked for."""


class PatchError(ValueError):
    """A candidate patch that is not a unified diff confined to the kernel's folder, or too large."""


_FENCE = re.compile(r"^\s*```(?:json)?\s*\n(.*?)\n\s*```\s*$", re.DOTALL)
_DIFF_FENCE = re.compile(r"^\s*```(?:diff|patch)?\s*\n(.*?)\n?\s*```\s*$", re.DOTALL)


def _confined(path: str, folder: str) -> bool:
    if path == "/dev/null":
        return True
    if path.startswith(("a/", "b/")):
        path = path[2:]
    parts = PurePosixPath(path).parts
    return bool(path) and not path.startswith("/") and ".." not in parts and path.startswith(folder)


def validate_patch(patch: str, kernel: str) -> str:
    """The patch, normalised (a ```diff fence removed, a final newline), when it is a unified diff whose
    every path lies under kernels/<kernel>/ and which is within the size limits; else PatchError."""
    match = _DIFF_FENCE.match(patch)
    text = (match.group(1) if match else patch).strip("\n") + "\n"
    if len(text.encode()) > MAX_PATCH_BYTES:
        raise PatchError(f"candidate_patch is over {MAX_PATCH_BYTES} bytes")
    try:
        files = PatchSet(text)
    except UnidiffParseError as exc:
        raise PatchError(f"candidate_patch is not a unified diff ({exc})") from exc
    if not files:
        raise PatchError("candidate_patch is not a unified diff (no ---/+++ file headers)")
    if len(files) > MAX_PATCH_FILES:
        raise PatchError(f"candidate_patch touches {len(files)} files (at most {MAX_PATCH_FILES})")
    folder = f"{KERNELS_DIR}/{kernel}/"
    for f in files:
        for path in (f.source_file, f.target_file):
            if not _confined(path, folder):
                raise PatchError(f"candidate_patch touches {path!r}, outside {folder}")
        if f.is_binary_file:
            raise PatchError("candidate_patch carries a binary change")
    lines = sum(f.added + f.removed for f in files)
    if lines > MAX_PATCH_LINES:
        raise PatchError(f"candidate_patch changes {lines} lines (at most {MAX_PATCH_LINES})")
    return text


def parse_review(text: str, kernel: str | None = None) -> AgentReview:
    """Parse the reply (a bare JSON object, or one inside a ```json fence); with `kernel`, the candidate
    patch must also pass validate_patch (an invalid one is an output error, so it can be repaired)."""
    match = _FENCE.match(text)
    body = match.group(1) if match else text
    try:
        data = json.loads(body)
    except json.JSONDecodeError as exc:
        raise AgentOutputError(f"reply is not valid JSON ({exc.msg} at line {exc.lineno})") from exc
    if not isinstance(data, dict):
        raise AgentOutputError("reply is JSON but not an object")
    try:
        review = AgentReview.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        raise AgentOutputError(f"reply field {where}: {err['msg']}") from exc
    if kernel is not None and review.candidate_patch and review.candidate_patch.strip():
        try:
            review.candidate_patch = validate_patch(review.candidate_patch, kernel)
        except PatchError as exc:
            raise AgentOutputError(str(exc)) from exc
    elif review.candidate_patch is not None and not review.candidate_patch.strip():
        review.candidate_patch = None
    return review
