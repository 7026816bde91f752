"""The CI summary's answer as data: parsed, validated against the facts it was given, checked for contradictions."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from bot.agent.review import AgentOutputError, field_error, reply_object
from bot.models.ci_summary import CiSummaryFacts
from bot.models.report import KernelVerdict
from bot.text.i18n import LANGUAGES, SOURCE_LOCALE, english_runs, is_chinese

# Read by people in the comment, under the headline: a few sentences and a few short items.
MAX_SUMMARY_CHARS = 1_000
MAX_ITEMS = 5  # likely causes, things to look at next, things the data cannot tell (each)
MAX_ITEM_CHARS = 500
MAX_CASES = 10  # cases one cause names
MAX_REPLY_BYTES = 32 * 1024

Item = Annotated[str, Field(min_length=1, max_length=MAX_ITEM_CHARS)]
Name = Annotated[str, Field(min_length=1, max_length=200)]


class Cause(BaseModel):
    """A likely cause, tied to a kernel and the cases (and their numbers) that show it."""

    model_config = ConfigDict(extra="ignore")

    kernel: Name
    cases: list[Name] = Field(default_factory=list, max_length=MAX_CASES)
    text: Item


class CiSummaryReply(BaseModel):
    """What the CI summary's prompt asks for, each field bounded in size."""

    model_config = ConfigDict(extra="ignore")

    summary: str = Field(min_length=1, max_length=MAX_SUMMARY_CHARS)
    verdicts: dict[Name, KernelVerdict] = Field(description="each changed kernel's verdict, as the reply reads it")
    likely_cause: list[Cause] = Field(default_factory=list, max_length=MAX_ITEMS)
    look_next: list[Item] = Field(default_factory=list, max_length=MAX_ITEMS)
    cannot_tell: list[Item] = Field(default_factory=list, max_length=MAX_ITEMS)


def parse_ci_summary(text: str, facts: CiSummaryFacts, locale: str = SOURCE_LOCALE) -> CiSummaryReply:
    """The reply as a CiSummaryReply whose kernels and cases are the facts' own: it states every changed kernel's
    verdict, names no kernel or case the review does not have, and is written in `locale` (else AgentOutputError,
    so it can be repaired)."""
    data = reply_object(text, MAX_REPLY_BYTES)
    try:
        reply = CiSummaryReply.model_validate(data)
    except ValidationError as exc:
        raise field_error(exc) from exc
    known = facts.case_names()
    if missing := [k for k in known if k not in reply.verdicts]:
        raise AgentOutputError(f"reply field verdicts: no verdict for {', '.join(missing)}")
    if unknown := [k for k in reply.verdicts if k not in known]:
        raise AgentOutputError(f"reply field verdicts: {', '.join(unknown)} is not a changed kernel of this review")
    for i, cause in enumerate(reply.likely_cause):
        if cause.kernel not in known:
            raise AgentOutputError(f"reply field likely_cause.{i}.kernel: {cause.kernel} is not a changed kernel")
        if strangers := [c for c in cause.cases if c not in known[cause.kernel]]:
            raise AgentOutputError(
                f"reply field likely_cause.{i}.cases: {', '.join(strangers)} is not a case of {cause.kernel}"
            )
    if locale != SOURCE_LOCALE:
        _in_language(reply, facts, locale)
    return reply


def _in_language(reply: CiSummaryReply, facts: CiSummaryFacts, locale: str) -> None:
    """Every text the comment shows is in the locale's language: Chinese for zh-CN, the kernels' and cases' names,
    numbers, units and code aside (bot.text.i18n.is_chinese)."""
    names = frozenset(facts.case_names()) | frozenset(n for ns in facts.case_names().values() for n in ns)
    texts = [("summary", reply.summary)]
    texts += [(f"likely_cause.{i}.text", c.text) for i, c in enumerate(reply.likely_cause)]
    texts += [(f"look_next.{i}", t) for i, t in enumerate(reply.look_next)]
    texts += [(f"cannot_tell.{i}", t) for i, t in enumerate(reply.cannot_tell)]
    for field, value in texts:
        if not is_chinese(value, names):
            english = "; ".join(repr(r) for r in english_runs(value, names)[:2]) or "no Chinese in it"
            raise AgentOutputError(f"reply field {field}: not written in {LANGUAGES[locale]} ({english})")


def contradictions(reply: CiSummaryReply, facts: CiSummaryFacts) -> list[str]:
    """Where the reply's verdicts differ from the measured ones, worded so the measured verdict stands."""
    measured = {k.name: k.verdict for k in facts.kernels}
    return [
        f"it calls {name} {said.replace('_', ' ')}; the gates measured {measured[name].replace('_', ' ')}"
        for name, said in reply.verdicts.items()
        if name in measured and said != measured[name]
    ]
