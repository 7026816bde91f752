"""Keep secrets out of logs and files: a logging filter and a text scrubber."""

from __future__ import annotations

import base64
import logging
from collections.abc import Iterable

MASK = "***"


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


class RedactingFilter(logging.Filter):
    """Masks every known secret in a record's final message."""

    def __init__(self, secrets: Iterable[str]) -> None:
        super().__init__()
        self.secrets = [s for s in secrets if s]

    def filter(self, record: logging.LogRecord) -> bool:
        message = scrub(record.getMessage(), self.secrets)
        record.msg, record.args = message, None
        return True
