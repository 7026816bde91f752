"""The users' structured agent task file (`agent_task.json`): its provider, its target and what it must deny."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
)

from bot.config.manifest_tables import _first_error, _Strict
from bot.errors import InputError


class Provider(_Strict):
    base_url: str
    api_key_env: str

    @field_validator("api_key_env")
    @classmethod
    def _is_a_variable_name(cls, value: str) -> str:
        if not re.fullmatch(r"[A-Z][A-Z0-9_]*", value):
            raise ValueError("must be the name of an environment variable (A-Z, 0-9, _), never a key")
        return value


REQUIRED_DENY = ("direct_production_db_access", "remote_shell_execution", "secret_exfiltration")


class AgentTask(BaseModel):
    """The users' structured task file (`agent_task.json`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    task_id: str = Field(min_length=1)
    provider: Provider
    model: str = Field(min_length=1)
    target: dict[str, Any]
    constraints: dict[str, str]
    acceptance_outputs: list[str]
    deny: list[str]

    @field_validator("deny")
    @classmethod
    def _denies_the_three(cls, value: list[str]) -> list[str]:
        if missing := [d for d in REQUIRED_DENY if d not in value]:
            raise ValueError(f"deny must list {', '.join(missing)}")
        return value


def load_task(path: Path) -> AgentTask:
    try:
        return AgentTask.model_validate(json.loads(path.read_text()))
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: not valid JSON: {exc}") from exc
    except ValidationError as exc:
        raise InputError(f"{path}: {_first_error(exc)}") from exc
