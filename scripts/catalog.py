"""Extract every message id from templates/ and bot/ (Babel), write templates/locale/opgate.pot, update each .po.

    .venv/bin/python scripts/catalog.py          # refresh opgate.pot and merge it into every locale's .po
    .venv/bin/python scripts/catalog.py --check  # exit 1 when a catalog is out of date (tests/test_i18n.py)

A new or changed message arrives in a .po untranslated (and fuzzy where Babel guessed it from an old one):
translate it, drop the `fuzzy` flag, run --check. tests/test_i18n.py fails while any message is untranslated.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from io import BytesIO
from pathlib import Path

from babel.messages.catalog import Catalog
from babel.messages.extract import extract
from babel.messages.pofile import read_po, write_po

ROOT = Path(__file__).resolve().parent.parent
TEMPLATES = ROOT / "templates"
LOCALE = TEMPLATES / "locale"
POT = LOCALE / "opgate.pot"
# The templates people read (the agent's prompts, the dashboard and `opgate init`'s drafts are not translated).
TRANSLATED = ("*.md.j2", "comment/*.md.j2")
SKIPPED = ("prompts", "dashboard", "init")
KEYWORDS = {"_": None, "gettext": None, "ngettext": (1, 2), "N_": None}
# As bot/present/render.py reads the templates: new-style gettext, `{% trans %}` whitespace collapsed.
# Fixed, so that a catalog changes only when its messages do.
DATE = datetime(2026, 12, 1, tzinfo=UTC)
HEADER = "# opgate's messages: English message ids (templates/, bot/), extracted by scripts/catalog.py."
JINJA = {"trimmed": "true", "newstyle_gettext": "true", "trim_blocks": "true", "lstrip_blocks": "true"}


def _sources() -> Iterator[tuple[Path, str]]:
    for pattern in TRANSLATED:
        for path in sorted(TEMPLATES.glob(pattern)):
            if path.relative_to(TEMPLATES).parts[0] not in SKIPPED:
                yield path, "jinja2.ext:babel_extract"
    for path in sorted((ROOT / "bot").rglob("*.py")):
        yield path, "python"


def findings() -> list[str]:
    """The findings' messages (bot/wording/messages.py: labels and texts with `{name}` parameters, str.format)."""
    sys.path.insert(0, str(ROOT))
    from bot.wording.messages import LABELS, MESSAGES

    return [*LABELS.values(), *(text for _label, text in MESSAGES.values())]


def extracted() -> Catalog:
    """Every message id the templates and bot/ use, with where each is used."""
    catalog = Catalog(
        project="opgate", domain="opgate", charset="utf-8", creation_date=DATE, revision_date=DATE, fuzzy=False
    )
    catalog.header_comment = HEADER
    for path, method in _sources():
        options = JINJA if method != "python" else {}
        with path.open("rb") as f:
            for line, message, comments, context in extract(method, f, KEYWORDS, options=options):
                where = (path.relative_to(ROOT).as_posix(), line)
                catalog.add(message, locations=[where], auto_comments=comments, context=context)
    for message in findings():
        if message != "{text}":  # a line made elsewhere, shown as it was written
            catalog.add(message, locations=[("bot/wording/messages.py", 0)], flags=["python-brace-format"])
    return catalog


def _stable(text: bytes) -> bytes:
    """Without the header line that names Babel's version (the same catalog, whichever Babel wrote it)."""
    return b"".join(line for line in text.splitlines(keepends=True) if not line.startswith(b'"Generated-By:'))


def _people(catalog: Catalog) -> None:
    catalog.version = "1"
    catalog.msgid_bugs_address = catalog.last_translator = "opgate's issues (docs/contributing.md)"
    catalog.language_team = catalog.locale_identifier or "en"


def pot_text(catalog: Catalog) -> bytes:
    out = BytesIO()
    _people(catalog)
    write_po(out, catalog, sort_output=True, no_location=True, width=120)
    return _stable(out.getvalue())


def locales() -> list[Path]:
    return sorted(LOCALE.glob("*/LC_MESSAGES/opgate.po"))


def updated(po: Path, template: Catalog) -> bytes:
    with po.open("rb") as f:
        catalog = read_po(f, locale=po.parent.parent.name, domain="opgate")
    catalog.update(template, no_fuzzy_matching=True)
    catalog.obsolete.clear()
    catalog.revision_date, catalog.fuzzy = DATE, False
    catalog.header_comment = HEADER.replace("English message ids", f"{catalog.locale_identifier} translations")
    _people(catalog)
    out = BytesIO()
    write_po(out, catalog, sort_output=True, no_location=True, width=120, ignore_obsolete=True)
    return _stable(out.getvalue())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when opgate.pot or a .po is out of date")
    args = parser.parse_args(argv)
    template = extracted()
    stale = []
    for path, text in [(POT, pot_text(template)), *((po, updated(po, template)) for po in locales())]:
        if not path.is_file() or path.read_bytes() != text:
            stale.append(path)
            if not args.check:
                path.write_bytes(text)
    for path in stale:
        print(f"{'stale' if args.check else 'updated'}: {path.relative_to(ROOT)}")
    return 1 if stale and args.check else 0


if __name__ == "__main__":
    sys.exit(main())
