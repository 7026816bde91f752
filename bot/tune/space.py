"""The search space: allowed configs, a config as a patch, and a candidate's identity (its key)."""

from __future__ import annotations

import difflib
import itertools
import json
import subprocess
from dataclasses import dataclass
from math import prod
from pathlib import Path
from typing import Any

from bot.agent.review import PatchError, validate_patch
from bot.config.manifest import KERNELS_DIR, ROOT, Kernel, repo_file
from bot.edges import gitio
from bot.review.candidates import CandidateError

NO_NEWLINE = "\\ No newline at end of file\n"


def size(tunables: dict[str, list[Any]]) -> int:
    return prod(len(v) for v in tunables.values()) if tunables else 0


def configs(tunables: dict[str, list[Any]]) -> list[dict[str, Any]]:
    """Every allowed config, in the manifest's order (the last tunable varies fastest)."""
    names = list(tunables)
    return [dict(zip(names, values, strict=True)) for values in itertools.product(*tunables.values())]


def config_key(config: dict[str, Any]) -> str:
    """The key of a candidate that changes only the config file: its values, whatever the formatting."""
    return "config:" + json.dumps(config, sort_keys=True, separators=(",", ":"))


def kernel_folder(kernel: Kernel) -> str:
    """The kernel's folder relative to the repository root (where the configuration's globs found it)."""
    return kernel.path or f"{KERNELS_DIR}/{kernel.name}"


def config_path(kernel: Kernel) -> str:
    return repo_file(kernel_folder(kernel), kernel.manifest.config)


def config_text(config: dict[str, Any], like: str) -> str:
    """`config` written the way the base file is: one line or indented, with its final newline or without."""
    indented = "\n" in like.strip()
    text = json.dumps(config, indent=2 if indented else None)
    return text + "\n" if like.endswith("\n") else text


def _lines(text: str) -> list[str]:
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n" + NO_NEWLINE  # git's marker for a last line without a newline
    return lines


def file_patch(path: str, old: str, new: str) -> str:
    """A unified diff of one file (as `git diff` writes it, with a/ and b/ prefixes)."""
    diff = difflib.unified_diff(_lines(old), _lines(new), fromfile=f"a/{path}", tofile=f"b/{path}", n=3)
    return "".join(diff)


def config_patch(kernel: Kernel, base_text: str, config: dict[str, Any]) -> str:
    """The patch that sets the kernel's config file to `config` (empty when it already is)."""
    ordered = {k: config[k] for k in kernel.config if k in config} | config
    return file_patch(config_path(kernel), base_text, config_text(ordered, base_text))


@dataclass(frozen=True)
class Inspected:
    """A candidate patch applied to base in a scratch worktree: what it changes and what it is."""

    key: str
    config: dict[str, Any]  # the config file after the patch ({} when it is not a JSON object)
    is_base: bool  # the kernel is the same as on base (no file changed, or only the config's formatting)
    paths: list[str]
    patch: str  # validated and normalised


def _git(tree: Path, *args: str, stdin: str | None = None) -> str:
    proc = subprocess.run(["git", "-C", str(tree), *args], input=stdin, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        last = proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else "failed"
        raise CandidateError(f"git {args[0]}: {last}")
    return proc.stdout


def inspect(repo: Path, base_sha: str, patch: str, kernel: Kernel) -> Inspected:
    """Apply `patch` to base (text only: `git apply`, nothing runs) and name the candidate.

    The key is `config:<values>` when only the config file changed, else `tree:<git tree of the kernel's folder>`,
    so the same candidate written twice (another formatting, another diff) is recognised as a repeat.
    """
    try:
        text = validate_patch(patch, kernel.name, kernel_folder(kernel))
    except PatchError as exc:
        raise CandidateError(str(exc)) from exc
    folder = kernel_folder(kernel)
    with gitio.worktree(repo, base_sha) as tree:
        _git(tree, "apply", "--check", "--whitespace=nowarn", "-", stdin=text)
        _git(tree, "apply", "--whitespace=nowarn", "--index", "-", stdin=text)
        paths = [p for p in _git(tree, "diff", "--cached", "--name-only", base_sha).splitlines() if p]
        cfg_file = tree / config_path(kernel)
        try:
            config = json.loads(cfg_file.read_text())
        except (OSError, ValueError):
            config = {}
        config = config if isinstance(config, dict) else {}
        only_config = set(paths) <= {config_path(kernel)}
        if only_config and config == kernel.config:
            return Inspected(key=config_key(kernel.config), config=config, is_base=True, paths=paths, patch=text)
        if only_config and config:
            return Inspected(key=config_key(config), config=config, is_base=False, paths=paths, patch=text)
        tree_sha = _git(tree, "write-tree", *([] if folder == ROOT else [f"--prefix={folder}/"])).strip()
        return Inspected(key=f"tree:{tree_sha}", config=config, is_base=False, paths=paths, patch=text)
