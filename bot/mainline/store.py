"""Main's record in the ledger: commits, case figures, resources, drift checks and bisections; reads for the
dashboard."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bot.ledger.db import Database, now
from bot.ledger.store import Ledger, acceptance_row
from bot.mainline.bisect import BisectReport
from bot.mainline.drift import DriftCheck
from bot.mainline.record import MainCommit, ResourceFigure
from bot.models.ledger import AcceptanceRow, CaseFigure
from bot.models.report import Report

_FIGURE_COLUMNS = list(CaseFigure.model_fields)
_RESOURCE_COLUMNS = list(ResourceFigure.model_fields)
_CHECK_COLUMNS = list(DriftCheck.model_fields)


@dataclass(frozen=True)
class StoredReview:
    """A review as the ledger keeps it: its row id, when it was recorded, and the report."""

    id: int
    created_at: str
    report: Report


def _upsert(table: str, columns: list[str], conflict: str) -> str:
    keys = {c.strip() for c in conflict.split(",")}
    updates = ", ".join(f"{c} = excluded.{c}" for c in columns if c not in keys)
    marks = ", ".join("?" for _ in columns)
    return (
        f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks}) ON CONFLICT ({conflict}) DO UPDATE SET {updates}"
    )


class History:
    """Main's per-commit figures over one ledger (the Ledger's migrations created the tables)."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger
        self.db: Database = ledger.db

    # -- main's record ------------------------------------------------------------------------

    def record(self, commit: MainCommit, cases: list[CaseFigure], resources: list[ResourceFigure]) -> None:
        """Store one main commit and its figures in one transaction; recording it again replaces them."""
        stamp = commit.recorded_at or now()
        row = {**commit.model_dump(), "recorded_at": stamp}
        with self.db.transaction() as tx:
            tx.execute(_upsert("main_commits", list(row), "sha"), list(row.values()))
            for f in cases:
                data = {**f.model_dump(), "recorded_at": stamp}
                tx.execute(
                    _upsert("main_figures", list(data), "sha, kernel, case_name, device_name"), list(data.values())
                )
            for r in resources:
                data = r.model_dump()
                tx.execute(_upsert("main_resources", list(data), "sha, kernel, function, arch"), list(data.values()))

    def commits(self) -> list[MainCommit]:
        rows = self.db.rows("SELECT * FROM main_commits ORDER BY committed_at, recorded_at")
        return [MainCommit.model_validate(r) for r in rows]

    def figures(self, *, kernel: str | None = None) -> list[CaseFigure]:
        """Every case figure (of one kernel), oldest commit first."""
        where, params = (" WHERE kernel = ?", [kernel]) if kernel else ("", [])
        rows = self.db.rows(
            f"SELECT {', '.join(_FIGURE_COLUMNS)} FROM main_figures{where} ORDER BY committed_at, id", params
        )
        return [CaseFigure.model_validate(r) for r in rows]

    def resources(self) -> list[ResourceFigure]:
        rows = self.db.rows(f"SELECT {', '.join(_RESOURCE_COLUMNS)} FROM main_resources ORDER BY committed_at, id")
        return [ResourceFigure.model_validate(r) for r in rows]

    def pr_of_head(self, sha: str) -> int | None:
        """The pull request whose reviewed head is `sha` (a rebase or fast-forward merge keeps the SHA)."""
        row = self.db.one(
            "SELECT pr FROM reviews WHERE head_sha = ? AND pr IS NOT NULL ORDER BY id DESC LIMIT 1", (sha,)
        )
        return int(row["pr"]) if row else None

    # -- drift checks -------------------------------------------------------------------------

    def record_checks(self, rows: list[DriftCheck]) -> None:
        with self.db.transaction() as tx:
            for row in rows:
                data = {**row.model_dump(), "flagged": int(row.flagged)}
                marks = ", ".join("?" for _ in data)
                tx.execute(f"INSERT INTO drift_checks ({', '.join(data)}) VALUES ({marks})", list(data.values()))

    def latest_checks(self) -> list[DriftCheck]:
        """The rows of the latest drift run (empty when drift was never checked)."""
        last = self.db.one("SELECT MAX(checked_at) AS t FROM drift_checks")
        if not last or last["t"] is None:
            return []
        rows = self.db.rows(
            f"SELECT {', '.join(_CHECK_COLUMNS)} FROM drift_checks WHERE checked_at = ? ORDER BY drift_pct DESC, id",
            (last["t"],),
        )
        return [DriftCheck.model_validate({**r, "flagged": bool(r["flagged"])}) for r in rows]

    # -- bisections ---------------------------------------------------------------------------

    def record_bisection(self, report: BisectReport) -> None:
        """Keep one bisection (a later one of the same range is read first)."""
        first_bad = report.first_bad.sha if report.first_bad is not None else ""
        with self.db.transaction() as tx:
            tx.execute(
                "INSERT INTO bisections (created_at, kernel, case_name, device_name, good_sha, bad_sha, verdict,"
                " first_bad_sha, report_json) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    report.created_at or now(),
                    report.kernel,
                    report.case_name,
                    report.device_name,
                    report.good_sha,
                    report.bad_sha,
                    report.verdict,
                    first_bad,
                    report.to_json(),
                ),
            )

    def bisection(self, kernel: str, case_name: str, device_name: str, good: str, bad: str) -> BisectReport | None:
        """The latest bisection of one case over exactly (good, bad]; None when it was never bisected."""
        row = self.db.one(
            "SELECT report_json FROM bisections WHERE kernel = ? AND case_name = ? AND device_name = ?"
            " AND good_sha = ? AND bad_sha = ? ORDER BY id DESC LIMIT 1",
            (kernel, case_name, device_name, good, bad),
        )
        return BisectReport.model_validate_json(row["report_json"]) if row else None

    # -- what the dashboard reads --------------------------------------------------------------

    def pull_request_reviews(self) -> list[StoredReview]:
        """Every recorded review of a pull request, oldest first."""
        rows = self.db.rows("SELECT id, created_at, report_json FROM reviews WHERE pr IS NOT NULL ORDER BY id")
        return [StoredReview(int(r["id"]), r["created_at"], Report.model_validate_json(r["report_json"])) for r in rows]

    def acceptances(self) -> list[AcceptanceRow]:
        """Every granted /accept, of every pull request, oldest first."""
        rows = self.db.rows("SELECT * FROM acceptances ORDER BY id")
        return [acceptance_row(r) for r in rows]

    def has_table(self, name: str) -> bool:
        if self.db.dialect == "sqlite":
            row = self.db.one("SELECT name FROM sqlite_master WHERE type = 'table' AND name = ?", (name,))
        else:
            row = self.db.one(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()"
                " AND table_name = ?",
                (name,),
            )
        return row is not None

    def table_rows(self, name: str, limit: int = 500) -> list[dict[str, Any]]:
        """The newest rows of a table another feature owns (read as they are; `name` comes from our code)."""
        if not name.replace("_", "").isalnum():
            raise ValueError(f"not a table name: {name!r}")
        return self.db.rows(f"SELECT * FROM {name} ORDER BY 1 DESC LIMIT ?", (limit,))
