"""Codex `config.toml`: a provider table with a variable `env_key`, `wire_api = "responses"`, no inline token."""

from __future__ import annotations

import re
import tomllib

from bot.lint.collect import Collector, Facts, KeyUse, UrlUse
from bot.lint.findings import LintFinding
from bot.lint.locate import KeyPath, label_of, line_of, strings, toml_key_lines
from bot.lint.secrets import VAR_NAME, KeyBook, find_keys, is_domain_key, looks_like_key, mask
from bot.lint.urls import check_url, gateway_root

CODEX_KEY = "TAOTOKEN_CODEX_API_KEY"
CODEX_BUILTIN_PROVIDERS = frozenset({"openai", "oss", "ollama", "lmstudio"})

_AUTH_HEADERS = frozenset({"authorization", "proxy-authorization", "api-key", "x-api-key"})
_ANTHROPIC = re.compile(r"ANTHROPIC_[A-Z0-9_]*")


def _strip_toml_comment(line: str) -> str:
    quote = None
    for i, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = None
        elif ch in ("'", '"'):
            quote = ch
        elif ch == "#":
            return line[:i]
    return line


def check_codex(
    path: str, text: str, project_level: bool = False, managed: bool = False, book: KeyBook | None = None
) -> tuple[list[LintFinding], Facts]:
    """The findings of a Codex config, the active provider's base URL and every provider's key variable.

    `managed`: the file is written by CC Switch, whose providers take the key from auth.json
    (`requires_openai_auth`) or an `experimental_bearer_token` it writes; neither is then a finding here.
    """
    c = Collector(path)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        m = re.search(r"line (\d+)", str(exc))
        c.add(int(m.group(1)) if m else 1, "CODEX001", f"config.toml is not valid TOML: {str(exc).split(' (')[0]}")
        return c.done()
    lines = toml_key_lines(text)
    providers = data.get("model_providers", {})
    providers = providers if isinstance(providers, dict) else {}
    env_keys = {pid: p.get("env_key") for pid, p in providers.items() if isinstance(p, dict)}

    active = data.get("model_provider")
    if not isinstance(active, str) or not active:
        c.add(
            line_of(lines, ("model_provider",)),
            "CODEX002",
            "model_provider is not set; Codex falls back to the built-in openai provider"
            + (f" (set model_provider = {next(iter(providers))!r})" if providers else ""),
        )
    elif active not in providers:
        hint = ""
        if VAR_NAME.fullmatch(active) or active in env_keys.values():
            hint = "; it looks like an environment variable — are model_provider and env_key swapped?"
        elif len(providers) == 1:
            hint = f"; did you mean {next(iter(providers))!r}?"
        if active in CODEX_BUILTIN_PROVIDERS:
            c.add(
                line_of(lines, ("model_provider",)),
                "CODEX002",
                f"model_provider {active!r} is a built-in provider, not the gateway",
                "warning",
            )
        else:
            c.add(
                line_of(lines, ("model_provider",)),
                "CODEX002",
                f"model_provider {active!r} names no [model_providers.{active}] table{hint}",
            )

    checked: set[KeyPath] = set()
    if managed and "experimental_bearer_token" in data:
        checked.add(("experimental_bearer_token",))
        if isinstance(data["experimental_bearer_token"], str):
            c.secrets.add(data["experimental_bearer_token"].strip())
    for pid, provider in providers.items():
        if not isinstance(provider, dict):
            continue
        base = ("model_providers", pid)
        here = line_of(lines, base)
        base_url = provider.get("base_url")
        if not isinstance(base_url, str) or not base_url:
            c.add(here, "CODEX009", f"model_providers.{pid}.base_url is not set")
        else:
            line = line_of(lines, (*base, "base_url"))
            c.findings += check_url(path, line, f"model_providers.{pid}.base_url", base_url, "openai")
            if pid == active and gateway_root(base_url):
                c.facts.urls.append(UrlUse(path, line, f"model_providers.{pid}.base_url", base_url))
        if provider.get("query_params"):
            c.add(
                line_of(lines, (*base, "query_params")),
                "URL001",
                f"model_providers.{pid}.query_params adds a query string to every request; the gateway takes none",
            )

        env_key = provider.get("env_key")
        label = f"model_providers.{pid}.env_key"
        line = line_of(lines, (*base, "env_key"))
        checked.add((*base, "env_key"))
        keyed_elsewhere = provider.get("requires_openai_auth") is True or "experimental_bearer_token" in provider
        if env_key is None and managed and keyed_elsewhere:
            pass  # CC Switch: the key is in auth.json or the bearer token it writes
        elif not isinstance(env_key, str) or not env_key:
            c.add(here, "CODEX003", f"{label} is not set; name the key variable, e.g. env_key = {CODEX_KEY!r}")
        elif looks_like_key(env_key) or not VAR_NAME.fullmatch(env_key):
            if looks_like_key(env_key):
                c.secrets.add(env_key.strip())
            hint = (
                " — it looks like a provider id: are model_provider and env_key swapped?"
                if env_key in providers or env_key == active
                else ""
            )
            c.add(
                line,
                "CODEX003",
                f"{label} holds {mask(env_key)!r}, not an environment variable name; "
                f"name the variable ({CODEX_KEY}), never the key{hint}",
            )
        elif env_key.startswith("ANTHROPIC_"):
            c.add(line, "CODEX004", f"{label} is {env_key}, Claude Code's variable; Codex uses {CODEX_KEY}")
        else:
            c.facts.keys.append(KeyUse(path, line, label, env_key, "Codex"))
            if is_domain_key(env_key, book):
                c.add(line, "CODEX010", f"{label} is the task-domain variable {env_key}; Codex uses {CODEX_KEY}")

        wire = provider.get("wire_api")
        if wire is None:
            c.add(here, "CODEX006", f'model_providers.{pid}.wire_api is not set; set wire_api = "responses"', "warning")
        elif wire != "responses":
            c.add(
                line_of(lines, (*base, "wire_api")),
                "CODEX006",
                f'model_providers.{pid}.wire_api is {str(wire)!r}; current Codex accepts only "responses"',
            )

        if "experimental_bearer_token" in provider:
            token_at: KeyPath = (*base, "experimental_bearer_token")
            checked.add(token_at)
            token = provider["experimental_bearer_token"]
            if isinstance(token, str) and token:
                c.secrets.add(token.strip())
            if not managed:
                c.add(
                    line_of(lines, token_at),
                    "CODEX007",
                    f"model_providers.{pid}.experimental_bearer_token puts a token in the file; "
                    f"use env_key = {CODEX_KEY!r}",
                )
        headers = provider.get("http_headers")
        if isinstance(headers, dict):
            for header, value in headers.items():
                if header.lower() in _AUTH_HEADERS:
                    header_at: KeyPath = (*base, "http_headers", header)
                    checked.add(header_at)
                    if isinstance(value, str):
                        c.secrets.update(find_keys(value) or ([value.strip()] if value.strip() else []))
                    c.add(
                        line_of(lines, header_at),
                        "CODEX007",
                        f"model_providers.{pid}.http_headers.{header} is an inline credential; use env_key",
                    )

    for where, value in strings(data):
        if where in checked:
            continue
        if keys := find_keys(value):
            c.secrets.update(keys)
            c.add(line_of(lines, where), "CODEX007", f"{label_of(where)} holds what looks like a key ({mask(keys[0])})")

    if "profiles" in data:
        c.add(
            line_of(lines, ("profiles",)),
            "CODEX008",
            "[profiles.*] tables are legacy; keep one provider per config file",
        )
    if "profile" in data:
        c.add(line_of(lines, ("profile",)), "CODEX008", "profile is a legacy key; remove it")

    if project_level and ("model_provider" in data or "model_providers" in data):
        key = "model_provider" if "model_provider" in data else "model_providers"
        c.add(
            line_of(lines, (key,)),
            "CODEX011",
            f"{key} in a project .codex/config.toml is ignored by Codex; put it in ~/.codex/config.toml",
        )

    flagged = {f.line for f in c.findings if f.rule == "CODEX004"}
    for number, raw in enumerate(text.splitlines(), 1):
        names = _ANTHROPIC.findall(_strip_toml_comment(raw))
        if names and number not in flagged:
            c.add(number, "CODEX005", f"{names[0]} has no place in the Codex config (Claude Code's variable)")
    return c.done()


def lint_codex(path: str, text: str, project_level: bool = False) -> list[LintFinding]:
    return check_codex(path, text, project_level)[0]
