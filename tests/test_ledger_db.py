"""Ledger connections (bot/ledger/db.py): database URLs parsed, a password never printed."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.errors import InputError, ServiceError
from bot.ledger import open_ledger, sqlite_path
from bot.ledger.db import redact_url
from tests.pg import Cluster, pg_cluster, pg_url  # noqa: F401  (fixtures)


def test_database_urls_are_parsed_and_never_print_a_password():
    assert sqlite_path("sqlite:///tmp/x.sqlite") == Path("tmp/x.sqlite")
    assert sqlite_path("reports/opgate.sqlite") == Path("reports/opgate.sqlite")
    with pytest.raises(InputError, match="mysql://"):
        sqlite_path("mysql://u:p@h/db")
    assert (
        redact_url("postgresql://bot:s3cret-pw@db.internal:5432/ledger")
        == "postgresql://bot:***@db.internal:5432/ledger"
    )


def test_an_unreachable_postgresql_is_a_service_error_without_the_password():
    with pytest.raises(ServiceError) as err:
        open_ledger("postgresql://bot:s3cret-pw@127.0.0.1:9/ledger?connect_timeout=2")
    assert "s3cret-pw" not in str(err.value) and "127.0.0.1:9" in str(err.value)
