"""`.env` files (`.env`, `.env.example`, ...): placeholders only, bare base URLs."""

from __future__ import annotations

import re

from bot.lint.collect import Collector, Facts, UrlUse
from bot.lint.findings import LintFinding
from bot.lint.secrets import find_keys, is_placeholder, mask, secret_verdict
from bot.lint.urls import UrlFlavor, check_url, gateway_root

_ENV_LINE = re.compile(r"^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_.]*)\s*=\s?(.*)$")
_ENV_URL_FLAVORS: dict[str, UrlFlavor] = {
    "ANTHROPIC_BASE_URL": "anthropic",
    "TAOTOKEN_BASE_URL": "gateway",
    "OPENAI_BASE_URL": "openai",
}


def _env_value(raw: str) -> str:
    raw = raw.strip()
    if raw[:1] in ("'", '"'):
        end = raw.find(raw[0], 1)
        return raw[1:end] if end > 0 else raw[1:]
    return re.split(r"\s+#", raw, maxsplit=1)[0].strip()


def check_env(path: str, text: str) -> tuple[list[LintFinding], Facts]:
    """The findings of an .env file and the base URLs it sets."""
    c = Collector(path)
    seen: dict[str, int] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        stripped = raw.strip()
        if not stripped or stripped.startswith("#"):
            continue
        m = _ENV_LINE.match(raw)
        if not m:
            if keys := find_keys(stripped):
                c.secrets.update(keys)
                c.add(number, "ENV001", f"a bare value that looks like a key ({mask(keys[0])}) sits on its own line")
            else:
                c.add(number, "ENV004", "this line is not a NAME=value assignment")
            continue
        name, value = m.group(1), _env_value(m.group(2))
        if name in seen:
            c.add(number, "ENV003", f"{name} is assigned again (first on line {seen[name]}); the later value wins")
        seen.setdefault(name, number)
        verdict = secret_verdict(name, value)
        keys = [value.strip()] if verdict == "key" else find_keys(value)
        if keys:
            c.secrets.update(keys)
            c.add(
                number,
                "ENV001",
                f"{name} holds what looks like a real key ({mask(keys[0])}); .env files hold placeholders only, "
                "the key belongs in the environment or a CI secret",
            )
            continue
        if verdict == "suspicious":
            c.add(
                number,
                "ENV002",
                f"{name} holds a value that is not an obvious placeholder (use YOUR_… or leave it empty)",
            )
            continue
        if name.endswith("_BASE_URL") and value and not is_placeholder(value):
            c.findings += check_url(path, number, name, value, _ENV_URL_FLAVORS.get(name, "generic"))
            if gateway_root(value):
                c.facts.urls.append(UrlUse(path, number, name, value))
    return c.done()


def lint_env(path: str, text: str) -> list[LintFinding]:
    return check_env(path, text)[0]
