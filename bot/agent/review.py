"""The agent's answer as data: parsed, validated, never executed."""

from __future__ import annotations

import json
import re

from pydantic import BaseModel, ConfigDict, Field, ValidationError

MAX_PATCH_BYTES = 64 * 1024


class AgentReview(BaseModel):
    """What the users' task file asks for (`acceptance_outputs`)."""

    model_config = ConfigDict(extra="ignore")

    candidate_patch: str | None = Field(None, max_length=MAX_PATCH_BYTES)
    risk_notes: list[str] = Field(default_factory=list, max_length=50)
    local_commands: list[str] = Field(default_factory=list, max_length=50)
    expected_metrics: dict[str, float | str] = Field(default_factory=dict)


class AgentOutputError(ValueError):
    """The reply was not the JSON object the prompt asked for."""


_FENCE = re.compile(r"^\s*```(?:json)?\s*\n(.*?)\n\s*```\s*$", re.DOTALL)


def parse_review(text: str) -> AgentReview:
    """Parse the reply (a bare JSON object, or one inside a ```json fence)."""
    match = _FENCE.match(text)
    body = match.group(1) if match else text
    try:
        data = json.loads(body)
    except json.JSONDecodeError as exc:
        raise AgentOutputError(f"reply is not valid JSON ({exc.msg} at line {exc.lineno})") from exc
    if not isinstance(data, dict):
        raise AgentOutputError("reply is JSON but not an object")
    try:
        return AgentReview.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        raise AgentOutputError(f"reply field {where}: {err['msg']}") from exc
