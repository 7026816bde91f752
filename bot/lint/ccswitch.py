"""CC Switch: lint its provider entries, the live auth.json, and the sync of the live files and keys."""

# What CC Switch (farion1231/cc-switch, v3.x) keeps, as read from its source: providers per client with
# `settingsConfig` (Claude: the whole ~/.claude/settings.json; Codex: `auth` = the whole auth.json and
# `config` = the whole config.toml as a string), keys in plain text; a switch overwrites the live files
# with the current provider's copy. Each stored copy is linted by the rules of its kind; `ccsync` then
# compares the live files and keys with the store. Keys are only ever compared by fingerprint.

from __future__ import annotations

import json
import re
from collections.abc import Mapping

from bot.lint.ccmodel import Provider, Snapshot, Store, host_of, provider_view
from bot.lint.ccsync import lint_sync
from bot.lint.claude import check_claude
from bot.lint.codex import check_codex
from bot.lint.findings import LintFinding, make_finding, scrub
from bot.lint.locate import strings
from bot.lint.output import ordered
from bot.lint.secrets import find_keys, is_domain_key, is_secret_name
from bot.lint.urls import gateway_root

DEFAULT_GATEWAY = "https://taotoken.net/api"  # the users' gateway; TAOTOKEN_BASE_URL overrides it
_ANTHROPIC = re.compile(r"ANTHROPIC_[A-Z0-9_]*")


def is_gateway_provider(name: str, base_url: str, gateway: str) -> bool:
    """A TaoToken provider: named so, or pointing at the gateway's host or at any taotoken host."""
    host = host_of(base_url)
    named = "taotoken" in re.sub(r"[\s_.-]", "", name.lower())
    return named or (host is not None and (host == host_of(gateway) or "taotoken" in host))


def _stored_copy(store: Store, p: Provider) -> list[LintFinding]:
    """The rules of the copy's kind, moved to the entry (the copy of config.toml keeps its own lines)."""
    if p.client == "claude":
        found, _ = check_claude("settings.json", json.dumps(p.settings, indent=2, ensure_ascii=False), managed=True)
        return [f.model_copy(update={"path": store.path, "line": p.line, "entry": p.entry}) for f in found]
    found, _ = check_codex("config.toml", p.settings["config"], managed=True)
    return [
        f.model_copy(update={"path": store.path, "line": p.line, "entry": f"{p.entry} config.toml:{f.line}"})
        for f in found
    ]


def lint_entries(store: Store, gateway: str) -> list[LintFinding]:
    """Each provider entry: its shape, its base URL against the gateway, and the rules of its stored copy."""
    out: list[LintFinding] = []

    def add(p: Provider, rule: str, message: str) -> None:
        out.append(make_finding(store.path, p.line, rule, message, entry=p.entry))

    for p in store.providers:
        if not p.shape_ok:
            need = "an object" if p.client == "claude" else "an object with auth (an object) and config (a string)"
            add(p, "CCS002", f"settingsConfig is not {need}; CC Switch cannot write this provider's files")
            continue
        if p.official:
            continue  # the vendor's own login: nothing of the gateway's to check
        out += _stored_copy(store, p)
        base_url = provider_view(p).base_url
        want = gateway_root(gateway)
        if base_url.text and is_gateway_provider(p.name, base_url.text, gateway):
            root = gateway_root(base_url.text)
            if root and want and root != want:
                add(
                    p,
                    "CCS003",
                    f"{base_url.label} {base_url.shown} is not on the gateway {want}; a TaoToken provider "
                    "points at the gateway, never at an old environment",
                )
        if p.client == "codex":
            rest = {k: v for k, v in p.settings.items() if k != "config"}  # config: CODEX005 above
            if names := _ANTHROPIC.findall(json.dumps(rest)):  # in a key or a value
                add(p, "CCS004", f"{names[0]} sits in the Codex entry (Claude Code's variable)")
    return out


def lint_live_auth(path: str, text: str | None) -> list[LintFinding]:
    """The live auth.json: a JSON object, without Claude Code's variables."""
    if text is None:
        return []
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        return [make_finding(path, exc.lineno, "CCS002", f"auth.json is not valid JSON: {exc.msg}")]
    if not isinstance(data, dict):
        return [make_finding(path, 1, "CCS002", "auth.json is not a JSON object")]
    return [
        make_finding(path, number, "CCS004", f"{names[0]} sits in Codex's auth.json (Claude Code's variable)")
        for number, raw in enumerate(text.splitlines(), 1)
        if (names := _ANTHROPIC.findall(raw))
    ]


def secrets_of(snapshot: Snapshot, env: Mapping[str, str]) -> set[str]:
    """Every key of the store, the live files and the environment's key variables: masked in any message."""
    found: set[str] = set()
    for p in snapshot.store.providers:
        view = provider_view(p)
        found.update(v.text for v in (view.key, view.bearer) if v.text)
        found.update(k for _, value in strings(p.settings) for k in find_keys(value))
    for live in (snapshot.claude_settings, snapshot.codex_config, snapshot.codex_auth):
        found.update(find_keys(live.text or ""))
    for name, value in env.items():
        secret = is_domain_key(name) or is_secret_name(name)
        found.update([value.strip()] if secret and len(value.strip()) >= 8 else find_keys(value))
    return found


def lint_ccswitch(snapshot: Snapshot, env: Mapping[str, str], gateway: str = DEFAULT_GATEWAY) -> list[LintFinding]:
    """The CC Switch findings: entries, the live auth.json, and the sync of live files and keys with the store.

    The live settings.json and config.toml get their own kind's rules elsewhere (`SourceFile.managed`).
    `env` supplies the task-domain keys and the value of Codex's env_key; none of it is printed.
    """
    findings = lint_entries(snapshot.store, gateway)
    findings += lint_live_auth(snapshot.codex_auth.path, snapshot.codex_auth.text)
    findings += lint_sync(snapshot, env)
    secrets = secrets_of(snapshot, env)
    return ordered(scrub(findings, secrets))
