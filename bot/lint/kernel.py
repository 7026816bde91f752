"""opgate's own files: the repository configuration (opgate.toml, [tool.opgate]) and kernel manifests."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from bot.config.manifest import KernelManifest
from bot.config.repo import CONFIG_FILE, RepoConfig
from bot.lint.collect import Collector, Facts
from bot.lint.findings import Finding
from bot.lint.locate import KeyPath, label_of, line_of, toml_key_lines
from bot.lint.secrets import KeyBook, find_keys, mask
from bot.verdict.flags import check_flags


def _parse(c: Collector, rule: str, text: str, what: str) -> tuple[dict[str, Any], dict[KeyPath, int]] | None:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        c.add(getattr(exc, "lineno", 1) or 1, rule, f"{what} is not valid TOML: {exc}")
        return None
    return data, toml_key_lines(text)


def _errors(c: Collector, rule: str, exc: ValidationError, lines: dict[KeyPath, int], prefix: KeyPath = ()) -> None:
    for err in exc.errors():
        loc = tuple(err["loc"])
        c.add(line_of(lines, (*prefix, *loc)), rule, f"{label_of(loc) or '(top level)'}: {err['msg']}")


def check_config(path: str, text: str) -> tuple[list[Finding], Facts]:
    """opgate.toml, or a pyproject.toml's [tool.opgate]: the schema, domain names, one key per domain."""
    c = Collector(path)
    parsed = _parse(c, "CONF001", text, Path(path).name)
    if parsed is None:
        return c.done()
    data, lines = parsed
    prefix: KeyPath = ()
    if Path(path).name != CONFIG_FILE:
        data, prefix = data.get("tool", {}).get("opgate", {}), ("tool", "opgate")
    try:
        RepoConfig.model_validate(data)
    except ValidationError as exc:
        _errors(c, "CONF001", exc, lines, prefix)
    for key in ("source", "root"):
        if key in data:
            c.add(line_of(lines, (*prefix, key)), "CONF001", f"{key}: not a setting; remove it")
    return c.done()


def check_manifest(path: str, text: str, book: KeyBook | None = None) -> tuple[list[Finding], Facts]:
    """A kernel.toml: the schema, its name equal to its folder, its domain configured, no literal key."""
    c = Collector(path)
    parsed = _parse(c, "KERN001", text, "kernel.toml")
    if parsed is None:
        return c.done()
    data, lines = parsed
    try:
        manifest = KernelManifest.model_validate(data)
    except ValidationError as exc:
        _errors(c, "KERN001", exc, lines)
        return c.done()
    folder = Path(path).resolve().parent.name
    if manifest.name != folder:
        c.add(line_of(lines, ("name",)), "KERN001", f"name {manifest.name!r} differs from its folder {folder!r}")
    if book is not None and manifest.domain not in book.domains:
        have = ", ".join(sorted(book.domains)) or "none"
        c.add(
            line_of(lines, ("domain",)),
            "KERN002",
            f"domain {manifest.domain!r} is not configured (configured: {have}); add "
            f"[tool.opgate.domains.{manifest.domain}] to pyproject.toml or opgate.toml",
        )
    for device, spec in manifest.build.items():
        for key, flags, nvcc in (("cflags", spec.cflags, False), ("cuda_cflags", spec.cuda_cflags, True)):
            for finding in check_flags(flags, nvcc=nvcc, where=f"[build.{device}] {key}"):
                c.add(line_of(lines, ("build", device, key)), "KERN004", finding)
        for rel in spec.include_dirs:
            if (why := _include_problem(path, rel)) is not None:
                c.add(line_of(lines, ("build", device, "include_dirs")), "KERN005", f"[build.{device}] {why}")
    for where, value in _strings(data):
        if keys := find_keys(value):
            c.secrets.update(keys)
            c.add(line_of(lines, where), "KERN003", f"{label_of(where)} holds what looks like a key ({mask(keys[0])})")
    return c.done()


def _repo_root(manifest: Path) -> Path | None:
    """The repository a kernel.toml lies in: the nearest folder above it with a .git (None: not in one)."""
    for folder in manifest.resolve().parents:
        if (folder / ".git").exists():
            return folder
    return None


def _include_problem(path: str, rel: str) -> str | None:
    """Why an include directory (relative to the repository root) cannot be used, or None."""
    root = _repo_root(Path(path))
    if root is None:
        return None  # not in a repository: the schema checked the path's form, the review checks the folder
    folder = (root / rel).resolve()
    if not folder.is_relative_to(root):
        return f"include_dirs: {rel!r} leads out of the repository (a symlink?)"
    if not folder.is_dir():
        return f"include_dirs: {rel!r} is not a folder of the repository"
    if not any(folder.iterdir()):
        return f"include_dirs: {rel!r} is empty: a submodule not checked out? (git submodule update --init --recursive)"
    return None


def _strings(data: Any, where: KeyPath = ()) -> list[tuple[KeyPath, str]]:
    if isinstance(data, str):
        return [(where, data)]
    if isinstance(data, dict):
        return [s for k, v in data.items() for s in _strings(v, (*where, k))]
    if isinstance(data, list):
        return [s for i, v in enumerate(data) for s in _strings(v, (*where, i))]
    return []
