"""Redaction (bot/text/redact.py): a secret and its base64 are scrubbed from text and from log records."""

from __future__ import annotations

from bot.text.redact import RedactingFilter, scrub


def test_secrets_are_scrubbed_from_text_and_log_records():
    import base64
    import logging

    key = "sk-live-abcdef123456"
    encoded = base64.b64encode(key.encode()).decode()
    assert scrub(f"key={key} b64={encoded}", [key]) == "key=*** b64=***"
    record = logging.LogRecord("x", logging.INFO, __file__, 1, "sending %s", (key,), None)
    RedactingFilter([key]).filter(record)
    assert record.getMessage() == "sending ***"
