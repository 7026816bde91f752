"""What the ledger tests share: a ledger URL on SQLite and PostgreSQL and the columns of a table."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.pg import Cluster, pg_cluster, pg_url  # noqa: F401  (fixtures)


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "l.sqlite")
    return str(request.getfixturevalue("pg_url"))
