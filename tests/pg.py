"""A throwaway PostgreSQL cluster for the ledger tests: initdb in a temp dir, pg_ctl start/stop.

PostgreSQL refuses to run as root, and CI runs as root: the cluster then belongs to the `postgres`
user and is started with `runuser -u postgres`. Every test gets a fresh database in it.
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest


def _pg_bin() -> Path:
    """OPGATE_TEST_PG_BIN, else the newest /usr/lib/postgresql/<major>/bin (Debian's layout; 15 on bookworm)."""
    if os.environ.get("OPGATE_TEST_PG_BIN"):
        return Path(os.environ["OPGATE_TEST_PG_BIN"])
    found = sorted(
        Path("/usr/lib/postgresql").glob("*/bin/pg_ctl"),
        key=lambda p: int(p.parent.parent.name) if p.parent.parent.name.isdigit() else 0,
    )
    return found[-1].parent if found else Path("/usr/lib/postgresql/15/bin")


PG_BIN = _pg_bin()


class Cluster:
    """One cluster on a free localhost port, trust auth, owned by `postgres` when we are root."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="opgate-pg-"))
        self.data = self.root / "data"
        self.port = _free_port()
        self.user = "postgres"
        self.as_user: list[str] = []
        if os.geteuid() == 0:
            account = pwd.getpwnam("postgres")
            os.chown(self.root, account.pw_uid, account.pw_gid)
            self.as_user = ["runuser", "-u", "postgres", "--"]
        self.started = False

    def _run(self, *argv: str) -> None:
        proc = subprocess.run([*self.as_user, *argv], capture_output=True, text=True, timeout=120, check=False)
        if proc.returncode != 0:
            raise RuntimeError(f"{Path(argv[0]).name} failed: {proc.stdout[-2000:]}{proc.stderr[-2000:]}")

    def start(self) -> Cluster:
        self._run(
            str(PG_BIN / "initdb"), "-D", str(self.data), "-U", self.user, "--auth=trust", "-E", "UTF8", "--no-sync"
        )
        options = f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=60"
        self._run(
            str(PG_BIN / "pg_ctl"), "-D", str(self.data), "-o", options, "-l", str(self.root / "log"), "-w", "start"
        )
        self.started = True
        return self

    def stop(self) -> None:
        if self.started:
            self._run(str(PG_BIN / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "stop")
            self.started = False
        shutil.rmtree(self.root, ignore_errors=True)

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://{self.user}@127.0.0.1:{self.port}/{database}"

    def create_database(self) -> str:
        import psycopg

        name = f"t_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        return self.url(name)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def missing_reason() -> str | None:
    if not (PG_BIN / "pg_ctl").exists():
        return f"PostgreSQL server binaries not found in {PG_BIN} (apt-get install postgresql)"
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root but there is no `postgres` user to own the test cluster"
        if shutil.which("runuser") is None:
            return "running as root but runuser is missing"
    return None


@cache
def shared_cluster() -> Cluster:
    """The session's one cluster (started on first use; stopped by the fixture's finalizer)."""
    return Cluster().start()


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[Cluster]:
    reason = missing_reason()
    if reason:
        pytest.skip(reason)
    cluster = shared_cluster()
    yield cluster
    cluster.stop()


@pytest.fixture
def pg_url(pg_cluster: Cluster) -> str:
    """A fresh, empty database in the session's cluster."""
    return pg_cluster.create_database()
