"""Main's record in the ledger (bot/mainline/store.py), SQLite and PostgreSQL: figures, drift checks, overrides."""

from __future__ import annotations

import pytest

from bot.ledger import open_ledger
from bot.mainline.drift import drift
from bot.mainline.record import ResourceFigure
from bot.mainline.store import History
from bot.models.ledger import AcceptanceRow
from tests.mainline_world import REF, commit, sha, step
from tests.pg import pg_cluster, pg_url  # noqa: F401  (fixtures)


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request: pytest.FixtureRequest, tmp_path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "l.sqlite")
    return str(request.getfixturevalue("pg_url"))


def test_main_figures_round_trip_and_recording_a_commit_again_replaces_them(url):
    with open_ledger(url) as ledger:
        store = History(ledger)
        res = ResourceFigure(sha=sha(1), kernel="deepgemm_tile", function="k", registers=90, committed_at="2026-02-01")
        store.record(commit(1, pr=11), [step(1, 1.0)], [res])
        store.record(commit(1, pr=11), [step(1, 2.0)], [res.model_copy(update={"registers": 92})])
        store.record(commit(2), [step(2, 0.5)], [])
        assert [c.sha for c in store.commits()] == [sha(1), sha(2)] and store.commits()[0].pr == 11
        assert [(f.sha, f.regression_pct) for f in store.figures()] == [(sha(1), 2.0), (sha(2), 0.5)]
        assert [r.registers for r in store.resources()] == [92]
        assert store.figures(kernel="other") == []
        assert store.has_table("main_figures") and store.has_table("tuning_trials") and not store.has_table("nothing")


def test_the_latest_drift_check_and_every_override_are_read_back(url):
    from bot.mainline.drift import checks

    with open_ledger(url) as ledger:
        store = History(ledger)
        (d,) = drift(REF, [sha(1), sha(2)], [step(1, 3.0), step(2, 3.0)], {})
        store.record_checks(checks([d], "2026-03-01T00:00:00+00:00", {}))
        store.record_checks(checks([d], "2026-03-02T00:00:00+00:00", {"deepgemm_tile": "https://x/issues/1"}))
        (latest,) = store.latest_checks()
        assert (latest.checked_at, latest.flagged, latest.issue_url) == (
            "2026-03-02T00:00:00+00:00",
            True,
            "https://x/issues/1",
        )
        ledger.record_acceptance(
            AcceptanceRow(pr=5, head_sha="h" * 40, login="a", role="admin", kernels=[], override=True, comment_id=9)
        )
        assert [(a.pr, a.override) for a in store.acceptances()] == [(5, True)]
