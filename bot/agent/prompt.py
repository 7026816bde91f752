"""The agent's prompt: the task, its constraints and the diff as data, trimmed to a token budget (pure)."""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import cache
from pathlib import PurePosixPath

import jinja2
from pydantic import BaseModel, ConfigDict

from bot.config.manifest import MANIFEST_NAME, Kernel
from bot.models.diff import FileChange
from bot.templates import TEMPLATES

SOURCE_SUFFIXES = frozenset({".cu", ".cuh", ".cpp", ".cc", ".cxx", ".c", ".h", ".hh", ".hpp", ".hxx", ".inl"})
CONFIG_SUFFIXES = frozenset({".json", ".toml", ".yaml", ".yml", ".ini", ".cfg"})
PRIORITY_NAMES = ("kernel source", "config", "other")

Counter = Callable[[list[dict[str, str]]], int]


@cache
def _prompts() -> jinja2.Environment:
    """The prompts' own environment: plain text for the model (nothing of the comment renderer)."""
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES / "prompts"),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def render_prompt(template: str, **context: object) -> str:
    """A prompt template of templates/prompts/, rendered as plain text."""
    return _prompts().get_template(template).render(**context)


class Trimmed(BaseModel):
    """What goes into the prompt and what was left out for size (the comment's coverage footer)."""

    model_config = ConfigDict(frozen=True)

    included: list[FileChange]
    left_out: list[str]
    prompt_tokens: int
    budget: int


def priority(change: FileChange, kernel: Kernel) -> int:
    """0: the kernel's sources (build sources or C++/CUDA files), 1: configs, 2: everything else."""
    path = PurePosixPath(change.path)
    sources = {s for spec in kernel.manifest.build.values() for s in spec.sources}
    if path.name in sources or path.suffix in SOURCE_SUFFIXES:
        return 0
    configs = {kernel.manifest.config, MANIFEST_NAME, kernel.manifest.task}
    if path.name in configs or path.suffix in CONFIG_SUFFIXES:
        return 1
    return 2


def order(changes: list[FileChange], kernel: Kernel) -> list[FileChange]:
    """Changes by priority, the diff's own order kept inside each priority."""
    return sorted(changes, key=lambda c: priority(c, kernel))


def matrix_bounds(kernel: Kernel) -> dict[str, object]:
    """What the prompt says of the test matrix: `[agent_cases]`'s bounds (None: no matrix asked) and the case names."""
    return {"bounds": kernel.manifest.agent_cases, "cases": [c.name for c in kernel.manifest.cases]}


def messages(kernel: Kernel, changes: list[FileChange], left_out: list[str]) -> list[dict[str, str]]:
    """System and user messages for the given diff (nothing trimmed here)."""
    assert kernel.task is not None
    system = render_prompt(
        "review_system.md.j2", task=kernel.task, kernel=kernel.name, folder=kernel.path, **matrix_bounds(kernel)
    )
    user = render_prompt(
        "review_user.md.j2",
        task=kernel.task,
        task_json=kernel.task.model_dump_json(indent=2),
        kernel=kernel.name,
        config_json=json.dumps(kernel.config, sort_keys=True),
        files=[c.path for c in changes],
        left_out=left_out,
        diff="".join(c.diff for c in changes),
    )
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def trim(kernel: Kernel, changes: list[FileChange], budget: int, count: Counter) -> Trimmed:
    """Fill the prompt with whole file diffs by priority (sources, then configs, then the rest) while
    it stays within `budget` tokens; a file too large is left out and smaller ones after it still go in."""
    ordered = order(changes, kernel)
    every_path = [c.path for c in ordered]
    # The frame is measured with every path listed as left out: an upper bound on the final listing.
    frame = count(messages(kernel, [], every_path))
    used, included, left_out = frame, [], []
    for change in ordered:
        cost = count([{"role": "user", "content": change.diff}]) - count([])
        if used + cost <= budget:
            included.append(change)
            used += cost
        else:
            left_out.append(change.path)
    final = count(messages(kernel, included, left_out))
    return Trimmed(included=included, left_out=left_out, prompt_tokens=final, budget=budget)
