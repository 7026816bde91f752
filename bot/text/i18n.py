"""The message catalogs: English (the source language) and Simplified Chinese, read from templates/locale with Babel.

Every word a person reads in a comment, reply or issue is a message id here (English, with named `%(name)s`
parameters); `templates/locale/zh_CN/LC_MESSAGES/opgate.po` holds its Chinese. The catalog is read with
`babel.messages.pofile` and compiled in memory (nothing to build, the .po is what ships); which locale speaks is
chosen once, in `bot/cli.py` (`speaking`), from `locale` in `[tool.opgate]` or `OPGATE_LOCALE`.
"""

from __future__ import annotations

import gettext as _gettext
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
SOURCE_LOCALE = "en"  # the message ids themselves: no catalog to read

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


def current() -> str:
    return _speaking.get()


def translate(locale: str, message: str) -> str:
    """`message` (an English message id) in `locale`, unformatted (bot.verdict.messages fills its `{name}`s)."""
    return translations(locale).gettext(message)


def _(message: str, **params: Any) -> str:
    """`message` in the current locale, its `%(name)s` parameters filled in (plain text: the caller escapes). Like
    Jinja's new-style gettext, a message is always a format string: a literal percent sign is written `%%`."""
    return translations(current()).gettext(message) % params


def ngettext(one: str, many: str, n: int, **params: Any) -> str:
    """The singular or plural of a counted message in the current locale; `%(num)s` is `n`."""
    text = translations(current()).ngettext(one, many, n)
    return text % {"num": n, **params}


def N_(message: str) -> str:
    """Marks a message id kept in data (a constant, a table) for extraction; it is translated where it is shown."""
    return message
