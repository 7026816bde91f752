"""Which files to lint: finding them under the given paths, telling their kind, linting them together."""

from __future__ import annotations

import json
import os
import tomllib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from bot.config.manifest import MANIFEST_NAME, find_manifests
from bot.config.repo import CONFIG_FILE, RepoConfig
from bot.lint.across import lint_across
from bot.lint.claude import check_claude
from bot.lint.codex import check_codex
from bot.lint.collect import Facts
from bot.lint.env import check_env
from bot.lint.findings import Kind, LintFinding, make_finding
from bot.lint.kernel import check_config, check_manifest
from bot.lint.secrets import KeyBook
from bot.lint.task import check_task


@dataclass(frozen=True)
class SourceFile:
    """A file's text and what it is; `domain` is the task's kernel domain, when known."""

    path: str
    text: str
    kind: Kind
    domain: str | None = None
    project_level: bool = False
    managed: bool = False  # a live client file CC Switch writes (keys in it are its design, not a finding)


def _looks_like_task(text: str) -> bool:
    try:
        data = json.loads(text)
    except ValueError:
        return False
    return isinstance(data, dict) and bool({"task_id", "provider"} & set(data))


def detect_kind(path: str | Path, text: str | None = None) -> Kind | None:
    """The kind of a file from its name (and, for ambiguous names, its text)."""
    p = Path(path)
    name = p.name
    if name.startswith(".env") or name.endswith(".env"):
        return "env"
    if name == "agent_task.json":
        return "task"
    if name.endswith(".json") and "task" in name.lower():
        return "task" if text is None or _looks_like_task(text) else None
    if name in ("settings.json", "settings.local.json"):
        if p.parent.name in (".claude", "claude") or text is None:
            return "claude"
        return "claude" if "ANTHROPIC_" in text or '"env"' in text else None
    if name == "config.toml":
        if p.parent.name in (".codex", "codex") or text is None:
            return "codex"
        return "codex" if "model_provider" in text else None
    if name == CONFIG_FILE:
        return "config"
    if name == "pyproject.toml":
        return "config" if text is not None and "[tool.opgate" in text else None
    if name == MANIFEST_NAME:
        return "manifest"
    return None


def lint_files(files: Sequence[SourceFile], book: KeyBook | None = None) -> list[LintFinding]:
    """Lint each file by its kind, then across them; findings sorted by path and line. `book`: the
    repository's configured domains and their key variables."""
    findings: list[LintFinding] = []
    facts: list[Facts] = []
    for f in files:
        if f.kind == "env":
            found, fact = check_env(f.path, f.text)
        elif f.kind == "task":
            found, fact = check_task(f.path, f.text, f.domain, book)
        elif f.kind == "claude":
            found, fact = check_claude(f.path, f.text, f.managed)
        elif f.kind == "config":
            found, fact = check_config(f.path, f.text)
        elif f.kind == "manifest":
            found, fact = check_manifest(f.path, f.text, book)
        else:
            found, fact = check_codex(f.path, f.text, f.project_level, f.managed, book)
        findings += found
        facts.append(fact)
    findings += lint_across(facts)
    return sorted(findings, key=lambda f: (f.path, f.line, f.rule, f.message))


_SKIP_DIRS = frozenset({".git", ".venv", "venv", "node_modules", "__pycache__", ".vscode", ".idea", ".ruff_cache"})


def _walk(folder: Path) -> Iterator[Path]:
    for root, dirs, names in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS)
        for name in sorted(names):
            yield Path(root) / name


def _kernel_domain(task_path: Path) -> str | None:
    try:
        domain = tomllib.loads((task_path.parent / MANIFEST_NAME).read_text()).get("domain")
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return None
    return domain if isinstance(domain, str) else None


def _is_project_codex(path: Path) -> bool:
    if path.parent.name != ".codex":
        return False
    try:
        return path.parent.parent.resolve() != Path.home().resolve()
    except OSError:
        return True


def lint_paths(paths: Iterable[str | Path], book: KeyBook | None = None) -> list[LintFinding]:
    """Read the files (folders: every file of a known kind under them) and lint them together."""
    problems, files = read_sources(paths)
    return problems + lint_files(files, book)


def read_sources(paths: Iterable[str | Path]) -> tuple[list[LintFinding], list[SourceFile]]:
    """The files of a known kind under the paths, and a finding for each named file that cannot be linted."""
    files: list[SourceFile] = []
    problems: list[LintFinding] = []
    seen: set[Path] = set()
    for given in paths:
        given = Path(given)
        explicit = not given.is_dir()
        for p in _walk(given) if given.is_dir() else [given]:
            if p.resolve() in seen:
                continue
            seen.add(p.resolve())
            try:
                text = p.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                if explicit:
                    why = exc.strerror if isinstance(exc, OSError) and exc.strerror else "not UTF-8 text"
                    problems.append(make_finding(str(p), 1, "LINT001", f"{p.name} cannot be read: {why}"))
                continue
            kind = detect_kind(p, text)
            if kind is None and explicit and p.name in ("settings.json", "settings.local.json", "config.toml"):
                kind = detect_kind(p)  # named on the command line: trust the name
            if kind is None:
                if explicit:
                    problems.append(make_finding(str(p), 1, "LINT002", f"{p.name} is not a kind of file lint knows"))
                continue
            domain = _kernel_domain(p) if kind == "task" else None
            files.append(SourceFile(str(p), text, kind, domain, kind == "codex" and _is_project_codex(p)))
    return sorted(problems, key=lambda f: f.path), files


def default_paths(repo_root: str | Path = ".", config: RepoConfig | None = None) -> list[Path]:
    """What `opgate lint` checks with no PATH: the opgate configuration, .env.example, every kernel's
    kernel.toml and agent_task.json (where the configuration's manifest globs find them), a domain's own task file
    (`task`), examples/.

    Also the repository's own `.claude/settings.json` and `.codex/config.toml` when they exist.
    """
    root = Path(repo_root)
    config = config or RepoConfig()
    out = [p for p in (root / CONFIG_FILE,) if p.is_file()]
    if (pyproject := root / "pyproject.toml").is_file() and detect_kind(pyproject, pyproject.read_text()) == "config":
        out.append(pyproject)
    out += [p for p in (root / ".env.example", root / ".claude" / "settings.json") if p.is_file()]
    for folder in find_manifests(root, config.manifests).values():
        out += [p for p in (root / folder / MANIFEST_NAME, root / folder / "agent_task.json") if p.is_file()]
    out += [p for d in config.domains.values() if d.task and (p := root / d.task).is_file()]  # e.g. the CI summary's
    out += [p for p in (root / ".codex" / "config.toml",) if p.is_file()]
    if (root / "examples").is_dir():
        out.append(root / "examples")
    return out
