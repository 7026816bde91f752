"""The ledger under stress, on SQLite and on PostgreSQL: 8 processes x 500 usage rows lose and double none,
and a writer killed with SIGKILL inside a transaction leaves no partial rows and no lock behind."""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bot.ledger import open_ledger
from bot.models.ledger import UsageRow
from bot.spend import budget
from tests.pg import pg_cluster, pg_url  # noqa: F401  (fixtures)

PROCESSES = 8
ROWS = 500
RETRIED_EVERY = 10  # every 10th row is sent twice, as a writer that retried after a lost reply would
KILLED_ROWS = 50


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "stress.sqlite")
    return str(request.getfixturevalue("pg_url"))


def _row(request_id: str, tokens: int, task: str = "stress") -> UsageRow:
    return UsageRow(
        task_id=task,
        model_name="m",
        prompt_tokens=tokens,
        completion_tokens=1,
        total_tokens=tokens + 1,
        request_id=request_id,
        domain="deepgemm",
        key_fingerprint="sha256:stress",
        pr=None,
        head_sha="0" * 40,
        status="ok",
        created_at=datetime.now(UTC).isoformat(timespec="seconds"),
    )


def _start_together(folder: str, worker: int) -> None:
    (Path(folder) / str(worker)).touch()
    deadline = time.time() + 120
    while len(list(Path(folder).iterdir())) < PROCESSES and time.time() < deadline:
        time.sleep(0.01)


def _writer(url: str, worker: int, ready: str) -> int:
    """One process: ROWS usage rows, one statement each, every RETRIED_EVERY-th sent a second time."""
    inserted = 0
    with open_ledger(url) as ledger:
        _start_together(ready, worker)
        for i in range(ROWS):
            row = _row(f"w{worker}-{i}", tokens=worker * ROWS + i)
            inserted += ledger.record_usage(row)
            if i % RETRIED_EVERY == 0:
                inserted += ledger.record_usage(row)  # the retry: must not count twice
    return inserted


@pytest.mark.untimed  # row counts
@pytest.mark.slow
def test_eight_writers_of_500_rows_lose_and_double_none(url, tmp_path):
    open_ledger(url).close()
    ready = tmp_path / "ready"
    ready.mkdir()
    started = time.perf_counter()
    with multiprocessing.get_context("spawn").Pool(PROCESSES) as pool:
        inserted = pool.starmap(_writer, [(url, w, str(ready)) for w in range(PROCESSES)])
    seconds = time.perf_counter() - started
    with open_ledger(url) as ledger:
        rows = ledger.usage()
    expected = {f"w{w}-{i}" for w in range(PROCESSES) for i in range(ROWS)}
    assert inserted == [ROWS] * PROCESSES  # every retry was recognised as a duplicate
    assert len(rows) == PROCESSES * ROWS == 4_000
    assert {r.request_id for r in rows} == expected
    assert sum(r.total_tokens for r in rows) == sum(w * ROWS + i + 1 for w in range(PROCESSES) for i in range(ROWS))
    kind = "postgresql" if "://" in url else "sqlite"
    print(f"\n{kind}: {PROCESSES} processes x {ROWS} rows (+{ROWS // RETRIED_EVERY} retries each) in {seconds:.1f} s")


def _killed_writer(url: str, ready: str) -> None:
    """Opens a transaction, writes KILLED_ROWS rows in it, says so, then waits to be killed."""
    with open_ledger(url) as ledger, ledger.db.transaction():
        for i in range(KILLED_ROWS):
            ledger.record_usage(_row(f"killed-{i}", tokens=1, task="killed"))
        Path(ready).touch()
        time.sleep(120)


def test_a_writer_killed_inside_a_transaction_leaves_no_partial_rows_and_no_lock(url, tmp_path):
    with open_ledger(url) as ledger:
        ledger.record_usage(_row("before", tokens=5))
    ready = tmp_path / "in-transaction"
    process = multiprocessing.get_context("spawn").Process(target=_killed_writer, args=(url, str(ready)))
    process.start()
    deadline = time.time() + 60
    while not ready.exists() and time.time() < deadline and process.is_alive():
        time.sleep(0.01)
    assert ready.exists(), "the writer never got inside its transaction"
    assert process.pid is not None
    os.kill(process.pid, signal.SIGKILL)
    process.join(10)
    assert process.exitcode == -signal.SIGKILL
    started = time.perf_counter()
    with open_ledger(url) as ledger:
        # the next writer gets the write lock at once, and sees only what was committed
        allowance = budget.reserve(ledger, domain="deepgemm", limit=10_000, tokens=100)
        assert allowance.allowed
        assert ledger.record_usage(_row("after", tokens=7))
        rows = ledger.usage()
    assert [r.request_id for r in rows] == ["before", "after"]
    assert time.perf_counter() - started < 10
