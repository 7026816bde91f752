"""CC Switch's pieces as data: provider entries, the store, the live files, and what one copy of a client says."""

from __future__ import annotations

import hashlib
import json
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from bot.lint.locate import KeyPath, json_key_lines, line_of, toml_key_lines
from bot.lint.secrets import is_placeholder
from bot.lint.urls import gateway_root, show_url
from bot.text.safe import one_line

Client = Literal["claude", "codex"]
CLIENTS: tuple[Client, ...] = ("claude", "codex")
CLIENT_NAMES: dict[Client, str] = {"claude": "Claude", "codex": "Codex"}


@dataclass(frozen=True)
class Provider:
    """One provider entry of the store (CC Switch's `Provider`: id, name, settingsConfig, category, meta)."""

    client: Client
    id: str
    name: str
    settings: Any  # settingsConfig as parsed; anything but the shape CC Switch writes is a CCS002 finding
    meta: Mapping[str, Any] = field(default_factory=dict)
    category: str | None = None  # "official" for the vendor's own login
    line: int | None = None  # the line of the entry in config.json; None in the database

    @property
    def entry(self) -> str:
        """The entry as findings name it: `provider <name> (codex)`."""
        return f"provider {one_line(self.name, 80)} ({self.client})"

    @property
    def label(self) -> str:
        """The entry as messages name it: `Codex provider "<name>"`."""
        return f'{CLIENT_NAMES[self.client]} provider "{one_line(self.name, 80)}"'

    @property
    def official(self) -> bool:
        return self.category == "official"

    @property
    def shape_ok(self) -> bool:
        """settingsConfig is what CC Switch writes to the live files: an object; for Codex, auth and config."""
        s = self.settings
        if not isinstance(s, dict):
            return False
        return self.client == "claude" or (isinstance(s.get("auth"), dict) and isinstance(s.get("config"), str))


@dataclass(frozen=True)
class Store:
    """The providers of Claude and Codex and the current one of each, as CC Switch resolves it."""

    path: str
    providers: tuple[Provider, ...]
    current: Mapping[str, str | None]  # client -> provider id
    has_lines: bool = False  # config.json has lines; a database row has none

    def current_provider(self, client: Client) -> Provider | None:
        wanted = self.current.get(client)
        return next((p for p in self.providers if p.client == client and p.id == wanted), None)


@dataclass(frozen=True)
class LiveFile:
    path: str
    text: str | None  # None: the file does not exist


@dataclass(frozen=True)
class Snapshot:
    """The store and the live client files CC Switch writes from it."""

    store: Store
    claude_settings: LiveFile
    codex_config: LiveFile
    codex_auth: LiveFile


def fingerprint(key: str) -> str:
    """How a key is compared and shown: a prefix of its sha256, never the key."""
    return "sha256:" + hashlib.sha256(key.strip().encode()).hexdigest()[:12]


def host_of(url: str | None) -> str | None:
    """The host (and port) a base URL sends its key to, or None."""
    root = gateway_root(url) if url else None
    return root.split("/")[2] if root else None


def real_key(value: Any) -> str | None:
    """A key value, or None for a missing value or a placeholder."""
    return value.strip() if isinstance(value, str) and not is_placeholder(value) else None


@dataclass(frozen=True)
class Value:
    """One setting of one copy: its value, its name in messages, and its line in a live file."""

    text: str | None
    label: str
    line: int = 1

    @property
    def shown(self) -> str:
        if self.text is None:
            return "unset"
        return repr(show_url(self.text)) if "://" in self.text else repr(one_line(self.text, 80))


_NONE = Value(None, "")


@dataclass(frozen=True)
class ClientView:
    """What one copy (a stored provider or the live files) makes a client use."""

    base_url: Value = _NONE
    model: Value = _NONE
    key: Value = _NONE  # Claude: the env token; Codex: auth.json's OPENAI_API_KEY
    provider_id: Value = _NONE  # Codex: model_provider
    env_key: Value = _NONE  # Codex: the active provider's env_key
    bearer: Value = _NONE  # Codex: experimental_bearer_token (the active table's, else the top-level one)
    parsed: bool = True  # False: the copy could not be read (its own rules say why)


def claude_view(settings: Any, lines: Mapping[KeyPath, int] | None = None, key_field: Any = None) -> ClientView:
    """Claude's copy: env.ANTHROPIC_BASE_URL, the token (meta.apiKeyField's, else AUTH_TOKEN), ANTHROPIC_MODEL."""
    env = settings.get("env") if isinstance(settings, dict) else None
    if not isinstance(env, dict):
        return ClientView(parsed=isinstance(settings, dict))
    lines = lines or {}

    def value(name: str) -> Value:
        raw = env.get(name)
        text = raw if isinstance(raw, str) and raw.strip() else None
        return Value(text, f"env.{name}", line_of(lines, ("env", name)))

    order = ["ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_API_KEY"]
    if key_field == "ANTHROPIC_API_KEY":
        order.reverse()
    token = next((n for n in order if real_key(env.get(n))), order[0])
    key = Value(real_key(env.get(token)), f"env.{token}", line_of(lines, ("env", token)))
    return ClientView(base_url=value("ANTHROPIC_BASE_URL"), model=value("ANTHROPIC_MODEL"), key=key)


def codex_view(config_text: str | None, auth: Any, auth_lines: Mapping[KeyPath, int] | None = None) -> ClientView:
    """Codex's copy: config.toml's active provider (id, base_url, env_key, bearer), model, and auth.json's key."""
    auth_key = Value(
        real_key(auth.get("OPENAI_API_KEY")) if isinstance(auth, dict) else None,
        "auth.json OPENAI_API_KEY",
        line_of(auth_lines or {}, ("OPENAI_API_KEY",)),
    )
    if config_text is None:
        return ClientView(key=auth_key)
    try:
        data = tomllib.loads(config_text)
    except tomllib.TOMLDecodeError:
        return ClientView(key=auth_key, parsed=False)
    lines = toml_key_lines(config_text)
    active = data.get("model_provider")
    active = active if isinstance(active, str) and active else None
    tables = data.get("model_providers")
    table = tables.get(active) if isinstance(tables, dict) and active else None
    table = table if isinstance(table, dict) else {}
    base = ("model_providers", active or "")

    def value(where: KeyPath, raw: Any, label: str) -> Value:
        return Value(raw if isinstance(raw, str) and raw.strip() else None, label, line_of(lines, where))

    # CC Switch writes the bearer into the active table, or at the top level for Codex's reserved ids.
    where: KeyPath = (*base, "experimental_bearer_token")
    raw = table.get("experimental_bearer_token")
    if "experimental_bearer_token" not in table:
        where, raw = ("experimental_bearer_token",), data.get("experimental_bearer_token")
    bearer = Value(real_key(raw), ".".join(map(str, where)), line_of(lines, where))
    return ClientView(
        base_url=value((*base, "base_url"), table.get("base_url"), f"model_providers.{active}.base_url"),
        model=value(("model",), data.get("model"), "model"),
        key=auth_key,
        provider_id=value(("model_provider",), active, "model_provider"),
        env_key=value((*base, "env_key"), table.get("env_key"), f"model_providers.{active}.env_key"),
        bearer=bearer,
    )


def provider_view(p: Provider) -> ClientView:
    """The view of a stored provider (an entry of the wrong shape reads as unparsed)."""
    if not p.shape_ok:
        return ClientView(parsed=False)
    if p.client == "claude":
        return claude_view(p.settings, key_field=p.meta.get("apiKeyField"))
    return codex_view(p.settings["config"], p.settings["auth"])


def json_object(text: str | None) -> tuple[dict[str, Any], Mapping[KeyPath, int]] | None:
    """A live JSON file as an object and its key lines, or None (missing, not JSON, not an object)."""
    if text is None:
        return None
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        return None
    return (data, json_key_lines(text)) if isinstance(data, dict) else None
