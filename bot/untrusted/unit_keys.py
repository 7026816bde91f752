"""A translation unit's cache key: its text as each pass of its own compile preprocesses it, so a comment (or the lines
one shifts) compiles nothing again; and the slots that keep the runner's cores busy but not oversubscribed."""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
import shlex
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from bot.untrusted.sandbox import Sandbox, Spec

log = logging.getLogger(__name__)

TEXT_KEY_VERSION = "opgate.unit-text/1"  # bump when the normalisation or the passes read change
DRYRUN_TIMEOUT_S = 60
_ASSIGNMENT = re.compile(r"^[A-Za-z_]\w*=")
_LINE_MARKER = re.compile(r"^#\s*(?:line\s+)?\d+(?:\s|$)")


def cores() -> int:
    """The cores this process may run on (a runner's cgroup or affinity can give fewer than the machine has)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


@cache
def _slots() -> threading.BoundedSemaphore:
    return threading.BoundedSemaphore(cores())


@contextlib.contextmanager
def slot() -> Iterator[None]:
    """One compiler process's turn: every compile of a review (each architecture's units, both sides, the folds) takes
    one, so the review runs as many at once as the runner has cores."""
    with _slots():
        yield


def preprocess_steps(dryrun: str, out: str) -> list[tuple[list[str], str]] | None:
    """The preprocessing commands (`gcc -E … -o FILE`) of an nvcc line's `--dryrun` listing, each with `-P` (no line
    markers) and the file it writes, which must lie under `out`: the host pass and one per device pass, as the compile
    runs them (the same macros: `__CUDA_ARCH__`, `__CUDA_ARCH_FEAT_SM90_ALL` …). None when a step cannot be read
    exactly (a shell word that does not parse, a variable, an output elsewhere): the caller then keys on bytes."""
    steps = []
    for line in dryrun.splitlines():
        if not line.startswith("#$ "):
            continue
        body = line[3:].strip()
        if _ASSIGNMENT.match(body):
            continue
        try:
            argv = shlex.split(body)
        except ValueError:
            return None
        if "-E" not in argv:
            continue
        if "-o" not in argv or any("$" in a for a in argv):
            return None
        target = argv[argv.index("-o") + 1] if argv.index("-o") + 1 < len(argv) else ""
        if not target.startswith(f"{out}/") or ".." in Path(target).parts:
            return None
        at = argv.index("-E")
        steps.append(([*argv[: at + 1], "-P", *argv[at + 1 :]], target))
    return steps or None


def normalise(text: str) -> str:
    """Preprocessed text without what a comment changes: blank lines, leading and trailing blanks, line markers."""
    lines = (line.strip() for line in text.splitlines())
    return "\n".join(line for line in lines if line and not _LINE_MARKER.match(line))


@dataclass(frozen=True)
class Preprocessed:
    """What a unit's compile preprocesses: the sha256 of every pass's normalised text, in the compile's order, and
    whether one of them holds the word the caller looked for."""

    digest: str
    holds: bool = False


def preprocessed(
    command: Sequence[str], spec: Spec, tmp: Path, out: str, sandbox: Sandbox, *, timeout: float, word: str = ""
) -> Preprocessed | None:
    """Every pass's preprocessed text of the compile `command` (nvcc, in the sandbox `spec` that binds `tmp` at `out`),
    normalised and hashed (a heavy unit's text runs to megabytes: it is never kept); None when nvcc does not list its
    steps or one fails."""
    here = sandbox.localize(spec, out)  # without bubblewrap nvcc lists the host's paths
    digest, holds = hashlib.sha256(), False
    with slot():
        code, listing = sandbox.run(spec, [*command, "--dryrun"], timeout=DRYRUN_TIMEOUT_S)
        steps = preprocess_steps(listing, here) if code == 0 else None
        if steps is None:
            log.debug("no preprocessing steps to key on (rc %s)", code)
            return None
        for argv, target in steps:
            code, output = sandbox.run(spec, argv, timeout=timeout)
            path = tmp / Path(target).relative_to(here)
            if code != 0 or path.is_symlink() or not path.is_file():
                log.debug("preprocessing failed (rc %s): %s", code, output[-500:])
                return None
            text = normalise(path.read_text(errors="replace"))
            path.unlink()
            if here != out:  # the sandbox's paths back: two checkouts of one text share its key, as in bubblewrap
                for bind in sorted(spec.binds, key=lambda b: len(str(b.source)), reverse=True):
                    text = text.replace(str(bind.source), bind.target)
            digest.update(hashlib.sha256(text.encode()).digest())
            holds = holds or (bool(word) and word in text)
    return Preprocessed(digest.hexdigest(), holds)


def text_key(text: Preprocessed, meta: Mapping[str, object]) -> str:
    """A unit's key from its preprocessed text and what else its compile depends on (source, flags, arch,
    toolchain)."""
    h = hashlib.sha256(TEXT_KEY_VERSION.encode() + b"\0")
    h.update(json.dumps(meta, sort_keys=True).encode() + b"\0")
    h.update(text.digest.encode())
    return h.hexdigest()


class TextKey(BaseModel):
    """What a unit's files preprocess to, remembered: `raw` (sha256 of the bytes of every file it can read, its flags,
    arch and toolchain) -> `key` (of its preprocessed text), so an unchanged unit is not preprocessed again."""

    model_config = ConfigDict(extra="forbid")

    raw: str
    key: str


def remembered(cache_dir: Path | None, raw: str) -> str | None:
    if cache_dir is None:
        return None
    try:
        found = TextKey.model_validate_json((cache_dir / f"resources-text-{raw[:32]}.json").read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValidationError) as exc:
        log.warning("ignoring an unreadable unit key in the resource cache: %s", exc)
        return None
    return found.key if found.raw == raw else None


def remember(cache_dir: Path | None, raw: str, key: str) -> None:
    if cache_dir is None:
        return
    path = cache_dir / f"resources-text-{raw[:32]}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.write_text(TextKey(raw=raw, key=key).model_dump_json())
    tmp.replace(path)
