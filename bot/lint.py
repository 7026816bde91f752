"""`opgate lint`: static checks of the files that point agents at the LLM gateway.

Four kinds of file are checked, each by a pure function over its text:

* `.env` files (`.env`, `.env.example`, ...): placeholders only, bare base URLs;
* agent task files (`agent_task.json`, `*task*.json` shaped like one): the `AgentTask` schema,
  a bare `provider.base_url`, `provider.api_key_env` naming the domain's variable, the three denials;
* Claude Code settings (`settings.json`, `settings.local.json`): provider settings only as
  `ANTHROPIC_*` entries of `env`, one token variable, no literal key, no Codex variables;
* Codex `config.toml`: `model_provider` naming a `[model_providers.X]` table whose `env_key`
  names a variable, `wire_api = "responses"`, no inline token, no `ANTHROPIC_*`, no `[profiles.*]`.

Then the files are compared (the pieces a provider switch must keep in step): one gateway base URL
everywhere, and one key variable per task domain and per client.

Every finding carries the real line of the offending key (1 when unknown) and never the secret
itself: a value that looks like a key is shown as its first three characters and `…`.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import math
import os
import re
import tomllib
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from json.decoder import scanstring as _scanstring  # type: ignore[attr-defined]
from pathlib import Path
from typing import Any, Literal
from urllib.parse import SplitResult, parse_qsl, urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from bot.agent.client import validate_base_url
from bot.errors import InputError
from bot.manifest import REQUIRED_DENY, AgentTask, Domain
from bot.settings import KEY_VARIABLES

Severity = Literal["error", "warning", "info"]
Kind = Literal["env", "task", "claude", "codex"]
SEVERITIES: tuple[Severity, ...] = ("error", "warning", "info")


class Finding(BaseModel):
    """One problem in one file, at the line of the offending key."""

    model_config = ConfigDict(frozen=True)

    path: str
    line: int = Field(ge=1)
    rule: str
    message: str
    severity: Severity


@dataclass(frozen=True)
class Rule:
    severity: Severity  # the usual severity; a few rules lower it in a personal file or an unset case
    summary: str


# The rule table (stable ids; the README's table is `rules_markdown()`).
RULES: dict[str, Rule] = {
    "LINT001": Rule("error", "a path given to lint cannot be read (missing, unreadable, not UTF-8)"),
    "LINT002": Rule("warning", "a file given by name is not a kind lint knows (.env, task JSON, Claude, Codex)"),
    "URL001": Rule("error", "a base URL carries a query string, fragment or tracking (utm_) parameters"),
    "URL002": Rule("error", "a base URL is not an http(s) URL with a host"),
    "URL003": Rule("error", "a base URL carries credentials (user:password@)"),
    "URL004": Rule("error", "a base URL ends with an endpoint path (/chat/completions, /messages, /responses)"),
    "URL005": Rule("error", "a gateway or Anthropic base URL ends with /v1, which the client appends itself"),
    "URL006": Rule("warning", "a Codex/OpenAI-style base URL lacks /v1 (Codex appends only /responses)"),
    "URL007": Rule("warning", "a base URL uses plain http to a host other than localhost"),
    "ENV001": Rule("error", "an .env value looks like a real key; .env files hold placeholders only"),
    "ENV002": Rule("warning", "a secret variable holds a value that is neither empty nor an obvious placeholder"),
    "ENV003": Rule("warning", "an .env variable is assigned more than once (the later value wins)"),
    "ENV004": Rule("warning", "an .env line is not a NAME=value assignment"),
    "TASK001": Rule("error", "a task file is not valid JSON or does not match the AgentTask schema"),
    "TASK002": Rule("error", "provider.api_key_env is not an environment variable name (or holds a key)"),
    "TASK003": Rule("warning", "provider.api_key_env is not one of the known per-domain key variables"),
    "TASK004": Rule("warning", "provider.api_key_env is the key variable of another domain"),
    "TASK005": Rule("error", "deny does not list all three required denials"),
    "TASK006": Rule("error", "a task file holds a literal value that looks like a key"),
    "TASK007": Rule("info", "model is still the placeholder YOUR_MODEL_ID"),
    "CLAUDE001": Rule("error", "Claude settings are not a JSON object, or env is not an object"),
    "CLAUDE002": Rule("error", "a provider setting sits outside env (use ANTHROPIC_* entries of env)"),
    "CLAUDE003": Rule("error", "env sets both ANTHROPIC_AUTH_TOKEN and ANTHROPIC_API_KEY"),
    "CLAUDE004": Rule("error", "a literal key in Claude settings (warning in the personal settings.local.json)"),
    "CLAUDE005": Rule("error", "Claude settings set a Codex/OpenAI/TaoToken variable (TAOTOKEN_*, OPENAI_*, CODEX_*)"),
    "CLAUDE006": Rule("warning", "env sets a token but no ANTHROPIC_BASE_URL (the token would go to the default API)"),
    "CODEX001": Rule("error", "config.toml is not valid TOML"),
    "CODEX002": Rule("error", "model_provider is unset or names no [model_providers.X] table"),
    "CODEX003": Rule("error", "a provider's env_key is unset, not a variable name, or holds a key"),
    "CODEX004": Rule("error", "a provider's env_key is an ANTHROPIC_* variable (that is Claude Code's)"),
    "CODEX005": Rule("error", "ANTHROPIC_* appears in the Codex config"),
    "CODEX006": Rule("error", 'wire_api is not "responses" (current Codex rejects "chat"; warning when unset)'),
    "CODEX007": Rule("error", "an inline token: experimental_bearer_token, an auth header, or a key-looking value"),
    "CODEX008": Rule("warning", "legacy profiles ([profiles.*] tables or a profile key)"),
    "CODEX009": Rule("error", "a provider has no base_url"),
    "CODEX010": Rule("warning", "a provider's env_key is a task-domain key variable (Codex has its own)"),
    "CODEX011": Rule("warning", "a project .codex/config.toml sets model_provider(s), which Codex ignores there"),
    "XFILE001": Rule("error", "a base URL differs from the one most linted files use"),
    "XFILE002": Rule("error", "one key variable is shared by two task domains or clients"),
}

# --- the users' facts ---------------------------------------------------------------------------

DOMAIN_KEYS: dict[str, str] = {d.value: f"TAOTOKEN_API_KEY_{d.value.upper()}_AGENT" for d in Domain}
CI_SUMMARY_KEY = "TAOTOKEN_API_KEY_CI_SUMMARY"
CODEX_KEY = "TAOTOKEN_CODEX_API_KEY"
CLAUDE_TOKEN_VARS = ("ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_API_KEY")
KNOWN_KEY_VARIABLES = frozenset(KEY_VARIABLES) | set(DOMAIN_KEYS.values())
CODEX_BUILTIN_PROVIDERS = frozenset({"openai", "oss", "ollama", "lmstudio"})
MODEL_PLACEHOLDER = "YOUR_MODEL_ID"

_VAR_NAME = re.compile(r"[A-Z][A-Z0-9_]*")
_SECRET_WORDS = frozenset(
    {"KEY", "APIKEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "PASS", "CREDENTIAL", "CREDENTIALS", "AUTH", "PAT"}
)
_KEY_PREFIX = re.compile(
    r"(?:sk-ant-|sk-proj-|sk-|sk_live_|sk_test_|rk_live_|tt-|ghp_|gho_|ghs_|github_pat_|glpat-|xox[abprs]-|AIza)"
    r"[A-Za-z0-9_\-]{16,}|AKIA[0-9A-Z]{16}"
)
_PREFIXES = ("sk-ant-", "sk-proj-", "sk-", "sk_live_", "sk_test_", "tt-")
_PLACEHOLDER_WORDS = (
    "your",
    "changeme",
    "change_me",
    "change-me",
    "replace",
    "placeholder",
    "example",
    "dummy",
    "redacted",
    "not-a-real",
    "not_a_real",
    "sample",
)
_PLACEHOLDER_EXACT = frozenset({"none", "null", "todo", "tbd", "fixme", "-", "...", "…"})
_TOKEN = re.compile(r"[A-Za-z0-9_\-+=.]{8,}")
_ENDPOINTS = ("/chat/completions", "/completions", "/messages", "/responses", "/embeddings", "/models")
_LOCAL_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})

# --- secrets ------------------------------------------------------------------------------------


def mask(value: str) -> str:
    """The only form in which a suspected secret is ever shown: its first three characters and `…`."""
    return value.strip()[:3] + "…"


def is_placeholder(value: str) -> bool:
    """Empty, `YOUR_…`, `<…>`, `${VAR}`, `changeme`, `xxx…`, `sk-xxxx` and the like."""
    v = value.strip()
    low = v.lower()
    if not v or low in _PLACEHOLDER_EXACT:
        return True
    if (v[0], v[-1]) in (("<", ">"), ("{", "}"), ("[", "]")) or re.fullmatch(r"\$\{?[A-Za-z_][A-Za-z0-9_]*\}?", v):
        return True
    if any(word in low for word in _PLACEHOLDER_WORDS):
        return True
    body = low
    for prefix in _PREFIXES:
        if body.startswith(prefix):
            body = body[len(prefix) :]
            break
    return not body or set(body) <= set("x*.-_0") or len(set(body)) == 1


def _entropy(text: str) -> float:
    counts = Counter(text)
    return -sum(c / len(text) * math.log2(c / len(text)) for c in counts.values())


def _randomish(value: str) -> bool:
    """Long, letters and digits interleaved, high entropy: what generated keys look like (names do not).

    The longest run between separators (- _ . :) must itself be random, so model ids and names built
    from short words (`Qwen/Qwen3-Coder-480B`, `deepgemm_tile_acceptance_001`) are not mistaken for keys.
    """
    if len(value) < 20 or value[0] in "/~." or not re.fullmatch(r"[A-Za-z0-9_\-+/=.:]+", value):
        return False
    core = re.sub(r"[^A-Za-z0-9]", "", max(re.split(r"[-_.:]", value), key=len))
    if len(core) < 16 or not (re.search(r"[A-Za-z]", core) and re.search(r"[0-9]", core)):
        return False
    classes = ["d" if c.isdigit() else "u" if c.isupper() else "l" for c in core]
    changes = sum(a != b for a, b in itertools.pairwise(classes))
    return changes / (len(core) - 1) >= 0.3 and _entropy(core) >= 3.0


def looks_like_key(value: str) -> bool:
    """A value that is probably a real credential: a known key prefix, or a long random token."""
    v = value.strip()
    if not v or is_placeholder(v) or any(c.isspace() for c in v) or "://" in v:
        return False
    return bool(_KEY_PREFIX.fullmatch(v)) or _randomish(v)


def find_keys(text: str) -> list[str]:
    """Key-looking values in a string: the whole of it, or tokens of free text (a header, a command)."""
    if looks_like_key(text):
        return [text.strip()]
    return [t for t in _TOKEN.findall(text) if looks_like_key(t)]


def is_secret_name(name: str) -> bool:
    """A variable whose value is a credential: a word of its name is KEY, TOKEN, SECRET, ... (TAOTOKEN is not)."""
    return bool(_SECRET_WORDS & set(re.split(r"[^A-Z0-9]+", name.upper())))


def _secret_verdict(name: str, value: str) -> Literal["key", "suspicious"] | None:
    """For an assignment `name = value`: is the value a key, doubtful, or fine?"""
    if is_placeholder(value):
        return None
    if looks_like_key(value):
        return "key"
    if not is_secret_name(name):
        return None
    v = value.strip()
    if len(v) >= 8 and not any(c.isspace() for c in v) and not _VAR_NAME.fullmatch(v):
        return "key"
    return "suspicious"


# --- base URLs ----------------------------------------------------------------------------------

UrlFlavor = Literal["gateway", "anthropic", "openai", "generic"]


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


def _check_url(path: str, line: int, label: str, url: str, flavor: UrlFlavor) -> list[Finding]:
    out: list[Finding] = []

    def add(rule: str, message: str, severity: Severity | None = None) -> None:
        out.append(_finding(path, line, rule, message, severity))

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
        add("URL006", f"{label} {shown!r} has no /v1; Codex appends only /responses to it")
    if parts.scheme == "http" and parts.hostname not in _LOCAL_HOSTS:
        add("URL007", f"{label} {shown!r} uses plain http; keys would cross the network unencrypted")
    if not any(f.rule in ("URL001", "URL002", "URL003") for f in out):
        try:
            validate_base_url(raw)
        except InputError:  # the client's own check is the last word
            add("URL002", f"{label} {shown!r} is refused by the gateway client")
    return out


# --- locating keys ------------------------------------------------------------------------------

KeyPath = tuple[str | int, ...]


def _line_at(text: str, index: int) -> int:
    return text.count("\n", 0, index) + 1


def json_key_lines(text: str) -> dict[KeyPath, int]:
    """The line of every key (and array element) of a valid JSON text, by its path."""
    lines: dict[KeyPath, int] = {}
    decoder = json.JSONDecoder()
    n = len(text)

    def skip(i: int) -> int:
        while i < n and text[i] in " \t\r\n":
            i += 1
        return i

    def value(i: int, where: KeyPath) -> int:
        i = skip(i)
        if text[i] == "{":
            i = skip(i + 1)
            if text[i] == "}":
                return i + 1
            while True:
                i = skip(i)
                key, end = _scanstring(text, i + 1)
                lines[(*where, key)] = _line_at(text, i)
                i = skip(end)
                i = skip(value(i + 1, (*where, key)))  # past ':'
                if text[i] == ",":
                    i += 1
                    continue
                return i + 1
        if text[i] == "[":
            i = skip(i + 1)
            if text[i] == "]":
                return i + 1
            index = 0
            while True:
                i = skip(i)
                lines[(*where, index)] = _line_at(text, i)
                i = skip(value(i, (*where, index)))
                index += 1
                if text[i] == ",":
                    i += 1
                    continue
                return i + 1
        _, end = decoder.raw_decode(text, i)
        return end

    with contextlib.suppress(ValueError, IndexError):
        value(0, ())
    return lines


_TOML_KEY = r"""(?:[A-Za-z0-9_-]+|"[^"]*"|'[^']*')"""
_TOML_DOTTED = rf"{_TOML_KEY}(?:\s*\.\s*{_TOML_KEY})*"
_TOML_HEADER = re.compile(rf"^\[\[?\s*({_TOML_DOTTED})\s*\]\]?\s*(?:#.*)?$")
_TOML_ASSIGN = re.compile(rf"^({_TOML_DOTTED})\s*=\s*(.*)$")
_TOML_INLINE_KEY = re.compile(rf"[{{,]\s*({_TOML_KEY})\s*=")


def _toml_parts(dotted: str) -> tuple[str, ...]:
    return tuple(p.strip().strip("\"'") for p in re.findall(_TOML_KEY, dotted))


def toml_key_lines(text: str) -> dict[KeyPath, int]:
    """The line of every table and key of a TOML text (inline-table keys share their line)."""
    lines: dict[KeyPath, int] = {}
    table: tuple[str, ...] = ()
    in_string: str | None = None
    for number, raw in enumerate(text.splitlines(), 1):
        stripped = raw.strip()
        if in_string:
            if stripped.count(in_string) % 2 == 1:
                in_string = None
            continue
        if not stripped or stripped.startswith("#"):
            continue
        if header := _TOML_HEADER.match(stripped):
            table = _toml_parts(header.group(1))
            for i in range(1, len(table) + 1):
                lines.setdefault(table[:i], number)
            continue
        if assign := _TOML_ASSIGN.match(stripped):
            key = table + _toml_parts(assign.group(1))
            for i in range(len(table) + 1, len(key) + 1):
                lines.setdefault(key[:i], number)
            rest = assign.group(2)
            for quote in ('"""', "'''"):
                if rest.startswith(quote) and rest.count(quote) == 1:
                    in_string = quote
            if rest.startswith("{"):
                for inner in _TOML_INLINE_KEY.finditer(rest):
                    lines.setdefault((*key, inner.group(1).strip("\"'")), number)
    return lines


def _line(lines: dict[KeyPath, int], where: Sequence[str | int]) -> int:
    where = tuple(where)
    while where:
        if where in lines:
            return lines[where]
        where = where[:-1]
    return 1


def _label(where: Sequence[str | int]) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else (f".{p}" if i else p) for i, p in enumerate(where))


def _strings(data: Any, where: KeyPath = ()) -> Iterator[tuple[KeyPath, str]]:
    """Every string value of a parsed JSON/TOML document, by path."""
    if isinstance(data, str):
        yield where, data
    elif isinstance(data, dict):
        for k, v in data.items():
            yield from _strings(v, (*where, str(k)))
    elif isinstance(data, list):
        for i, v in enumerate(data):
            yield from _strings(v, (*where, i))


# --- facts shared across files ------------------------------------------------------------------


@dataclass(frozen=True)
class UrlUse:
    path: str
    line: int
    label: str
    url: str


@dataclass(frozen=True)
class KeyUse:
    path: str
    line: int
    label: str
    variable: str
    owner: str | None  # "domain deepgemm", "Codex", "Claude Code"; None for a task of unknown domain


@dataclass
class Facts:
    urls: list[UrlUse] = field(default_factory=list)
    keys: list[KeyUse] = field(default_factory=list)
    secrets: set[str] = field(default_factory=set)  # to scrub from cross-file messages


@dataclass
class _Collector:
    path: str
    findings: list[Finding] = field(default_factory=list)
    secrets: set[str] = field(default_factory=set)
    facts: Facts = field(default_factory=Facts)

    def add(self, line: int, rule: str, message: str, severity: Severity | None = None) -> None:
        self.findings.append(_finding(self.path, line, rule, message, severity))

    def done(self) -> tuple[list[Finding], Facts]:
        """Findings with any secret seen in the file scrubbed from their messages (belt and braces)."""
        self.facts.secrets |= self.secrets
        return _scrub(self.findings, self.secrets), self.facts


def redact(message: str, secrets: Iterable[str] = ()) -> str:
    """Mask the given secrets (in any letter case) and every key-looking token of a message."""
    for secret in sorted(secrets, key=len, reverse=True):
        if len(secret) >= 6:
            message = re.sub(re.escape(secret), mask(secret).replace("\\", "\\\\"), message, flags=re.IGNORECASE)
    return _TOKEN.sub(lambda m: mask(m.group()) if looks_like_key(m.group()) else m.group(), message)


def _scrub(findings: Iterable[Finding], secrets: Iterable[str]) -> list[Finding]:
    secrets = list(secrets)
    return [f.model_copy(update={"message": redact(f.message, secrets)}) for f in findings]


def _finding(path: str, line: int, rule: str, message: str, severity: Severity | None = None) -> Finding:
    return Finding(
        path=path, line=max(1, line), rule=rule, message=redact(message), severity=severity or RULES[rule].severity
    )


# --- .env files ---------------------------------------------------------------------------------

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


def _lint_env(path: str, text: str) -> tuple[list[Finding], Facts]:
    c = _Collector(path)
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
        verdict = _secret_verdict(name, value)
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
            c.findings += _check_url(path, number, name, value, _ENV_URL_FLAVORS.get(name, "generic"))
            if gateway_root(value):
                c.facts.urls.append(UrlUse(path, number, name, value))
    return c.done()


# --- agent task files ---------------------------------------------------------------------------


def infer_domain(data: dict[str, Any]) -> str | None:
    """The task's domain from its target.kernel or task_id, when it names one."""
    target = data.get("target")
    names = [str(target.get("kernel", "")) if isinstance(target, dict) else "", str(data.get("task_id", ""))]
    for name in names:
        low = name.lower()
        for domain in sorted(DOMAIN_KEYS, key=len, reverse=True):
            if domain in low or (domain == "v41_attention" and "v41" in low):
                return domain
    return None


def _key_owner(variable: str) -> str:
    domains = {v: k for k, v in DOMAIN_KEYS.items()}
    return f"the {domains[variable]} domain" if variable in domains else "CI summaries"


def _json_error(c: _Collector, rule: str, text: str, what: str) -> tuple[Any, dict[KeyPath, int]] | None:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        c.add(exc.lineno, rule, f"{what} is not valid JSON: {exc.msg} (column {exc.colno})")
        return None
    if not isinstance(data, dict):
        c.add(1, rule, f"{what} must be a JSON object")
        return None
    return data, json_key_lines(text)


def _lint_task(path: str, text: str, domain: str | None = None) -> tuple[list[Finding], Facts]:
    c = _Collector(path)
    parsed = _json_error(c, "TASK001", text, "the task file")
    if parsed is None:
        return c.done()
    data, lines = parsed
    domain = domain or infer_domain(data)

    try:
        AgentTask.model_validate(data)
    except ValidationError as exc:
        for err in exc.errors():
            loc = tuple(err["loc"])
            if loc[:1] == ("deny",) or (loc == ("provider", "api_key_env") and err["type"] == "value_error"):
                continue  # TASK005 / TASK002 say it better
            c.add(_line(lines, loc), "TASK001", f"{_label(loc) or '(top level)'}: {err['msg']}")

    provider = data.get("provider")
    provider = provider if isinstance(provider, dict) else {}
    base_url = provider.get("base_url")
    if isinstance(base_url, str):
        line = _line(lines, ("provider", "base_url"))
        c.findings += _check_url(path, line, "provider.base_url", base_url, "gateway")
        if gateway_root(base_url):
            c.facts.urls.append(UrlUse(path, line, "provider.base_url", base_url))

    variable = provider.get("api_key_env")
    if isinstance(variable, str):
        line = _line(lines, ("provider", "api_key_env"))
        expected = DOMAIN_KEYS.get(domain or "", "one of " + ", ".join(sorted(KNOWN_KEY_VARIABLES)))
        if not variable:
            c.add(line, "TASK002", f"provider.api_key_env is empty; name the key variable ({expected})")
        elif looks_like_key(variable) or not _VAR_NAME.fullmatch(variable):
            if looks_like_key(variable):
                c.secrets.add(variable.strip())
            c.add(
                line,
                "TASK002",
                f"provider.api_key_env holds {mask(variable)!r}, not an environment variable name; "
                f"name the variable ({expected}), never the key",
            )
        else:
            c.facts.keys.append(
                KeyUse(path, line, "provider.api_key_env", variable, f"domain {domain}" if domain else None)
            )
            if variable not in KNOWN_KEY_VARIABLES:
                c.add(line, "TASK003", f"provider.api_key_env {variable} is not a known key variable ({expected})")
            elif domain and variable != DOMAIN_KEYS[domain]:
                c.add(
                    line,
                    "TASK004",
                    f"provider.api_key_env {variable} is the key of {_key_owner(variable)}; "
                    f"a {domain} task uses {expected}",
                )

    deny = data.get("deny")
    if not isinstance(deny, list):
        c.add(_line(lines, ("deny",)), "TASK005", f"deny must be a list of {', '.join(REQUIRED_DENY)}")
    elif missing := [d for d in REQUIRED_DENY if d not in deny]:
        c.add(_line(lines, ("deny",)), "TASK005", f"deny is missing {', '.join(missing)}")

    if data.get("model") == MODEL_PLACEHOLDER:
        c.add(_line(lines, ("model",)), "TASK007", f"model is the placeholder {MODEL_PLACEHOLDER}; set a model id")

    for where, value in _strings(data):
        if where == ("provider", "api_key_env"):
            continue
        if keys := find_keys(value):
            c.secrets.update(keys)
            c.add(_line(lines, where), "TASK006", f"{_label(where)} holds what looks like a key ({mask(keys[0])})")
    return c.done()


# --- Claude Code settings -----------------------------------------------------------------------

_CLAUDE_TOP_PROVIDER = frozenset(
    {"apikey", "api_key", "baseurl", "base_url", "authtoken", "auth_token", "model_provider", "model_providers"}
)
_CLAUDE_FOREIGN = re.compile(r"(?:TAOTOKEN_|OPENAI_|CODEX_|AZURE_OPENAI_)")


def _lint_claude(path: str, text: str) -> tuple[list[Finding], Facts]:
    c = _Collector(path)
    personal = Path(path).name == "settings.local.json"
    where_file = "the personal settings.local.json (keep it out of git)" if personal else "a committed settings file"
    parsed = _json_error(c, "CLAUDE001", text, "the Claude settings file")
    if parsed is None:
        return c.done()
    data, lines = parsed

    for key in data:
        if key.upper().startswith("ANTHROPIC_") or key.lower() in _CLAUDE_TOP_PROVIDER:
            c.add(
                _line(lines, (key,)),
                "CLAUDE002",
                f"{key} is a provider setting outside env; Claude Code takes the provider only from "
                "env.ANTHROPIC_BASE_URL / env.ANTHROPIC_AUTH_TOKEN / env.ANTHROPIC_MODEL",
            )

    env = data.get("env", {})
    if not isinstance(env, dict):
        c.add(_line(lines, ("env",)), "CLAUDE001", "env must be an object of NAME: value strings")
        env = {}

    for name, value in env.items():
        line = _line(lines, ("env", name))
        if _CLAUDE_FOREIGN.match(name):
            c.add(
                line,
                "CLAUDE005",
                f"env.{name} is a Codex/OpenAI/task-domain variable; Claude Code reads ANTHROPIC_* only, "
                "and Codex keeps its key in its own variable",
            )
        if not isinstance(value, str):
            continue
        keys = [value.strip()] if _secret_verdict(name, value) == "key" else find_keys(value)
        if keys:
            c.secrets.update(keys)
            c.add(
                line,
                "CLAUDE004",
                f"env.{name} holds a literal key ({mask(keys[0])}) in {where_file}; export it in the shell or "
                "a CI secret instead",
                "warning" if personal else "error",
            )
        if name == "ANTHROPIC_BASE_URL":
            c.findings += _check_url(path, line, "env.ANTHROPIC_BASE_URL", value, "anthropic")
            if gateway_root(value):
                c.facts.urls.append(UrlUse(path, line, "env.ANTHROPIC_BASE_URL", value))

    if all(v in env for v in CLAUDE_TOKEN_VARS):
        c.add(
            _line(lines, ("env", "ANTHROPIC_API_KEY")),
            "CLAUDE003",
            "env sets both ANTHROPIC_AUTH_TOKEN and ANTHROPIC_API_KEY; a gateway takes ANTHROPIC_AUTH_TOKEN only, "
            "drop ANTHROPIC_API_KEY",
        )
    tokens = [v for v in CLAUDE_TOKEN_VARS if v in env]
    if tokens and "ANTHROPIC_BASE_URL" not in env:
        c.add(
            _line(lines, ("env", tokens[0])),
            "CLAUDE006",
            f"env sets {tokens[0]} but no ANTHROPIC_BASE_URL; switch base URL and token together, "
            "or the token goes to the default Anthropic API",
        )
    for token in tokens:
        c.facts.keys.append(KeyUse(path, _line(lines, ("env", token)), f"env.{token}", token, "Claude Code"))

    for where, value in _strings(data):
        if where[:1] == ("env",) and len(where) == 2:
            continue  # judged above
        if keys := find_keys(value):
            c.secrets.update(keys)
            c.add(
                _line(lines, where),
                "CLAUDE004",
                f"{_label(where)} holds what looks like a key ({mask(keys[0])}) in {where_file}",
                "warning" if personal else "error",
            )
    return c.done()


# --- Codex config.toml --------------------------------------------------------------------------

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


def _lint_codex(path: str, text: str, project_level: bool = False) -> tuple[list[Finding], Facts]:
    c = _Collector(path)
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
            _line(lines, ("model_provider",)),
            "CODEX002",
            "model_provider is not set; Codex falls back to the built-in openai provider"
            + (f" (set model_provider = {next(iter(providers))!r})" if providers else ""),
        )
    elif active not in providers:
        hint = ""
        if _VAR_NAME.fullmatch(active) or active in env_keys.values():
            hint = "; it looks like an environment variable — are model_provider and env_key swapped?"
        elif len(providers) == 1:
            hint = f"; did you mean {next(iter(providers))!r}?"
        if active in CODEX_BUILTIN_PROVIDERS:
            c.add(
                _line(lines, ("model_provider",)),
                "CODEX002",
                f"model_provider {active!r} is a built-in provider, not the gateway",
                "warning",
            )
        else:
            c.add(
                _line(lines, ("model_provider",)),
                "CODEX002",
                f"model_provider {active!r} names no [model_providers.{active}] table{hint}",
            )

    checked: set[KeyPath] = set()
    for pid, provider in providers.items():
        if not isinstance(provider, dict):
            continue
        base = ("model_providers", pid)
        here = _line(lines, base)
        base_url = provider.get("base_url")
        if not isinstance(base_url, str) or not base_url:
            c.add(here, "CODEX009", f"model_providers.{pid}.base_url is not set")
        else:
            line = _line(lines, (*base, "base_url"))
            c.findings += _check_url(path, line, f"model_providers.{pid}.base_url", base_url, "openai")
            if pid == active and gateway_root(base_url):
                c.facts.urls.append(UrlUse(path, line, f"model_providers.{pid}.base_url", base_url))
        if provider.get("query_params"):
            c.add(
                _line(lines, (*base, "query_params")),
                "URL001",
                f"model_providers.{pid}.query_params adds a query string to every request; the gateway takes none",
            )

        env_key = provider.get("env_key")
        label = f"model_providers.{pid}.env_key"
        line = _line(lines, (*base, "env_key"))
        checked.add((*base, "env_key"))
        if not isinstance(env_key, str) or not env_key:
            c.add(here, "CODEX003", f"{label} is not set; name the key variable, e.g. env_key = {CODEX_KEY!r}")
        elif looks_like_key(env_key) or not _VAR_NAME.fullmatch(env_key):
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
            if env_key in KNOWN_KEY_VARIABLES:
                c.add(line, "CODEX010", f"{label} is the task-domain variable {env_key}; Codex uses {CODEX_KEY}")

        wire = provider.get("wire_api")
        if wire is None:
            c.add(here, "CODEX006", f'model_providers.{pid}.wire_api is not set; set wire_api = "responses"', "warning")
        elif wire != "responses":
            c.add(
                _line(lines, (*base, "wire_api")),
                "CODEX006",
                f'model_providers.{pid}.wire_api is {str(wire)!r}; current Codex accepts only "responses"',
            )

        if "experimental_bearer_token" in provider:
            token_at: KeyPath = (*base, "experimental_bearer_token")
            checked.add(token_at)
            token = provider["experimental_bearer_token"]
            if isinstance(token, str) and token:
                c.secrets.add(token.strip())
            c.add(
                _line(lines, token_at),
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
                        _line(lines, header_at),
                        "CODEX007",
                        f"model_providers.{pid}.http_headers.{header} is an inline credential; use env_key",
                    )

    for where, value in _strings(data):
        if where in checked:
            continue
        if keys := find_keys(value):
            c.secrets.update(keys)
            c.add(_line(lines, where), "CODEX007", f"{_label(where)} holds what looks like a key ({mask(keys[0])})")

    if "profiles" in data:
        c.add(
            _line(lines, ("profiles",)),
            "CODEX008",
            "[profiles.*] tables are legacy; keep one provider per config file",
        )
    if "profile" in data:
        c.add(_line(lines, ("profile",)), "CODEX008", "profile is a legacy key; remove it")

    if project_level and ("model_provider" in data or "model_providers" in data):
        key = "model_provider" if "model_provider" in data else "model_providers"
        c.add(
            _line(lines, (key,)),
            "CODEX011",
            f"{key} in a project .codex/config.toml is ignored by Codex; put it in ~/.codex/config.toml",
        )

    flagged = {f.line for f in c.findings if f.rule == "CODEX004"}
    for number, raw in enumerate(text.splitlines(), 1):
        names = _ANTHROPIC.findall(_strip_toml_comment(raw))
        if names and number not in flagged:
            c.add(number, "CODEX005", f"{names[0]} has no place in the Codex config (Claude Code's variable)")
    return c.done()


# --- public per-kind entry points ---------------------------------------------------------------


def lint_env(path: str, text: str) -> list[Finding]:
    return _lint_env(path, text)[0]


def lint_task(path: str, text: str, domain: str | None = None) -> list[Finding]:
    return _lint_task(path, text, domain)[0]


def lint_claude(path: str, text: str) -> list[Finding]:
    return _lint_claude(path, text)[0]


def lint_codex(path: str, text: str, project_level: bool = False) -> list[Finding]:
    return _lint_codex(path, text, project_level)[0]


# --- across files -------------------------------------------------------------------------------


def lint_across(facts: Iterable[Facts]) -> list[Finding]:
    """One gateway base URL everywhere; one key variable per task domain and per client."""
    facts = list(facts)
    out: list[Finding] = []

    urls = [u for f in facts for u in f.urls]
    roots = [gateway_root(u.url) or "" for u in urls]
    counts = Counter(roots)
    if len(counts) > 1:
        task_roots = [r for u, r in zip(urls, roots, strict=True) if u.label == "provider.base_url"]
        majority = max(counts, key=lambda r: (counts[r], task_roots.count(r), -roots.index(r)))
        agree = sorted({u.path for u, r in zip(urls, roots, strict=True) if r == majority})
        for use, root in zip(urls, roots, strict=True):
            if root != majority:
                where = ", ".join(agree[:3]) + (f" and {len(agree) - 3} more" if len(agree) > 3 else "")
                out.append(
                    _finding(
                        use.path,
                        use.line,
                        "XFILE001",
                        f"{use.label} {show_url(use.url)!r} points elsewhere than {show_url(majority)!r}, "
                        f"the base URL of {where}; switch every client to the same gateway",
                    )
                )

    by_var: dict[str, list[KeyUse]] = {}
    for key_use in (k for f in facts for k in f.keys):
        by_var.setdefault(key_use.variable, []).append(key_use)
    for variable, uses in sorted(by_var.items()):
        owners = sorted({u.owner for u in uses if u.owner})
        unknown_tasks = any(u.owner is None for u in uses)
        clients = [o for o in owners if not o.startswith("domain ")]
        if len(owners) < 2 and not (unknown_tasks and clients):
            continue
        sharers = ", ".join(owners + (["a task of unknown domain"] if unknown_tasks else []))
        for key_use in uses:
            out.append(
                _finding(
                    key_use.path,
                    key_use.line,
                    "XFILE002",
                    f"{key_use.label} {variable} is shared by {sharers}; give each task domain and each client "
                    "its own key variable",
                )
            )
    return _scrub(out, {secret for f in facts for secret in f.secrets})


# --- files and paths ----------------------------------------------------------------------------


@dataclass(frozen=True)
class SourceFile:
    """A file's text and what it is; `domain` is the task's kernel domain, when known."""

    path: str
    text: str
    kind: Kind
    domain: str | None = None
    project_level: bool = False


def _looks_like_task(text: str) -> bool:
    try:
        data = json.loads(text)
    except ValueError:
        return False
    return isinstance(data, dict) and bool({"task_id", "provider"} & set(data))


def detect_kind(path: str | Path, text: str | None = None) -> Kind | None:
    """The kind of a file from its name (and, for ambiguous names, its text)."""
    p = Path(path)
    name = p.name
    if name.startswith(".env") or name.endswith(".env"):
        return "env"
    if name == "agent_task.json":
        return "task"
    if name.endswith(".json") and "task" in name.lower():
        return "task" if text is None or _looks_like_task(text) else None
    if name in ("settings.json", "settings.local.json"):
        if p.parent.name in (".claude", "claude") or text is None:
            return "claude"
        return "claude" if "ANTHROPIC_" in text or '"env"' in text else None
    if name == "config.toml":
        if p.parent.name in (".codex", "codex") or text is None:
            return "codex"
        return "codex" if "model_provider" in text else None
    return None


def lint_files(files: Sequence[SourceFile]) -> list[Finding]:
    """Lint each file by its kind, then across them; findings sorted by path and line."""
    findings: list[Finding] = []
    facts: list[Facts] = []
    for f in files:
        if f.kind == "env":
            found, fact = _lint_env(f.path, f.text)
        elif f.kind == "task":
            found, fact = _lint_task(f.path, f.text, f.domain)
        elif f.kind == "claude":
            found, fact = _lint_claude(f.path, f.text)
        else:
            found, fact = _lint_codex(f.path, f.text, f.project_level)
        findings += found
        facts.append(fact)
    findings += lint_across(facts)
    return sorted(findings, key=lambda f: (f.path, f.line, f.rule, f.message))


_SKIP_DIRS = frozenset({".git", ".venv", "venv", "node_modules", "__pycache__", ".vscode", ".idea", ".ruff_cache"})


def _walk(folder: Path) -> Iterator[Path]:
    for root, dirs, names in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS)
        for name in sorted(names):
            yield Path(root) / name


def _kernel_domain(task_path: Path) -> str | None:
    try:
        domain = tomllib.loads((task_path.parent / "kernel.toml").read_text()).get("domain")
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return None
    return domain if domain in DOMAIN_KEYS else None


def _is_project_codex(path: Path) -> bool:
    if path.parent.name != ".codex":
        return False
    try:
        return path.parent.parent.resolve() != Path.home().resolve()
    except OSError:
        return True


def lint_paths(paths: Iterable[str | Path]) -> list[Finding]:
    """Read the files (folders: every file of a known kind under them) and lint them together."""
    files: list[SourceFile] = []
    problems: list[Finding] = []
    seen: set[Path] = set()
    for given in paths:
        given = Path(given)
        explicit = not given.is_dir()
        for p in _walk(given) if given.is_dir() else [given]:
            if p.resolve() in seen:
                continue
            seen.add(p.resolve())
            try:
                text = p.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                if explicit:
                    why = exc.strerror if isinstance(exc, OSError) and exc.strerror else "not UTF-8 text"
                    problems.append(_finding(str(p), 1, "LINT001", f"{p.name} cannot be read: {why}"))
                continue
            kind = detect_kind(p, text)
            if kind is None and explicit and p.name in ("settings.json", "settings.local.json", "config.toml"):
                kind = detect_kind(p)  # named on the command line: trust the name
            if kind is None:
                if explicit:
                    problems.append(_finding(str(p), 1, "LINT002", f"{p.name} is not a kind of file lint knows"))
                continue
            domain = _kernel_domain(p) if kind == "task" else None
            files.append(SourceFile(str(p), text, kind, domain, kind == "codex" and _is_project_codex(p)))
    return sorted(problems, key=lambda f: f.path) + lint_files(files)


def default_paths(repo_root: str | Path = ".") -> list[Path]:
    """What `opgate lint` checks with no PATH: .env.example, every kernel's agent_task.json, examples/.

    Also the repository's own `.claude/settings.json` and `.codex/config.toml` when they exist.
    """
    root = Path(repo_root)
    out = [p for p in (root / ".env.example", root / ".claude" / "settings.json") if p.is_file()]
    out += sorted((root / "kernels").glob("*/agent_task.json"))
    out += [p for p in (root / ".codex" / "config.toml",) if p.is_file()]
    if (root / "examples").is_dir():
        out.append(root / "examples")
    return out


# --- output -------------------------------------------------------------------------------------


def counts(findings: Iterable[Finding]) -> dict[str, int]:
    tally = Counter(f.severity for f in findings)
    return {s: tally.get(s, 0) for s in SEVERITIES}


def format_text(findings: Iterable[Finding]) -> str:
    """One `file:line: RULE message` line per finding (no trailing newline; empty when clean)."""
    return "\n".join(f"{f.path}:{f.line}: {f.rule} {f.message}" for f in findings)


def format_summary(findings: Sequence[Finding]) -> str:
    n = counts(findings)
    return f"opgate lint: {n['error']} error(s), {n['warning']} warning(s), {n['info']} info"


def format_json(findings: Sequence[Finding]) -> str:
    """`{"findings": [...], "counts": {"error": n, "warning": n, "info": n}}`."""
    body = {"findings": [f.model_dump() for f in findings], "counts": counts(findings)}
    return json.dumps(body, indent=2, ensure_ascii=False)


def exit_code(findings: Iterable[Finding], fail_on: Iterable[Severity] = ("error", "warning")) -> int:
    """1 when a finding has a failing severity (by default errors and warnings), else 0."""
    failing = set(fail_on)
    return int(any(f.severity in failing for f in findings))


def rules_markdown() -> str:
    """The rule table for the README."""
    rows = [f"| `{rid}` | {rule.severity} | {rule.summary} |" for rid, rule in RULES.items()]
    return "\n".join(["| Rule | Severity | What it flags |", "| --- | --- | --- |", *rows])
