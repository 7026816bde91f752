"""The agent's answer as data: parsed, validated, never executed."""

from __future__ import annotations

import json
import re
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from unidiff import PatchSet
from unidiff.errors import UnidiffParseError

from bot.config.manifest import KERNELS_DIR
from bot.models.agent_report import ProposedCase
from bot.models.finding import Phrase
from bot.text.safe import one_line

MAX_PATCH_BYTES = 64 * 1024
MAX_PATCH_LINES = 400  # added + removed: "small, explainable, revertible on its own"
MAX_PATCH_FILES = 20
# The rest of the reply is read by people in the comment: short notes, a few commands, a few metrics.
MAX_ITEMS = 30  # risk notes, local commands, expected metrics (each)
MAX_NOTE_CHARS = 1_000
MAX_COMMAND_CHARS = 500
MAX_METRIC_KEY_CHARS = 100
MAX_METRIC_VALUE_CHARS = 200
MAX_FIELD_CHARS = 16 * 1024  # all risk notes together, all commands together
MAX_REPLY_BYTES = MAX_PATCH_BYTES + 3 * MAX_FIELD_CHARS  # the whole reply as the gateway sent it

Note = Annotated[str, Field(max_length=MAX_NOTE_CHARS)]
Command = Annotated[str, Field(max_length=MAX_COMMAND_CHARS)]
MetricName = Annotated[str, Field(max_length=MAX_METRIC_KEY_CHARS)]
MetricValue = float | Annotated[str, Field(max_length=MAX_METRIC_VALUE_CHARS)]


class AgentReview(BaseModel):
    """What the users' task file asks for (`acceptance_outputs`), each field bounded in size."""

    model_config = ConfigDict(extra="ignore")

    candidate_patch: str | None = Field(None, max_length=MAX_PATCH_BYTES)
    risk_notes: list[Note] = Field(default_factory=list, max_length=MAX_ITEMS)
    local_commands: list[Command] = Field(default_factory=list, max_length=MAX_ITEMS)
    expected_metrics: dict[MetricName, MetricValue] = Field(default_factory=dict, max_length=MAX_ITEMS)
    test_matrix: list[ProposedCase] = Field(default_factory=list, max_length=MAX_ITEMS)  # base's bounds admit them

    @model_validator(mode="after")
    def _fields_within_their_totals(self) -> AgentReview:
        for name in ("risk_notes", "local_commands"):
            total = sum(len(item) for item in getattr(self, name))
            if total > MAX_FIELD_CHARS:
                raise ValueError(f"{name} hold {total} characters together, at most {MAX_FIELD_CHARS}")
        return self


class AgentOutputError(ValueError):
    """The reply was not the JSON object the prompt asked for. `why`: the same as a message of the catalog where
    opgate words it itself (None: a validation error, shown as written)."""

    def __init__(self, reason: str, why: Phrase | None = None) -> None:
        super().__init__(reason)
        self.why = why


class PatchError(ValueError):
    """A candidate patch that is not a unified diff confined to the kernel's folder, or too large."""


_FENCE = re.compile(r"^\s*```(?:json)?\s*\n(.*?)\n\s*```\s*$", re.DOTALL)
_DIFF_FENCE = re.compile(r"^\s*```(?:diff|patch)?\s*\n(.*?)\n?\s*```\s*$", re.DOTALL)
# A candidate may name only plain files: portable characters, no quoting git would need, no `.` or `..`.
_PLAIN_PATH = re.compile(r"[A-Za-z0-9_+-][A-Za-z0-9_.+-]*(?:/[A-Za-z0-9_+-][A-Za-z0-9_.+-]*)*")
# git's extended header lines (they never start with a hunk line's ' ', '+', '-' or '\\', so a scan of every
# line finds each of them, wherever a parser that disagrees with git might have put it).
_HEADER = re.compile(
    r"^(?:(?P<kind>rename from|rename to|copy from|copy to) (?P<path>.*)"
    r"|(?P<modekind>new file mode|deleted file mode|old mode|new mode) (?P<mode>\S*)"
    r"|index [0-9a-fA-F]+\.\.[0-9a-fA-F]+(?: (?P<indexmode>\S+))?"
    r"|diff --git (?P<names>.*)"
    r"|(?P<binary>GIT binary patch|Binary files .*))\s*$"
)
REGULAR, EXECUTABLE = "100644", "100755"
MODE_NAMES = {"120000": "a symbolic link", "160000": "a submodule (gitlink)", "040000": "a directory"}


def confined_path(path: str, folder: str) -> str | None:
    """Why `path` (without a/ b/ prefix) may not be in a candidate patch, or None when it is a plain file
    name under `folder` (kernels/<kernel>/)."""
    if not path.startswith(folder) or ".." in path.split("/"):
        return f"touches {path!r}, outside {folder}"
    if not _PLAIN_PATH.fullmatch(path):
        return f"names {path!r}: a candidate may name only plain files (letters, digits, ._+-) under {folder}"
    return None


def _prefixed(path: str, folder: str) -> str | None:
    if path == "/dev/null":
        return None
    if path.startswith('"'):
        return f"names {path!r}: a candidate may name only plain files (no name git has to quote)"
    if path.startswith(("a/", "b/")):
        return confined_path(path[2:], folder)
    return f"names {path!r} without the a/ or b/ prefix of a git diff"


def _mode(mode: str, kind: str) -> str | None:
    """Why a mode in a `kind` header is refused, or None."""
    if mode in MODE_NAMES:
        return f"would make {MODE_NAMES[mode]} ({kind} {mode})"
    if mode not in (REGULAR, EXECUTABLE):
        return f"carries an unknown file mode ({kind} {mode})"
    if mode == EXECUTABLE and kind in ("new file mode", "new mode"):
        return f"sets the executable bit ({kind} {mode}): a file may keep the bit it has, never gain it"
    return None


def _header_problem(line: str, folder: str) -> str | None:
    """Why one line of the patch is refused when it is a git extended header line, or None."""
    if any(ord(c) < 32 and c != "\t" for c in line):
        return "a header line holds a control character"
    match = _HEADER.match(line)
    if match is None:
        return None
    if match["binary"]:
        return "carries a binary change"
    if match["kind"]:  # rename/copy from/to name the path without a prefix
        return confined_path(match["path"], folder)
    if match["modekind"]:
        return _mode(match["mode"], match["modekind"])
    if match["indexmode"]:
        return _mode(match["indexmode"], "index")
    if match["names"] is not None:
        names = match["names"].split(" ")
        if len(names) != 2:
            return f"has a diff --git line git would read differently: {line[:120]!r}"
        return next((why for name in names if (why := _prefixed(name, folder))), None)
    return None


def validate_patch(patch: str, kernel: str, folder: str | None = None) -> str:
    """The patch, normalised (a ```diff fence removed, a final newline), when it is a unified diff within the
    size limits whose every old and new path, rename and copy source and target lies under
    kernels/<kernel>/ as a plain file name, which makes no symbolic link, submodule or binary file and gives
    no file the executable bit; else PatchError saying which rule it broke. `folder`: the kernel's folder from
    the repository root when it is not kernels/<kernel>."""
    match = _DIFF_FENCE.match(patch)
    text = (match.group(1) if match else patch).strip("\n") + "\n"
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise PatchError("candidate_patch is not Unicode text (a lone surrogate)") from exc
    if size > MAX_PATCH_BYTES:
        raise PatchError(f"candidate_patch is over {MAX_PATCH_BYTES} bytes")
    folder = f"{folder or f'{KERNELS_DIR}/{kernel}'}/"
    for number, line in enumerate(text.split("\n"), 1):
        if line[:1] in (" ", "+", "-", "\\", "@", ""):
            if "\r" in line or "\x00" in line:
                raise PatchError(f"candidate_patch line {number} holds a CR or NUL")
            continue
        if (why := _header_problem(line, folder)) is not None:
            raise PatchError(f"candidate_patch {why} (line {number})")
    try:
        files = PatchSet(text)
    except (UnidiffParseError, ValueError, IndexError) as exc:
        raise PatchError(f"candidate_patch is not a unified diff ({exc})") from exc
    if not files:
        raise PatchError("candidate_patch is not a unified diff (no ---/+++ file headers)")
    if len(files) > MAX_PATCH_FILES:
        raise PatchError(f"candidate_patch touches {len(files)} files (at most {MAX_PATCH_FILES})")
    for f in files:
        for path in (f.source_file, f.target_file):
            if (why := _prefixed(path, folder)) is not None:
                raise PatchError(f"candidate_patch {why}")
        if f.is_binary_file:
            raise PatchError("candidate_patch carries a binary change")
    lines = sum(f.added + f.removed for f in files)
    if lines > MAX_PATCH_LINES:
        raise PatchError(f"candidate_patch changes {lines} lines (at most {MAX_PATCH_LINES})")
    return text


def reply_object(text: str, max_bytes: int = MAX_REPLY_BYTES) -> dict[str, Any]:
    """The reply's JSON object (bare, or inside a ```json fence); AgentOutputError when it is not one."""
    if len(text.encode("utf-8", "replace")) > max_bytes:
        raise AgentOutputError(f"reply is over {max_bytes} bytes")
    match = _FENCE.match(text)
    body = match.group(1) if match else text
    try:
        data = json.loads(body)
    except json.JSONDecodeError as exc:
        raise AgentOutputError(f"reply is not valid JSON ({exc.msg} at line {exc.lineno})") from exc
    except ValueError as exc:  # an integer too long to convert
        raise AgentOutputError(f"reply is not usable JSON ({one_line(exc, limit=120)})") from exc
    except RecursionError as exc:
        raise AgentOutputError("reply is not usable JSON (it nests too deeply)") from exc
    if not isinstance(data, dict):
        raise AgentOutputError("reply is JSON but not an object")
    return data


def field_error(exc: ValidationError) -> AgentOutputError:
    """The first schema error of a reply, as the one line a repair request quotes."""
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err["loc"])
    return AgentOutputError(f"reply field {where}: {err['msg']}")


def parse_review(text: str, kernel: str | None = None, folder: str | None = None) -> AgentReview:
    """Parse the reply (a bare JSON object, or one inside a ```json fence); with `kernel`, the candidate
    patch must also pass validate_patch (an invalid one is an output error, so it can be repaired)."""
    data = reply_object(text)
    try:
        review = AgentReview.model_validate(data)
    except ValidationError as exc:
        raise field_error(exc) from exc
    if kernel is not None and review.candidate_patch and review.candidate_patch.strip():
        try:
            review.candidate_patch = validate_patch(review.candidate_patch, kernel, folder)
        except PatchError as exc:
            raise AgentOutputError(str(exc)) from exc
    elif review.candidate_patch is not None and not review.candidate_patch.strip():
        review.candidate_patch = None
    return review
