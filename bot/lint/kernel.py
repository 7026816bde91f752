"""opgate's own files: the repository configuration (opgate.toml, [tool.opgate]) and kernel manifests."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from bot.config import bindings, keys
from bot.config.buildfiles import submodules
from bot.config.manifest import KernelManifest, root_glob_problem
from bot.config.repo import CONFIG_FILE, RepoConfig
from bot.lint.collect import Collector, Facts
from bot.lint.findings import LintFinding
from bot.lint.locate import KeyPath, label_of, line_of, toml_key_lines
from bot.lint.secrets import KeyBook, find_keys, mask
from bot.verdict.flags import check_flags
from bot.verdict.occupancy import no_table


def _parse(c: Collector, rule: str, text: str, what: str) -> tuple[dict[str, Any], dict[KeyPath, int]] | None:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        c.add(getattr(exc, "lineno", 1) or 1, rule, f"{what} is not valid TOML: {exc}")
        return None
    return data, toml_key_lines(text)


def _errors(
    c: Collector,
    rule: str,
    exc: ValidationError,
    lines: dict[KeyPath, int],
    prefix: KeyPath = (),
    model: type[BaseModel] | None = None,
) -> None:
    for err in exc.errors():
        loc = tuple(err["loc"])
        if not loc and (m := re.match(r"(\w+)\[(\d+)\]", err["msg"].removeprefix("Value error, "))):
            loc = (m[1], int(m[2]), "params")  # a whole-manifest rule about one case: at that case's line
            c.add(line_of(lines, (*prefix, *loc)), rule, err["msg"].removeprefix("Value error, "))
            continue
        hint = keys.did_you_mean(model, loc) if model is not None and err["type"] == "extra_forbidden" else ""
        message = err["msg"].removeprefix("Value error, ")
        c.add(line_of(lines, (*prefix, *loc)), rule, f"{label_of(loc) or '(top level)'}: {message}{hint}")


def check_config(path: str, text: str) -> tuple[list[LintFinding], Facts]:
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
        _errors(c, "CONF001", exc, lines, prefix, RepoConfig)
    for key in ("source", "root"):
        if key in data:
            c.add(line_of(lines, (*prefix, key)), "CONF001", f"{key}: not a setting; remove it")
    return c.done()


def check_manifest(path: str, text: str, book: KeyBook | None = None) -> tuple[list[LintFinding], Facts]:
    """A kernel.toml: the schema, its domain configured, the files it names, its entry points, no literal key."""
    c = Collector(path)
    parsed = _parse(c, "KERN001", text, "kernel.toml")
    if parsed is None:
        return c.done()
    data, lines = parsed
    try:
        manifest = KernelManifest.model_validate(data)
    except ValidationError as exc:
        _errors(c, "KERN001", exc, lines, model=KernelManifest)
        return c.done()
    _check_files(c, manifest, Path(path).parent, lines)
    at_root = _repo_root(Path(path)) == Path(path).resolve().parent
    if at_root and (why := root_glob_problem(manifest.globs)) is not None:
        c.add(line_of(lines, ("globs",)), "KERN001", why)  # what the review refuses when it loads the kernel
    for arch in manifest.constraints.architectures:
        if (missing := no_table(arch)) is not None:
            c.add(line_of(lines, ("constraints", "architectures")), "KERN007", missing)
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
    module = next((m for m in submodules(root) if rel == m or rel.startswith(f"{m}/")), None)
    if not folder.is_dir() and module is not None:
        return (
            f"include_dirs: {rel!r} lies in the git submodule {module}, which is not checked out "
            f"(git submodule update --init {module})"
        )
    if not folder.is_dir():
        return f"include_dirs: {rel!r} is not a folder of the repository"
    if not any(folder.iterdir()):
        return f"include_dirs: {rel!r} is empty: a submodule not checked out? (git submodule update --init --recursive)"
    return None


def _check_files(c: Collector, manifest: KernelManifest, folder: Path, lines: dict[KeyPath, int]) -> None:
    """What a review would stop on: a missing tunables file or reference (where the manifest needs one), a missing
    source, an entry its sources lack. A resource-only kernel (no case) needs neither a reference nor an entry."""
    if not folder.is_dir():
        return  # linted as text (a file given alone): nothing beside it to check
    if manifest.tunables and not (folder / manifest.config).is_file():
        c.add(line_of(lines, ("config",)), "KERN006", f"config {manifest.config!r}: no such file beside kernel.toml")
    if manifest.cases and not (folder / manifest.reference.module).is_file():
        c.add(
            line_of(lines, ("reference", "module")),
            "KERN006",
            f"reference.module {manifest.reference.module!r}: no such file beside kernel.toml",
        )
    for device, spec in manifest.build.items():
        missing = [s for s in spec.sources if not (folder / s).is_file()]
        for source in missing:
            c.add(line_of(lines, ("build", device, "sources")), "KERN006", f"build.{device}: no source {source!r}")
        if not spec.entry:
            continue  # no case runs on this build (the manifest's own check says so where one does)
        problem = bindings.entry_problem(spec.entry, bindings.scan(folder, spec.sources), f"[build.{device}]")
        if problem is not None:
            c.add(line_of(lines, ("build", device, "entry")), "KERN006", problem)


def _strings(data: Any, where: KeyPath = ()) -> list[tuple[KeyPath, str]]:
    if isinstance(data, str):
        return [(where, data)]
    if isinstance(data, dict):
        return [s for k, v in data.items() for s in _strings(v, (*where, k))]
    if isinstance(data, list):
        return [s for i, v in enumerate(data) for s in _strings(v, (*where, i))]
    return []
