"""A changed file as opgate reads it from git's diff (bot.review.changes parses the diff into these)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class FileChange(BaseModel):
    model_config = ConfigDict(frozen=True)

    path: str
    old_path: str | None = None
    added: int = 0
    removed: int = 0
    binary: bool = False
    diff: str = ""

    @property
    def paths(self) -> tuple[str, ...]:
        return (self.path,) if self.old_path in (None, self.path) else (self.path, self.old_path)
