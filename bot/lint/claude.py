"""Claude Code settings: the provider only as `ANTHROPIC_*` entries of env, one token variable, no literal key."""

from __future__ import annotations

import re
from pathlib import Path

from bot.lint.collect import Collector, Facts, KeyUse, UrlUse, parse_json_object
from bot.lint.findings import LintFinding
from bot.lint.locate import label_of, line_of, strings
from bot.lint.secrets import find_keys, mask, secret_verdict
from bot.lint.urls import check_url, gateway_root

CLAUDE_TOKEN_VARS = ("ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_API_KEY")

_CLAUDE_TOP_PROVIDER = frozenset(
    {"apikey", "api_key", "baseurl", "base_url", "authtoken", "auth_token", "model_provider", "model_providers"}
)
_CLAUDE_FOREIGN = re.compile(r"(?:TAOTOKEN_|OPENAI_|CODEX_|AZURE_OPENAI_)")


def check_claude(path: str, text: str, managed: bool = False) -> tuple[list[LintFinding], Facts]:
    """The findings of a Claude Code settings file, its base URL and its token variables.

    `managed`: the file is written by CC Switch, which keeps the token in env by design; the token is
    then not a finding here (the CC Switch rules compare it with the store by fingerprint).
    """
    c = Collector(path)
    personal = Path(path).name == "settings.local.json"
    where_file = "the personal settings.local.json (keep it out of git)" if personal else "a committed settings file"
    where_file = "a settings file CC Switch writes" if managed else where_file
    parsed = parse_json_object(c, "CLAUDE001", text, "the Claude settings file")
    if parsed is None:
        return c.done()
    data, lines = parsed

    for key in data:
        if key.upper().startswith("ANTHROPIC_") or key.lower() in _CLAUDE_TOP_PROVIDER:
            c.add(
                line_of(lines, (key,)),
                "CLAUDE002",
                f"{key} is a provider setting outside env; Claude Code takes the provider only from "
                "env.ANTHROPIC_BASE_URL / env.ANTHROPIC_AUTH_TOKEN / env.ANTHROPIC_MODEL",
            )

    env = data.get("env", {})
    if not isinstance(env, dict):
        c.add(line_of(lines, ("env",)), "CLAUDE001", "env must be an object of NAME: value strings")
        env = {}

    for name, value in env.items():
        line = line_of(lines, ("env", name))
        if _CLAUDE_FOREIGN.match(name):
            c.add(
                line,
                "CLAUDE005",
                f"env.{name} is a Codex/OpenAI/task-domain variable; Claude Code reads ANTHROPIC_* only, "
                "and Codex keeps its key in its own variable",
            )
        if not isinstance(value, str):
            continue
        keys = [value.strip()] if secret_verdict(name, value) == "key" else find_keys(value)
        if keys:
            c.secrets.update(keys)
        if keys and not (managed and name in CLAUDE_TOKEN_VARS):
            c.add(
                line,
                "CLAUDE004",
                f"env.{name} holds a literal key ({mask(keys[0])}) in {where_file}; export it in the shell or "
                "a CI secret instead",
                "warning" if personal else "error",
            )
        if name == "ANTHROPIC_BASE_URL":
            c.findings += check_url(path, line, "env.ANTHROPIC_BASE_URL", value, "anthropic")
            if gateway_root(value):
                c.facts.urls.append(UrlUse(path, line, "env.ANTHROPIC_BASE_URL", value))

    if all(v in env for v in CLAUDE_TOKEN_VARS):
        c.add(
            line_of(lines, ("env", "ANTHROPIC_API_KEY")),
            "CLAUDE003",
            "env sets both ANTHROPIC_AUTH_TOKEN and ANTHROPIC_API_KEY; a gateway takes ANTHROPIC_AUTH_TOKEN only, "
            "drop ANTHROPIC_API_KEY",
        )
    tokens = [v for v in CLAUDE_TOKEN_VARS if v in env]
    if tokens and "ANTHROPIC_BASE_URL" not in env:
        c.add(
            line_of(lines, ("env", tokens[0])),
            "CLAUDE006",
            f"env sets {tokens[0]} but no ANTHROPIC_BASE_URL; switch base URL and token together, "
            "or the token goes to the default Anthropic API",
        )
    for token in tokens:
        c.facts.keys.append(KeyUse(path, line_of(lines, ("env", token)), f"env.{token}", token, "Claude Code"))

    for where, value in strings(data):
        if where[:1] == ("env",) and len(where) == 2:
            continue  # judged above
        if keys := find_keys(value):
            c.secrets.update(keys)
            c.add(
                line_of(lines, where),
                "CLAUDE004",
                f"{label_of(where)} holds what looks like a key ({mask(keys[0])}) in {where_file}",
                "warning" if personal else "error",
            )
    return c.done()


def lint_claude(path: str, text: str) -> list[LintFinding]:
    return check_claude(path, text)[0]
