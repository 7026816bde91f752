"""Every finding's English text, by message id (the catalog the gates' findings render through), and a finding
rendered in English: what report.json, the logs and the ledger keep.

A message is a label (the gate as the reader sees it, "performance inconclusive") and a text with `{named}`
parameters; its text lives in the data file of its domain (`cases.toml`, `resources.toml`, `builds.toml`,
`review.toml`: one message a line, read once at import). A
case's finding reads `label: text` on the case and `label: case text` on its kernel (without a label: `case: text`),
so a sentence names gate, case, value and limit once. Numbers come pre-formatted in the parameters: they are
identical in every language. A `Wording` renders through one translator: `ENGLISH` (this module's `render` and
`phrase`), or `bot.wording.spoken`'s, in the locale the command speaks.
"""

from __future__ import annotations

import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bot.models.finding import Finding, Param, Phrase

DOMAINS = ("cases", "resources", "builds", "review")  # the catalog's data files beside this module, in this order

# Label id -> English label. A label is what a reader sees before the colon; the gate itself is Finding.gate.
LABELS: dict[str, str] = {
    "correctness": "correctness",
    "stability": "stability",
    "performance": "performance",
    "performance_inconclusive": "performance inconclusive",
    "performance_not_judged": "performance not judged",
    "measurement_rejected": "measurement rejected",
    "implausible": "implausible",
    "implausible_speedup": "implausible speedup — verify",
    "resource": "resource",
}


def _read(domain: str) -> dict[str, tuple[str | None, str]]:
    with (Path(__file__).parent / f"{domain}.toml").open("rb") as f:
        table = tomllib.load(f)
    return {key: (entry.get("label"), entry["text"]) for key, entry in table.items()}


# Message id -> (label id or None, English text). Keep the ids stable: translations are keyed by the text.
MESSAGES: dict[str, tuple[str | None, str]] = {key: value for domain in DOMAINS for key, value in _read(domain).items()}

# Parameters whose value is text opgate did not write, shown as written in every locale: an exception's message, a
# compiler's line (a compile error's message), a data sheet's line (`source`, the figures a GPU's peak quotes).
# Every other parameter is a name, a number, a unit or a phrase.
VERBATIM = frozenset({"error", "message", "worker_output", "source"})


class _Args(dict[str, object]):
    """A message's parameters; one the finding lacks stays `{name}` in the text instead of raising."""

    def __missing__(self, name: str) -> str:
        return "{" + name + "}"


@dataclass(frozen=True)
class Wording:
    """Findings and phrases as sentences through one translator (an English msgid -> its translation; the msgid
    where there is none)."""

    gettext: Callable[[str], str]

    def _fill(self, key: str, args: dict[str, object]) -> str:
        """The message's text with its parameters; an id the catalog lacks (a report from another opgate, or a
        forged part) is shown as it is, never formatted."""
        if key not in MESSAGES:
            return key
        try:
            return self.gettext(MESSAGES[key][1]).format_map(_Args(args))
        except (ValueError, IndexError, AttributeError):  # a translation with a broken placeholder: the English text
            return MESSAGES[key][1].format_map(_Args(args))

    def _args(self, params: dict[str, Param], phrases: dict[str, list[Phrase]]) -> dict[str, object]:
        args: dict[str, object] = dict(params)
        args.update({name: "; ".join(self.phrase(p) for p in ps) for name, ps in phrases.items()})
        return args

    def phrase(self, p: Phrase) -> str:
        """One phrase (its own phrases joined by "; ", like a finding's)."""
        return self._fill(p.key, self._args(p.params, p.phrases))

    def label(self, finding: Finding) -> str | None:
        """The finding's label as the reader sees it ("performance inconclusive"); None for a message without one."""
        lab = MESSAGES.get(finding.key, (None, ""))[0]
        return None if lab is None else self.gettext(LABELS[lab])

    def text(self, finding: Finding) -> str:
        """The finding's sentence without its label and case: "p50 +10.53% (95% CI …) > 3% limit"."""
        body = self._fill(finding.key, self._args(finding.params, finding.phrases))
        return body + "".join(self.phrase(t) for t in finding.tail)

    def render(self, finding: Finding, *, case: bool = True) -> str:
        """The finding as one line: `label: case text` (`case: text` without a label); `case=False` on the case."""
        lab, body = self.label(finding), self.text(finding)
        named = f"{finding.case} {body}" if case and finding.case and lab else body
        if lab:
            return f"{lab}: {named}"
        return f"{finding.case}: {body}" if case and finding.case else body


ENGLISH = Wording(str)  # the msgids themselves
render, phrase = ENGLISH.render, ENGLISH.phrase
