"""Weekly budgets enforced before spend: the pure allowance, and 8 processes racing one budget on SQLite
and on PostgreSQL without the settled total ever exceeding it."""

from __future__ import annotations

import multiprocessing
import random
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from bot.ledger import MIGRATIONS, open_ledger
from bot.models.ledger import ReservationRow, UsageRow
from bot.spend import budget
from tests.pg import pg_cluster, pg_url  # noqa: F401  (fixtures)

NOW = datetime(2026, 3, 4, 12, 0, tzinfo=UTC)  # Wednesday of 2026-W10
PROCESSES = 8
RACE_LIMIT = 150_000


def _reservation(call_id: str, tokens: int, state: str = "reserved", created: datetime = NOW) -> ReservationRow:
    stamp = created.isoformat(timespec="seconds")
    return ReservationRow(
        call_id=call_id,
        domain="deepgemm",
        week="2026-W10",
        reserved_tokens=tokens,
        state=state,  # type: ignore[arg-type]
        created_at=stamp,
        updated_at=stamp,
    )


def test_iso_weeks_and_their_bounds():
    assert budget.iso_week(NOW) == "2026-W10"
    assert budget.week_start("2026-W10") == datetime(2026, 3, 2, tzinfo=UTC)
    assert budget.week_bounds("2026-W01") == ("2025-12-29T00:00:00+00:00", "2026-01-05T00:00:00+00:00")
    for bad in ("2026-10", "2026-W1", "week 10", "2026-W54"):
        with pytest.raises(ValueError):
            budget.week_start(bad)


def test_a_request_is_allowed_only_when_it_fits_beside_what_is_spent_and_reserved():
    rows = [_reservation("a", 30_000), _reservation("b", 5_000, "settled"), _reservation("c", 9_000, "released")]
    state = budget.tally(rows, spent=60_000, domain="deepgemm", week="2026-W10", limit=100_000, now=NOW, ttl_s=3600)
    assert (state.used, state.reserved, state.left) == (60_000, 30_000, 10_000)
    assert budget.check(state, 10_000).allowed
    refused = budget.check(state, 10_001)
    assert not refused.allowed and "60000 used + 30000 reserved of 100000" in refused.reason


def test_an_abandoned_reservation_stops_counting_after_its_ttl():
    stale = _reservation("old", 50_000, created=NOW - timedelta(hours=2))
    state = budget.tally([stale], spent=0, domain="deepgemm", week="2026-W10", limit=60_000, now=NOW, ttl_s=3600)
    assert state.reserved == 0


def test_the_reservation_covers_the_completion_cap_and_a_margin_learned_from_the_ledger():
    assert budget.reservation_size(1000, 2048) == 1200 + 2048
    assert budget.reservation_size(1000, 2048, [0.9, 1.5, 1.1]) == 1500 + 2048
    assert budget.reservation_size(1000, 2048, [9.0]) == 3000 + 2048  # capped


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "budget.sqlite")
    return str(request.getfixturevalue("pg_url"))


def test_reserve_settle_and_release_against_the_ledger(url):
    with open_ledger(url) as ledger:
        first = budget.reserve(ledger, domain="flashmla", limit=10_000, tokens=6_000, now=NOW)
        assert first.allowed and first.call_id
        second = budget.reserve(ledger, domain="flashmla", limit=10_000, tokens=6_000, now=NOW)
        assert not second.allowed and second.call_id is None  # 6,000 are held by the first
        assert budget.release(ledger, first.call_id) and not budget.release(ledger, first.call_id)
        third = budget.reserve(ledger, domain="flashmla", limit=10_000, tokens=6_000, now=NOW)
        assert third.allowed and third.call_id
        ledger.record_usage(_row("u1", "flashmla", 4_000, NOW))
        assert budget.settle(ledger, third.call_id, 4_000)
        state = budget.state(ledger, domain="flashmla", limit=10_000, now=NOW)
        assert (state.used, state.reserved, state.left) == (4_000, 0, 6_000)
        assert budget.state(ledger, domain="deepgemm", limit=10_000, now=NOW).used == 0
        next_week = budget.state(ledger, domain="flashmla", limit=10_000, now=NOW + timedelta(days=7))
        assert next_week.used == 0


def _row(request_id: str, domain: str, tokens: int, when: datetime) -> UsageRow:
    return UsageRow(
        task_id="race",
        model_name="m",
        prompt_tokens=tokens,
        completion_tokens=0,
        total_tokens=tokens,
        request_id=request_id,
        domain=domain,
        key_fingerprint="sha256:race",
        pr=None,
        head_sha="0" * 40,
        status="ok",
        created_at=when.isoformat(timespec="seconds"),
    )


def _barrier(folder: str, worker: int) -> None:
    """Every racer connected before any reserves: each drops a file and waits for all of them."""
    (Path(folder) / str(worker)).touch()
    deadline = time.time() + 120
    while len(list(Path(folder).iterdir())) < PROCESSES and time.time() < deadline:
        time.sleep(0.01)


def _racer(url: str, worker: int, ready: str) -> tuple[int, int, int]:
    """One reviewer process: reserve, spend up to what it reserved, settle; until the budget refuses it."""
    rng = random.Random(worker)
    spent = granted = refused = 0
    with open_ledger(url) as ledger:
        _barrier(ready, worker)
        while refused < 3:
            want = rng.randint(2_000, 9_000)
            allowance = budget.reserve(ledger, domain="deepgemm", limit=RACE_LIMIT, tokens=want)
            if not allowance.allowed or allowance.call_id is None:
                refused += 1
                continue
            granted += 1
            used = rng.randint(want // 2, want)
            time.sleep(rng.random() * 0.01)  # the "gateway call": others reserve meanwhile
            ledger.record_usage(_row(f"race-{worker}-{granted}", "deepgemm", used, datetime.now(UTC)))
            budget.settle(ledger, allowance.call_id, used)
            spent += used
    return spent, granted, refused


def test_eight_processes_racing_one_budget_never_settle_more_than_it(url, tmp_path):
    open_ledger(url).close()  # migrate once up front (racing migrators are tested below)
    ready = tmp_path / "ready"
    ready.mkdir()
    started = time.perf_counter()
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(PROCESSES) as pool:
        results = pool.starmap(_racer, [(url, w, str(ready)) for w in range(PROCESSES)])
    seconds = time.perf_counter() - started
    with open_ledger(url) as ledger:
        rows = ledger.usage(domain="deepgemm")
        settled = sum(r.total_tokens for r in rows)
        open_reservations = [
            r for r in ledger.reservations(week=budget.iso_week(datetime.now(UTC))) if r.state == "reserved"
        ]
    assert settled == sum(spent for spent, _, _ in results)
    assert settled <= RACE_LIMIT, f"overshoot: {settled} settled against a budget of {RACE_LIMIT}"
    assert settled > RACE_LIMIT * 0.9  # the budget was really contended and used up
    assert sum(1 for _, granted, _ in results if granted) >= 2 and open_reservations == []
    print(
        f"\nrace on {url.split(':')[0] if '://' in url else 'sqlite'}: {PROCESSES} processes, "
        f"{sum(g for _, g, _ in results)} reservations granted, {sum(r for _, _, r in results)} refused, "
        f"settled {settled} of {RACE_LIMIT} in {seconds:.1f} s"
    )


def test_migrating_processes_do_not_trip_over_each_other(url):
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(4) as pool:
        pool.map(_open_and_close, [url] * 4)
    with open_ledger(url) as ledger:
        assert len(ledger.db.rows("SELECT version FROM schema_migrations")) == len(MIGRATIONS)


def _open_and_close(url: str) -> None:
    open_ledger(url).close()
