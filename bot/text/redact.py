"""Keep secrets out of logs and files: a logging filter, a text scrubber, and the one redactor every output uses."""

from __future__ import annotations

import base64
import logging
import re
from collections.abc import Iterable
from urllib.parse import urlsplit

MASK = "***"

# A value shaped like a provider's key or token: a known prefix and 16 more key characters (OpenAI, Anthropic,
# TaoToken, Stripe-style, GitHub, GitLab, Slack, Google), or an AWS access key id. Also what `opgate lint` calls a key.
KEY_SHAPE = re.compile(
    r"(?<![A-Za-z0-9_\-])(?:sk-ant-|sk-proj-|sk-|sk_live_|sk_test_|rk_live_|tt-|ghp_|gho_|ghs_|ghu_|ghr_|github_pat_|glpat-|xox[abprs]-"
    r"|AIza)[A-Za-z0-9_\-]{16,}|AKIA[0-9A-Z]{16}"
)
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")

# The secret values this process read (each domain's key, the GitHub token, the ledger URL's password): set once by
# the CLI's main (`keep_out`) before a command runs; `redact` masks them in every text opgate writes.
_kept_out: list[str] = []


def variants(secret: str) -> list[str]:
    """The secret and the encodings it could leak in (base64 of it, with and without padding)."""
    b64 = base64.b64encode(secret.encode()).decode()
    return [secret, b64, b64.rstrip("=")]


def scrub(text: str, secrets: Iterable[str]) -> str:
    for secret in secrets:
        if len(secret) < 6:  # too short to mask without mangling ordinary text
            continue
        for form in variants(secret):
            text = text.replace(form, MASK)
    return text


def scrub_keys(text: str) -> str:
    """Every key-shaped token of `text` masked, whoever's key it is."""
    return KEY_SHAPE.sub(MASK, text)


def keep_out(secrets: Iterable[str]) -> None:
    """The secret values of this process, for `redact` (the CLI calls it once, with the settings' or the
    environment's secrets)."""
    _kept_out[:] = sorted({s for s in secrets if s}, key=len, reverse=True)


def redact(text: str) -> str:
    """What every output passes through (report.json, the comment, replies, issues, annotations, the step summary,
    the ledger, the tune and bisect reports, logs): the process's secrets and anything shaped like a key, masked."""
    return scrub_keys(scrub(text, _kept_out))


def url_password(url: str) -> str | None:
    """The password a URL carries (a ledger URL's), for the redactor; None when it has none."""
    try:
        return urlsplit(url).password or None
    except ValueError:
        return None


def gateway_words(value: object, limit: int = 80) -> str:
    """A string a gateway supplied (a model id, an error code, type or message, a finish reason, a tool name): one
    line without control characters, keys masked, cut to `limit` characters — shown as the gateway's words, never
    trusted to hold no key."""
    text = " ".join(_CONTROL.sub(" ", str(value)).split())
    text = redact(text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


class RedactingFilter(logging.Filter):
    """Masks every known secret, and anything shaped like a key, in a record's final message."""

    def __init__(self, secrets: Iterable[str]) -> None:
        super().__init__()
        self.secrets = [s for s in secrets if s]

    def filter(self, record: logging.LogRecord) -> bool:
        message = scrub_keys(scrub(record.getMessage(), self.secrets))
        record.msg, record.args = message, None
        return True
