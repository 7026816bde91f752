"""Unknown keys in a configuration file: the keys a pydantic model accepts at a location, and "did you mean"."""

from __future__ import annotations

import difflib
import types
import typing
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel


def _models(annotation: Any) -> list[Any]:
    """The annotation itself and what it wraps (list[X], dict[str, X], X | None)."""
    origin = typing.get_origin(annotation)
    if origin is None:
        return [annotation]
    if origin in (typing.Union, types.UnionType, typing.Annotated):
        return [m for a in typing.get_args(annotation) for m in _models(a)]
    return [annotation, *(m for a in typing.get_args(annotation) for m in _models(a))]


def model_at(model: type[BaseModel], loc: Sequence[str | int]) -> type[BaseModel] | None:
    """The model whose fields are valid keys at `loc` (its last part is the unknown key itself)."""
    current: type[BaseModel] = model
    keyed = False  # the previous part was a dict field: this part is one of its keys, not a field
    for part in loc[:-1]:
        if isinstance(part, int) or keyed:
            keyed = False
            continue
        field = current.model_fields.get(str(part))
        if field is None:
            return None
        found = [m for m in _models(field.annotation) if isinstance(m, type) and issubclass(m, BaseModel)]
        if not found:
            return None
        current = found[0]
        keyed = typing.get_origin(field.annotation) is dict
    return current


def did_you_mean(model: type[BaseModel], loc: Sequence[str | int]) -> str:
    """ " (did you mean 'tolerance'?)" for a misspelt key at `loc`, else the keys allowed there, else ""."""
    if not loc or not isinstance(loc[-1], str):
        return ""
    owner = model_at(model, loc)
    if owner is None:
        return ""
    known = list(owner.model_fields)
    close = difflib.get_close_matches(loc[-1], known, n=1, cutoff=0.6)
    if close:
        return f" (did you mean {close[0]!r}?)"
    return f" (allowed: {', '.join(known)})"
