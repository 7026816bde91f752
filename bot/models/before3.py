"""How a report.json written before schema opgate.report/3 reads: each English field that had its phrase beside it
(`launch_notes` and `launch_notes_why`, `reason` and `why` …) as one field of phrases under the plain name. The
models' `model_validator(mode="before")` call these, one place per model."""

from __future__ import annotations

import re
from typing import Any

from bot.models.finding import Phrase

# How /1 and /2 said an expectation's value was read, without a phrase beside it: the catalog's message for each.
READ_AS = {
    "an expected error is a ceiling: inside when the measured error is at most it": Phrase(key="expect.ceiling"),
    "an exact figure: inside when equal": Phrase(key="expect.exact"),
    "inside within ±0.5 points": Phrase(key="expect.within"),
}


# The agent's reasons /1 and /2 wrote without a phrase beside them (`--offline`; the sum when no kernel changed).
UNPHRASED = {
    "--offline given: the agent was not asked": "agent.offline",
    "no kernel changed": "agent.no_kernel_changed",
}


def speedup_read(note: str) -> Phrase | None:
    """/1 and /2's "speedup ×2 read as a p50 change" as its message of the catalog; None for any other note."""
    found = re.fullmatch(r"speedup ×(\S+) read as a p50 change", note)
    return Phrase(key="expect.speedup_read", params={"speedup": found[1]}) if found else None


def phrase_of(data: Any, name: str, why: str = "why", *, empty: bool = False) -> Any:
    """A /1 or /2 report's `name` in English and its phrase under `why` (where it has one) as one phrase under
    `name`: the phrase, else the English as written (`empty`: "" too; else "" is none)."""
    if isinstance(data, dict) and (why in data or isinstance(data.get(name), str)):
        data = dict(data)
        english, said = data.get(name), data.pop(why, None)
        if said is not None:
            data[name] = said
        elif isinstance(english, str) and (english or empty):
            data[name] = Phrase.as_written(english)
        else:
            data.pop(name, None)
    return data


def phrases_of(data: Any, name: str, why: str) -> Any:
    """A /1 or /2 report's lines `name` in English and their phrases under `why` as one list of phrases under
    `name`: the phrases where the report has one for each line, else each line as written."""
    if isinstance(data, dict) and (why in data or any(isinstance(x, str) for x in data.get(name) or [])):
        data = dict(data)
        english, said = list(data.get(name) or []), list(data.pop(why, None) or [])
        data[name] = said if len(said) == len(english) else [Phrase.as_written(x) for x in english]
    return data
