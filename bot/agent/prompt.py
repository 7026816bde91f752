"""The agent's prompt: the task, the diff as data and the domain's materials, trimmed to a token budget (pure)."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from functools import cache
from pathlib import PurePosixPath

import jinja2
from pydantic import BaseModel, ConfigDict, Field

from bot.agent.materials import Piece
from bot.config.manifest import MANIFEST_NAME, Kernel
from bot.models.diff import FileChange
from bot.templates import TEMPLATES, environment

SOURCE_SUFFIXES = frozenset({".cu", ".cuh", ".cpp", ".cc", ".cxx", ".c", ".h", ".hh", ".hpp", ".hxx", ".inl"})
CONFIG_SUFFIXES = frozenset({".json", ".toml", ".yaml", ".yml", ".ini", ".cfg"})

Counter = Callable[[list[dict[str, str]]], int]


@cache
def _prompts() -> jinja2.Environment:
    """The prompts' own environment: plain text for the model (nothing of the comment renderer)."""
    return environment(TEMPLATES / "prompts")


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
    pieces: list[Piece] = Field(default_factory=list)
    pieces_left_out: list[str] = Field(default_factory=list)
    dropped: list[Piece] = Field(default_factory=list)  # the pieces left out (`pieces_left_out`: their labels)


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


def messages(
    kernel: Kernel,
    changes: list[FileChange],
    left_out: list[str],
    pieces: Sequence[Piece] = (),
    pieces_left_out: Sequence[str] = (),
    not_available: Sequence[str] = (),
) -> list[dict[str, str]]:
    """System and user messages for the given diff and materials (nothing trimmed here). `not_available`: the
    materials the domain asks for that this job could not read, each with why."""
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
        trusted=[p.text for p in pieces if p.material != "functions"],
        functions=[p.text for p in pieces if p.material == "functions"],
        pieces_left_out=list(pieces_left_out),
        not_available=list(not_available),
    )
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


PIECE_JOIN_TOKENS = 2  # the blank line between two pieces, counted generously


def fill(pieces: Sequence[Piece], room: int, count: Counter) -> tuple[list[Piece], list[str]]:
    """The pieces that fit in `room` tokens, in their order (a piece too large is left out and smaller ones after
    it still go in), and the labels of those left out. The review's and tune's prompts are filled by it."""
    kept, dropped = split(pieces, room, count)
    return kept, [p.label for p in dropped]


def split(pieces: Sequence[Piece], room: int, count: Counter) -> tuple[list[Piece], list[Piece]]:
    """`fill`'s pieces that fit, and the pieces left out."""
    kept: list[Piece] = []
    dropped: list[Piece] = []
    for piece in pieces:
        cost = count([{"role": "user", "content": piece.text}]) - count([]) + PIECE_JOIN_TOKENS
        if cost <= room:
            kept.append(piece)
            room -= cost
        else:
            dropped.append(piece)
    return kept, dropped


def trim(
    kernel: Kernel,
    changes: list[FileChange],
    budget: int,
    count: Counter,
    pieces: Sequence[Piece] = (),
    not_available: Sequence[str] = (),
) -> Trimmed:
    """Fill the prompt with whole file diffs by priority (sources, then configs, then the rest), then with the
    domain's material pieces in its order (each material whole; changed functions one by one), while it stays
    within `budget` tokens; a piece too large is left out and smaller ones after it still go in."""
    ordered = order(changes, kernel)
    every_path = [c.path for c in ordered]
    every_label = [p.label for p in pieces]
    # The frame is measured with everything listed as left out: an upper bound on the final listings.
    frame = count(messages(kernel, [], every_path, (), every_label, not_available))
    used, included, left_out = frame, [], []
    for change in ordered:
        cost = count([{"role": "user", "content": change.diff}]) - count([])
        if used + cost <= budget:
            included.append(change)
            used += cost
        else:
            left_out.append(change.path)
    kept, dropped_pieces = split(pieces, budget - used, count)
    dropped = [p.label for p in dropped_pieces]
    final = count(messages(kernel, included, left_out, kept, dropped, not_available))
    return Trimmed(
        included=included,
        left_out=left_out,
        prompt_tokens=final,
        budget=budget,
        pieces=kept,
        pieces_left_out=dropped,
        dropped=dropped_pieces,
    )
