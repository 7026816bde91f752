"""What lint takes for a key: the heuristics, the known key variables, and masking keys out of messages."""

from __future__ import annotations

import itertools
import math
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from bot.config.repo import RepoConfig
from bot.config.secrets import KEY_PREFIX
from bot.text.redact import KEY_SHAPE

# --- the repository's key variables -------------------------------------------------------------


@dataclass(frozen=True)
class KeyBook:
    """The repository's agent domains and the variable holding each one's key (its opgate configuration)."""

    domains: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, config: RepoConfig) -> KeyBook:
        return cls({name: config.key_variable(name) for name in config.domains})

    @property
    def variables(self) -> frozenset[str]:
        return frozenset(self.domains.values())

    def owner(self, variable: str) -> str | None:
        return next((d for d, v in self.domains.items() if v == variable), None)


def is_domain_key(name: str, book: KeyBook | None = None) -> bool:
    """A task-domain key variable: a configured one, or one named the users' way."""
    return name.startswith(KEY_PREFIX) or (book is not None and name in book.variables)


VAR_NAME = re.compile(r"[A-Z][A-Z0-9_]*")
_SECRET_WORDS = frozenset(
    {"KEY", "APIKEY", "TOKEN", "SECRET", "PASSWORD", "PASSWD", "PASS", "CREDENTIAL", "CREDENTIALS", "AUTH", "PAT"}
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

# --- keys and placeholders ----------------------------------------------------------------------


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
    return bool(KEY_SHAPE.fullmatch(v)) or _randomish(v)


def find_keys(text: str) -> list[str]:
    """Key-looking values in a string: the whole of it, or tokens of free text (a header, a command)."""
    if looks_like_key(text):
        return [text.strip()]
    return [t for t in _TOKEN.findall(text) if looks_like_key(t)]


def is_secret_name(name: str) -> bool:
    """A variable whose value is a credential: a word of its name is KEY, TOKEN, SECRET, ... (TAOTOKEN is not)."""
    return bool(_SECRET_WORDS & set(re.split(r"[^A-Z0-9]+", name.upper())))


def secret_verdict(name: str, value: str) -> Literal["key", "suspicious"] | None:
    """For an assignment `name = value`: is the value a key, doubtful, or fine?"""
    if is_placeholder(value):
        return None
    if looks_like_key(value):
        return "key"
    if not is_secret_name(name):
        return None
    v = value.strip()
    if len(v) >= 8 and not any(c.isspace() for c in v) and not VAR_NAME.fullmatch(v):
        return "key"
    return "suspicious"


def redact(message: str, secrets: Iterable[str] = ()) -> str:
    """Mask the given secrets (in any letter case) and every key-looking token of a message."""
    for secret in sorted(secrets, key=len, reverse=True):
        if len(secret) >= 6:
            message = re.sub(re.escape(secret), mask(secret).replace("\\", "\\\\"), message, flags=re.IGNORECASE)
    return _TOKEN.sub(lambda m: mask(m.group()) if looks_like_key(m.group()) else m.group(), message)
