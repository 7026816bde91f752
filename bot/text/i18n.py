"""The message catalogs: English (the source language) and Simplified Chinese, read from templates/locale with Babel.

Every word a person reads in a comment, reply or issue is a message id here (English, with named `%(name)s`
parameters); `templates/locale/zh_CN/LC_MESSAGES/opgate.po` holds its Chinese. The catalog is read with
`babel.messages.pofile` and compiled in memory (nothing to build, the .po is what ships); which locale speaks is
chosen once, in `bot/cli.py` (`speaking`), from `locale` in `[tool.opgate]` or `OPGATE_LOCALE`, and read here alone
(`catalog`): every word people read, the findings' (`bot.wording.spoken`) too, is looked up through it.
"""

from __future__ import annotations

import gettext as _gettext
import re
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from functools import cache
from io import BytesIO
from pathlib import Path
from typing import Any

from babel.messages.mofile import write_mo
from babel.messages.pofile import read_po
from babel.support import Translations

from bot.errors import InputError
from bot.templates import TEMPLATES

CATALOGS = TEMPLATES / "locale"
DOMAIN = "opgate"
LOCALES = ("en", "zh-CN")  # what comments, replies and issues can be written in
SOURCE_LOCALE = "en"
LANGUAGES = {
    "en": "English",
    "zh-CN": "Simplified Chinese (简体中文)",
}  # what the CI summary is asked to write in  # the message ids themselves: no catalog to read

_speaking: ContextVar[str] = ContextVar("opgate_locale", default=SOURCE_LOCALE)


def folder(locale: str) -> str:
    """A locale as gettext names its folder: zh-CN -> zh_CN."""
    return locale.replace("-", "_")


def catalog_path(locale: str) -> Path:
    return CATALOGS / folder(locale) / "LC_MESSAGES" / f"{DOMAIN}.po"


def check_locale(locale: str) -> str:
    if locale not in LOCALES:
        raise InputError(f"locale {locale!r} is not one opgate speaks: choose one of {', '.join(LOCALES)}")
    return locale


@cache
def translations(locale: str) -> _gettext.NullTranslations:
    """The locale's catalog (fuzzy entries left out: a message not yet translated is shown in English)."""
    if check_locale(locale) == SOURCE_LOCALE:
        return _gettext.NullTranslations()
    with catalog_path(locale).open("rb") as po:
        catalog = read_po(po, locale=folder(locale), domain=DOMAIN)
    mo = BytesIO()
    write_mo(mo, catalog, use_fuzzy=False)
    mo.seek(0)
    return Translations(mo, domain=DOMAIN)


@contextmanager
def speaking(locale: str) -> Iterator[None]:
    """Render in `locale` inside this block (the CLI enters it once, after reading the settings)."""
    token = _speaking.set(check_locale(locale))
    try:
        yield
    finally:
        _speaking.reset(token)


def catalog() -> _gettext.NullTranslations:
    """The catalog of the locale the command speaks: the one place the locale is read."""
    return translations(_speaking.get())


def translated(message: str) -> str:
    """`message` (an English message id) in the current locale, unformatted (bot.wording fills its `{name}`s)."""
    return catalog().gettext(message)


def gettext(message: str, **params: Any) -> str:
    """`message` in the current locale, its `%(name)s` parameters filled in (plain text: the caller escapes). Like
    Jinja's new-style gettext, a message is always a format string: a literal percent sign is written `%%`."""
    return catalog().gettext(message) % params


def ngettext(one: str, many: str, n: int, **params: Any) -> str:
    """The singular or plural of a counted message in the current locale; `%(num)s` is `n`."""
    text = catalog().ngettext(one, many, n)
    return text % {"num": n, **params}


def N_(message: str) -> str:
    """Marks a message id kept in data (a constant, a table) for extraction; it is translated where it is shown."""
    return message


# -- is it written in the locale? (the zh-CN comment's test, the CI summary's reply check) ------------------------

_CODE = re.compile(r"`[^`\n]*`|```.*?```", re.DOTALL)
_URL = re.compile(r"\b[a-z]+://\S+")
# An identifier, a number or a unit is the same in every language: a name with _ . / : # - + < > or a digit in
# it, an option (--override), a slash command, an acronym (GPU, NaN, CI) and a unit (ms, µs, MiB, MHz, B).
_IDENTIFIER = re.compile(r"(?:--|/|@)?[A-Za-z0-9]*(?:[_./:#+<>\d][A-Za-z0-9_./:#+<>-]*)|\b[A-Z][A-Za-z]*[A-Z]\w*\b")
_UNITS = frozenset({"ms", "µs", "us", "s", "B", "KiB", "MiB", "GiB", "MHz", "x"})
_WORD = re.compile(r"[A-Za-z]+")
RUN = 3  # this many English words in a row are a sentence (or part of one), not a name


def english_runs(text: str, names: frozenset[str] = frozenset(), words: int = RUN) -> list[str]:
    """Runs of at least `words` English words in `text` that are not code, a URL, an identifier, a number, a unit
    or one of `names` (kernel and case names): what a zh-CN text must not hold. Words run on across spaces only."""
    text = _URL.sub(" | ", _CODE.sub(" | ", text))
    for name in sorted(names, key=len, reverse=True):
        text = text.replace(name, " | ")
    runs, run = [], []
    for token in re.split(r"(\s+)", text):
        if token.isspace() or not token:
            continue
        if _WORD.fullmatch(token) and token not in _UNITS and not _IDENTIFIER.fullmatch(token):
            run.append(token)
            continue
        lead = _WORD.match(token)  # "limit;" ends a run after its word; "(see" starts none
        if lead and lead.group(0) not in _UNITS and not _IDENTIFIER.fullmatch(token):
            run.append(lead.group(0))
        if len(run) >= words:
            runs.append(" ".join(run))
        run = []
    if len(run) >= words:
        runs.append(" ".join(run))
    return runs


def is_chinese(text: str, names: frozenset[str] = frozenset()) -> bool:
    """Written in Chinese: Han characters, and no English sentence outside code, identifiers, numbers and units."""
    return bool(_HAN.search(text)) and not english_runs(text, names)


_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]")
