"""CC Switch sync: the live client files equal the current provider's copy, and every key has one owner."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from bot.lint.ccmodel import (
    CLIENT_NAMES,
    CLIENTS,
    Client,
    ClientView,
    Provider,
    Snapshot,
    Value,
    claude_view,
    codex_view,
    fingerprint,
    host_of,
    json_object,
    provider_view,
    real_key,
)
from bot.lint.findings import LintFinding, Severity, make_finding
from bot.lint.secrets import is_domain_key

_RESWITCH = (
    "switch to it again in CC Switch (a hand edit of the live file is copied back into a provider on the next switch)"
)


@dataclass(frozen=True)
class KeySite:
    """Where one key sits: a stored provider, a live file, or the environment variable config.toml names."""

    key: str
    client: Client
    label: str  # `Codex provider "X"`, the live file's path, `$TAOTOKEN_CODEX_API_KEY`
    path: str
    line: int | None
    entry: str | None = None
    provider: Provider | None = None
    env_var: str | None = None
    host: str | None = None  # a stored provider's: where its base URL sends the key


def _show(key: str | None) -> str:
    return fingerprint(key) if key else "no key"


def _names(sites: list[KeySite]) -> str:
    labels = list(dict.fromkeys(s.label for s in sites))
    more = f" and {len(labels) - 4} more" if len(labels) > 4 else ""
    return ", ".join(labels[:4]) + more


class _Sync:
    """Collects the findings of one snapshot."""

    def __init__(self, snapshot: Snapshot, env: Mapping[str, str]) -> None:
        self.s = snapshot
        self.env = env
        self.out: list[LintFinding] = []
        self.sites: list[KeySite] = []  # live sites first: findings about a key land on the live file
        self.stored: list[KeySite] = []

    def add(self, path: str, line: int | None, rule: str, message: str, severity: Severity | None = None) -> None:
        self.out.append(make_finding(path, line, rule, message, severity))

    def owners(self, key: str | None) -> list[KeySite]:
        return [s for s in self.stored if key and s.key == key]

    def whose(self, key: str | None) -> str:
        owners = self.owners(key)
        return f"the key of {_names(owners)}" if owners else "a key no CC Switch provider stores"

    def live_site(self, value: Value, client: Client, path: str) -> None:
        if value.text:
            self.sites.append(KeySite(value.text, client, path, path, value.line))

    # --- the live files against the current provider ----------------------------------------------

    def drift(self, path: str, rule: str, cur: Provider, live: Value, stored: Value, severity: Severity) -> None:
        same = (live.text or "").rstrip("/") == (stored.text or "").rstrip("/")
        if not same:
            self.add(
                path,
                live.line,
                rule,
                f"{live.label or stored.label} is {live.shown} but the current {cur.label} has {stored.shown}; "
                + _RESWITCH,
                severity,
            )

    def key_drift(self, path: str, cur: Provider, live: Value, stored: Value) -> None:
        if live.text == stored.text:
            return
        if live.text is None:
            message = f"{live.label} holds no key, but the current {cur.label} has one ({_show(stored.text)})"
        else:
            message = (
                f"{live.label} ({_show(live.text)}) is {self.whose(live.text)}, not the current {cur.label}'s "
                f"({_show(stored.text)})"
            )
        self.add(path, live.line, "CCS007", f"{message}; {_RESWITCH}")

    def claude(self, cur: Provider | None) -> None:
        live_file = self.s.claude_settings
        parsed = json_object(live_file.text)
        live = claude_view(*parsed) if parsed else ClientView(parsed=False)
        self.live_site(live.key, "claude", live_file.path)
        if cur is None or not cur.shape_ok:
            return
        if live_file.text is None:
            self.add(live_file.path, 1, "CCS005", f"does not exist; the current {cur.label} is not applied", "warning")
            return
        if not live.parsed:
            return  # CLAUDE001 says why
        stored = provider_view(cur)
        self.drift(live_file.path, "CCS005", cur, live.base_url, stored.base_url, "error")
        self.drift(live_file.path, "CCS005", cur, live.model, stored.model, "warning")
        self.key_drift(live_file.path, cur, live.key, stored.key)

    def codex(self, cur: Provider | None) -> None:
        config, auth_file = self.s.codex_config, self.s.codex_auth
        auth = json_object(auth_file.text)
        live = codex_view(config.text, auth[0] if auth else None, auth[1] if auth else None)
        self.live_site(live.key, "codex", auth_file.path)
        self.live_site(live.bearer, "codex", config.path)
        env_value = real_key(self.env.get(live.env_key.text or ""))
        if env_value and live.env_key.text:
            var = live.env_key.text
            self.sites.append(KeySite(env_value, "codex", f"${var}", config.path, live.env_key.line, env_var=var))
        if cur is None or not cur.shape_ok:
            return
        stored = provider_view(cur)
        if config.text is None:
            self.add(config.path, 1, "CCS006", f"does not exist; the current {cur.label} is not applied", "warning")
        elif live.parsed and stored.parsed:
            for field in ("provider_id", "base_url", "env_key"):
                self.drift(config.path, "CCS006", cur, getattr(live, field), getattr(stored, field), "error")
            self.drift(config.path, "CCS006", cur, live.model, stored.model, "warning")
        if auth_file.text is not None and not auth:
            return  # CCS002 says why
        self.codex_keys(cur, live, stored, env_value)

    def codex_keys(self, cur: Provider, live: ClientView, stored: ClientView, env_value: str | None) -> None:
        config, auth_file = self.s.codex_config, self.s.codex_auth
        stored_key = stored.key.text or stored.bearer.text
        if live.bearer.text:
            used = Value(live.bearer.text, f"config.toml {live.bearer.label}", live.bearer.line)
            used_path = config.path
        elif env_value:
            used = Value(env_value, f"${live.env_key.text} (config.toml env_key)", live.env_key.line)
            used_path = config.path
        else:
            used, used_path = Value(live.key.text, "OPENAI_API_KEY", live.key.line), auth_file.path
        if stored_key and not used.text and not live.env_key.text:
            what = "does not exist" if auth_file.text is None else "holds no OPENAI_API_KEY"
            self.add(auth_file.path, 1, "CCS007", f"{what}: Codex has no key for the current {cur.label}; {_RESWITCH}")
        elif stored_key and used.text:
            self.key_drift(used_path, cur, used, Value(stored_key, ""))
        leftover = live.key.text
        if leftover and used_path == config.path and leftover != used.text:
            owners = self.owners(leftover)
            if owners and all(s.provider and s.provider.official for s in owners):
                return  # CC Switch kept the official login on purpose (preserveCodexOfficialAuthOnSwitch)
            self.add(
                auth_file.path,
                live.key.line,
                "CCS007",
                f"OPENAI_API_KEY ({_show(leftover)}) is {self.whose(leftover)}, but {used.label} is "
                f"{self.whose(used.text)} ({_show(used.text)}); after a switch both must be the current "
                f"{cur.label}'s key",
            )

    # --- keys across clients and task domains -----------------------------------------------------

    def shared(self) -> None:
        domain = {
            k: var for var in sorted(v for v in self.env if is_domain_key(v)) if (k := real_key(self.env.get(var)))
        }
        groups: dict[str, list[KeySite]] = {}
        for site in self.sites + self.stored:
            groups.setdefault(site.key, []).append(site)
        for key, sites in groups.items():
            clients = {s.client for s in sites}
            if clients == set(CLIENTS):
                first = next(s for s in sites if s.client == "codex")
                self.out.append(
                    make_finding(
                        first.path,
                        first.line,
                        "CCS008",
                        f"one key ({_show(key)}) serves both Claude Code and Codex: {_names(sites)}; "
                        "give each client its own key",
                        entry=first.entry,
                    )
                )
            hosts = {s.host: s for s in reversed(sites) if s.host}  # the first provider of each host
            if len(hosts) > 1:
                first = next(s for s in sites if s.host)
                spread = ", ".join(f"{s.label} ({host})" for host, s in sorted(hosts.items()))
                self.out.append(
                    make_finding(
                        first.path,
                        first.line,
                        "CCS010",
                        f"one key ({_show(key)}) is stored for providers on different hosts: {spread}; "
                        "a key leaked between providers goes to a gateway that did not issue it",
                        entry=first.entry,
                    )
                )
            holders = [s for s in sites if s.env_var != domain.get(key)]
            if key in domain and holders:
                first = holders[0]
                self.out.append(
                    make_finding(
                        first.path,
                        first.line,
                        "CCS009",
                        f"the task-domain key {domain[key]} of the environment ({_show(key)}) is also in "
                        f"{_names(holders)}; Claude Code and Codex need keys of their own",
                        entry=first.entry,
                    )
                )


def lint_sync(snapshot: Snapshot, env: Mapping[str, str]) -> list[LintFinding]:
    """CCS001, CCS005–CCS010: the current providers against the live files, and the owners of each key."""
    sync = _Sync(snapshot, env)
    store = snapshot.store
    for p in store.providers:
        view = provider_view(p)
        for value in (view.key, view.bearer):
            if value.text:
                host = None if p.official else host_of(view.base_url.text)
                sync.stored.append(KeySite(value.text, p.client, p.label, store.path, p.line, p.entry, p, host=host))
    for client in CLIENTS:
        cur = store.current_provider(client)
        if cur is None and any(p.client == client for p in store.providers):
            sync.add(
                store.path,
                1 if store.has_lines else None,
                "CCS001",
                f"CC Switch has no current {CLIENT_NAMES[client]} provider; its live files are not compared",
            )
        if client == "claude":
            sync.claude(cur)
        else:
            sync.codex(cur)
    sync.shared()
    return sync.out
