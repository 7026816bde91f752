"""Base-URL checks: bare http(s) gateway URLs, shown without credentials, compared by their root."""

from __future__ import annotations

import re
from typing import Literal
from urllib.parse import SplitResult, parse_qsl, urlsplit

from bot.agent.client import validate_base_url
from bot.errors import InputError
from bot.lint.findings import LintFinding, Severity, make_finding
from bot.lint.secrets import find_keys, mask

UrlFlavor = Literal["gateway", "anthropic", "openai", "generic"]

_ENDPOINTS = ("/chat/completions", "/completions", "/messages", "/responses", "/embeddings", "/models")
_LOCAL_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})


def _split(url: str) -> tuple[SplitResult, int | None] | None:
    """urlsplit and the port, or None for what urlsplit cannot take (a bad port, a broken IPv6 host)."""
    try:
        parts = urlsplit(url.strip())
        return parts, parts.port
    except ValueError:
        return None


def show_url(url: str) -> str:
    """A URL safe to print: no credentials, query values or key-looking host labels and path segments."""
    split = _split(url)
    if split is None:
        return mask(url)
    parts, port = split
    host = ".".join(mask(label) if find_keys(label) else label for label in (parts.hostname or "").split("."))
    if port:
        host = f"{host}:{port}"
    netloc = f"***@{host}" if parts.username or parts.password else host
    path = "/".join(mask(seg) if find_keys(seg) else seg for seg in parts.path.split("/"))
    shown = f"{parts.scheme}://{netloc}{path}" if parts.scheme else path
    if parts.query:
        names = [name if not find_keys(name) else mask(name) for name, _ in parse_qsl(parts.query, True)]
        shown += "?" + "&".join(f"{n}=…" for n in names) if names else "?…"
    if parts.fragment:
        shown += "#…"
    return shown


def gateway_root(url: str) -> str | None:
    """The URL reduced to what must agree across clients: scheme, host, path (no endpoint, no /v1)."""
    split = _split(url)
    if split is None or split[0].scheme not in ("http", "https") or not split[0].hostname:
        return None
    parts, port = split
    host = split[0].hostname or ""
    path = parts.path.rstrip("/")
    for suffix in _ENDPOINTS:
        if path.endswith(suffix):
            path = path[: -len(suffix)].rstrip("/")
            break
    path = re.sub(r"/v1$", "", path)
    return f"{parts.scheme.lower()}://{host.lower()}{f':{port}' if port else ''}{path}"


def check_url(path: str, line: int, label: str, url: str, flavor: UrlFlavor) -> list[LintFinding]:
    """The URL rules for one base URL, found at `line` of `path` under the name `label`."""
    out: list[LintFinding] = []

    def add(rule: str, message: str, severity: Severity | None = None) -> None:
        out.append(make_finding(path, line, rule, message, severity))

    raw = url.strip()
    shown = show_url(raw)
    split = _split(raw)
    parts = split[0] if split else urlsplit("")
    if split is None or parts.scheme not in ("http", "https") or not parts.hostname or any(c.isspace() for c in raw):
        add("URL002", f"{label} {shown!r} is not an http(s) URL with a host")
        return out
    if parts.username or parts.password:
        add("URL003", f"{label} {shown!r} carries credentials; the key belongs in an environment variable")
    if parts.query or parts.fragment or "utm_" in raw:
        add("URL001", f"{label} {shown!r} carries a query string, fragment or utm_ parameters; use the bare base URL")
    bare = parts.path.rstrip("/")
    endpoint = next((s for s in _ENDPOINTS if bare.endswith(s)), None)
    if endpoint:
        add("URL004", f"{label} {shown!r} ends with the endpoint path {endpoint}; the client appends it itself")
    elif flavor in ("gateway", "anthropic") and bare.endswith("/v1"):
        appended = "/v1/chat/completions" if flavor == "gateway" else "/v1/messages"
        add("URL005", f"{label} {shown!r} ends with /v1, but the client appends {appended}; drop the /v1")
    elif flavor == "openai" and not re.search(r"/v\d+$", bare):
        add(
            "URL006",
            f"{label} {shown!r} has no /v1: Codex will request {show_url(f'{parts.scheme}://{parts.netloc}{bare}')}"
            f"/responses, which works only if the gateway serves {bare}/responses "
            f"(with {bare}/v1 it requests {bare}/v1/responses)",
        )
    if parts.scheme == "http" and parts.hostname not in _LOCAL_HOSTS:
        add("URL007", f"{label} {shown!r} uses plain http; keys would cross the network unencrypted")
    if not any(f.rule in ("URL001", "URL002", "URL003") for f in out):
        try:
            validate_base_url(raw)
        except InputError:  # the client's own check is the last word
            add("URL002", f"{label} {shown!r} is refused by the gateway client")
    return out
