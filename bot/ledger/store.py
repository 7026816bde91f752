"""The ledger: agent usage, reviews, verdicts, acceptances, budget reservations and cached replies."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bot.ledger.db import Database, now
from bot.ledger.schema import MIGRATIONS
from bot.models.ledger import (
    AcceptanceRow,
    BaselineRow,
    CachedReply,
    CaseFigure,
    ExpectationRow,
    MainResourceRow,
    ProposalRow,
    ReservationRow,
    UsageRow,
    VerdictRow,
)
from bot.models.report import Report

_USAGE_COLUMNS = list(UsageRow.model_fields)
_EXPECTATION_COLUMNS = list(ExpectationRow.model_fields)
_PROPOSAL_COLUMNS = ["created_at", "domain", "kernel", "kind", "name", "verdict", "passed"]


def open_ledger(url: str, *, create: bool = False) -> Ledger:
    """The ledger named by OPGATE_DATABASE_URL: a SQLite path, sqlite:///path or postgresql://…; a SQLite
    file's folder must exist unless `create`."""
    return Ledger(Database.open(url, create=create))


class Ledger:
    """One database; every write is its own transaction (the budget's reserve step holds a row lock)."""

    def __init__(self, target: Path | str | Database) -> None:
        if isinstance(target, Database):
            self.db = target
        else:
            self.db = Database.open(str(target), create=True)
        self.path = Path(self.db.where) if self.db.dialect == "sqlite" else None
        self.db.migrate(MIGRATIONS)

    @property
    def dialect(self) -> str:
        return self.db.dialect

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- agent usage --------------------------------------------------------------------------

    def record_usage(self, row: UsageRow) -> bool:
        """Insert one usage row; a repeated request id is ignored (returns False)."""
        data = row.model_dump()
        data["created_at"] = data["created_at"] or now()
        data["cached"] = int(data["cached"])
        cols = ", ".join(data)
        marks = ", ".join("?" for _ in data)
        changed = self.db.execute(
            f"INSERT INTO operator_agent_usage ({cols}) VALUES ({marks}) ON CONFLICT (request_id) DO NOTHING",
            list(data.values()),
        )
        return changed == 1

    def usage(self, *, domain: str | None = None, since: str | None = None) -> list[UsageRow]:
        """Usage rows in insertion order, optionally for one domain and from an ISO timestamp on."""
        where, params = _filters(domain=domain, since=since)
        cols = ", ".join(_USAGE_COLUMNS)
        rows = self.db.rows(f"SELECT {cols} FROM operator_agent_usage{where} ORDER BY id", params)
        return [UsageRow.model_validate(r) for r in rows]

    def estimate_ratios(self, domain: str, limit: int = 20) -> list[float]:
        """Reported ÷ estimated prompt tokens of the domain's latest answered requests (newest first)."""
        rows = self.db.rows(
            "SELECT estimate_ratio FROM operator_agent_usage WHERE domain = ? AND estimate_ratio IS NOT NULL"
            " ORDER BY id DESC LIMIT ?",
            (domain, limit),
        )
        return [float(r["estimate_ratio"]) for r in rows]

    # -- reviews and verdicts -----------------------------------------------------------------

    def record_review(self, report: Report) -> int:
        """The review, its kernels' verdicts, its agents' expectations beside the measurements and what the agent
        proposed that was judged (candidate patches), in one transaction; those rows are dated when the review ran
        (the report's created_at)."""
        created = report.created_at or now()
        with self.db.transaction() as tx:
            row = tx.one(
                "INSERT INTO reviews (created_at, base_sha, head_sha, pr, verdict, report_json)"
                " VALUES (?, ?, ?, ?, ?, ?) RETURNING id",
                (now(), report.base_sha, report.head_sha, report.pr, report.verdict, report.to_json()),
            )
            review_id = int(row["id"]) if row else 0
            for k in report.kernels:
                tx.execute(
                    "INSERT INTO verdicts (review_id, kernel, domain, changed, verdict, reasons_json)"
                    " VALUES (?, ?, ?, ?, ?, ?)",
                    (review_id, k.name, k.domain, int(k.changed), k.verdict, json.dumps(k.reasons)),
                )
            for e in expectation_rows(report, review_id, created):
                data = e.model_dump()
                tx.execute(
                    f"INSERT INTO agent_expectations ({', '.join(data)}) VALUES ({', '.join('?' for _ in data)})",
                    list(data.values()),
                )
            for p in proposal_rows(report, created):
                tx.execute(
                    f"INSERT INTO agent_proposals (review_id, {', '.join(_PROPOSAL_COLUMNS)})"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (review_id, p.created_at, p.domain, p.kernel, p.kind, p.name, p.verdict, int(p.passed)),
                )
        return review_id

    def record_expectations(self, rows: list[ExpectationRow], tx: Database | None = None) -> None:
        """Expectation rows outside a review (an `opgate tune` candidate's), in `tx` when given."""
        db = tx or self.db
        for e in rows:
            data = e.model_dump()
            data["created_at"] = data["created_at"] or now()
            db.execute(
                f"INSERT INTO agent_expectations ({', '.join(data)}) VALUES ({', '.join('?' for _ in data)})",
                list(data.values()),
            )

    def tune_expectations(self, run_id: str, candidate_key: str) -> list[ExpectationRow]:
        """A tuning run's expectations of one candidate, in insertion order."""
        cols = ", ".join(_EXPECTATION_COLUMNS)
        rows = self.db.rows(
            f"SELECT {cols} FROM agent_expectations WHERE tuning_run = ? AND candidate_key = ? ORDER BY id",
            (run_id, candidate_key),
        )
        return [ExpectationRow.model_validate(r) for r in rows]

    def expectations(self, *, since: str | None = None, domain: str | None = None) -> list[ExpectationRow]:
        """The agent's expected metrics beside what was measured, every recorded review's, in insertion order."""
        where, params = _filters(domain=domain, since=since)
        cols = ", ".join(_EXPECTATION_COLUMNS)
        rows = self.db.rows(f"SELECT {cols} FROM agent_expectations{where} ORDER BY id", params)
        return [ExpectationRow.model_validate(r) for r in rows]

    def proposals(self, *, since: str | None = None) -> list[ProposalRow]:
        """What the agent proposed and the local runner judged: the candidates and agent cases of recorded reviews,
        then each `opgate tune` winner the agent proposed: the run's re-verification of a candidate that the run's
        agent proposed (passed: the re-verification passed every gate). The search's other candidates are the
        agent's exploration, not what it proposes."""
        where, params = _filters(since=since)
        rows = self.db.rows(f"SELECT {', '.join(_PROPOSAL_COLUMNS)} FROM agent_proposals{where} ORDER BY id", params)
        tune_where, tune_params = ("AND t.created_at >= ?", [since]) if since else ("", [])
        rows += self.db.rows(
            "SELECT t.created_at, r.domain, t.kernel, 'tune' AS kind, t.candidate_key AS name, t.verdict,"
            " CASE WHEN t.verdict = 'pass' THEN 1 ELSE 0 END AS passed"
            " FROM tuning_trials t JOIN tuning_runs r ON r.run_id = t.verify_of"
            " WHERE t.verify_of <> '' AND EXISTS (SELECT 1 FROM tuning_rounds e WHERE e.run_id = t.verify_of"
            f" AND e.source = 'agent' AND e.candidate_key = t.candidate_key) {tune_where} ORDER BY t.id",
            tune_params,
        )
        return [ProposalRow.model_validate({**r, "passed": bool(r["passed"])}) for r in rows]

    def latest_review(self, head_sha: str) -> Report | None:
        row = self.db.one("SELECT report_json FROM reviews WHERE head_sha = ? ORDER BY id DESC LIMIT 1", (head_sha,))
        return Report.model_validate_json(row["report_json"]) if row else None

    def verdicts(self, *, since: str | None = None) -> list[VerdictRow]:
        """Every kernel verdict of every recorded review (from an ISO timestamp on)."""
        where, params = ("WHERE r.created_at >= ?", [since]) if since else ("", [])
        rows = self.db.rows(
            "SELECT v.review_id, v.kernel, v.domain, v.changed, v.verdict, r.created_at"
            f" FROM verdicts v JOIN reviews r ON r.id = v.review_id {where} ORDER BY v.id",
            params,
        )
        return [VerdictRow.model_validate({**r, "changed": bool(r["changed"])}) for r in rows]

    # -- acceptances --------------------------------------------------------------------------

    def record_acceptance(self, row: AcceptanceRow) -> bool:
        """Insert one acceptance; the same comment id twice is ignored (returns False)."""
        changed = self.db.execute(
            "INSERT INTO acceptances (created_at, pr, head_sha, login, role, kernels_json, override, reason,"
            " comment_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (comment_id) DO NOTHING",
            (
                row.created_at or now(),
                row.pr,
                row.head_sha,
                row.login,
                row.role,
                json.dumps(row.kernels),
                int(row.override),
                row.reason,
                row.comment_id,
            ),
        )
        return changed == 1

    def acceptances(self, pr: int) -> list[AcceptanceRow]:
        rows = self.db.rows("SELECT * FROM acceptances WHERE pr = ? ORDER BY id", (pr,))
        return [acceptance_row(r) for r in rows]

    # -- budget rows (callers hold a transaction: see bot.budget) -----------------------------

    def lock_budget(self, tx: Database, domain: str, week: str, limit_tokens: int) -> None:
        """Create the domain's budget row for the week if missing, then lock it for this transaction.

        SQLite: the caller's `BEGIN IMMEDIATE` already holds the database's write lock.
        PostgreSQL: `SELECT … FOR UPDATE` holds this row until commit; other reservers wait on it.
        """
        tx.execute(
            "INSERT INTO agent_budgets (domain, week, limit_tokens, updated_at) VALUES (?, ?, ?, ?)"
            " ON CONFLICT (domain, week) DO NOTHING",
            (domain, week, limit_tokens, now()),
        )
        lock = " FOR UPDATE" if tx.dialect == "postgresql" else ""
        row = tx.one(f"SELECT limit_tokens FROM agent_budgets WHERE domain = ? AND week = ?{lock}", (domain, week))
        if row and int(row["limit_tokens"]) != limit_tokens:
            tx.execute(
                "UPDATE agent_budgets SET limit_tokens = ?, updated_at = ? WHERE domain = ? AND week = ?",
                (limit_tokens, now(), domain, week),
            )

    def reservations(self, *, week: str, domain: str | None = None, tx: Database | None = None) -> list[ReservationRow]:
        """The week's reservations (read inside `tx` when given, i.e. under the budget row's lock)."""
        where, params = _filters(domain=domain)
        where = (where + " AND" if where else " WHERE") + " week = ?"
        rows = (tx or self.db).rows(
            "SELECT call_id, domain, week, reserved_tokens, settled_tokens, state, created_at, updated_at"
            f" FROM agent_reservations{where} ORDER BY id",
            [*params, week],
        )
        return [ReservationRow.model_validate(r) for r in rows]

    def spent(self, domain: str, start: str, end: str, tx: Database | None = None) -> int:
        """Tokens of every usage row of the domain with start <= created_at < end (ISO timestamps, UTC)."""
        row = (tx or self.db).one(
            "SELECT COALESCE(SUM(total_tokens), 0) AS spent FROM operator_agent_usage"
            " WHERE domain = ? AND created_at >= ? AND created_at < ?",
            (domain, start, end),
        )
        return int(row["spent"]) if row else 0

    def add_reservation(self, tx: Database, row: ReservationRow) -> None:
        tx.execute(
            "INSERT INTO agent_reservations (call_id, domain, week, reserved_tokens, settled_tokens, state,"
            " created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                row.call_id,
                row.domain,
                row.week,
                row.reserved_tokens,
                row.settled_tokens,
                row.state,
                row.created_at,
                row.updated_at,
            ),
        )

    def close_reservation(self, call_id: str, state: str, settled_tokens: int | None) -> bool:
        """Settle or release a reservation that is still open; returns False when it was not open."""
        changed = self.db.execute(
            "UPDATE agent_reservations SET state = ?, settled_tokens = ?, updated_at = ?"
            " WHERE call_id = ? AND state = 'reserved'",
            (state, settled_tokens, now(), call_id),
        )
        return changed == 1

    # -- base measurements ------------------------------------------------------------------

    def record_baseline(self, row: BaselineRow) -> None:
        data = {**row.model_dump(), "created_at": row.created_at or now()}
        cols = ", ".join(data)
        self.db.execute(f"INSERT INTO baselines ({cols}) VALUES ({', '.join('?' for _ in data)})", list(data.values()))

    def baseline(self, cache_key: str) -> BaselineRow | None:
        """The earliest base measurement under this key (the reference the runner is compared with)."""
        row = self.db.one("SELECT * FROM baselines WHERE cache_key = ? ORDER BY id LIMIT 1", (cache_key,))
        return BaselineRow.model_validate({k: v for k, v in row.items() if k != "id"}) if row else None

    # -- main's history, as the agent's prompt reads it ----------------------------------------

    def main_case_figures(self, kernel: str, prefer_sha: str | None = None) -> list[CaseFigure]:
        """One kernel's case figures at one main commit: `prefer_sha` when main's history holds it, else the latest
        commit that has figures of the kernel; empty when none was recorded (bot/mainline writes them)."""
        sha = self._main_sha("main_figures", kernel, prefer_sha)
        if sha is None:
            return []
        rows = self.db.rows(
            "SELECT * FROM main_figures WHERE kernel = ? AND sha = ? ORDER BY device_name, id", (kernel, sha)
        )
        return [CaseFigure.model_validate(r) for r in rows]

    def main_resource_figures(self, kernel: str, prefer_sha: str | None = None) -> list[MainResourceRow]:
        """One kernel's compiled functions at one main commit (chosen as main_case_figures chooses), per arch."""
        sha = self._main_sha("main_resources", kernel, prefer_sha)
        if sha is None:
            return []
        rows = self.db.rows(
            "SELECT * FROM main_resources WHERE kernel = ? AND sha = ? ORDER BY arch, function", (kernel, sha)
        )
        return [MainResourceRow.model_validate(r) for r in rows]

    def _main_sha(self, table: str, kernel: str, prefer_sha: str | None) -> str | None:
        if prefer_sha and self.db.one(f"SELECT 1 AS x FROM {table} WHERE kernel = ? AND sha = ?", (kernel, prefer_sha)):
            return prefer_sha
        row = self.db.one(
            f"SELECT sha FROM {table} WHERE kernel = ? ORDER BY committed_at DESC, id DESC LIMIT 1", (kernel,)
        )
        return str(row["sha"]) if row else None

    # -- response cache -----------------------------------------------------------------------

    def cached_reply(self, cache_key: str) -> CachedReply | None:
        row = self.db.one("SELECT * FROM agent_response_cache WHERE cache_key = ?", (cache_key,))
        return CachedReply.model_validate(row) if row else None

    def store_reply(self, reply: CachedReply) -> None:
        data = reply.model_dump()
        cols = ", ".join(data)
        marks = ", ".join("?" for _ in data)
        self.db.execute(
            f"INSERT INTO agent_response_cache ({cols}) VALUES ({marks}) ON CONFLICT (cache_key) DO NOTHING",
            list(data.values()),
        )


def expectation_rows(report: Report, review_id: int, created_at: str) -> list[ExpectationRow]:
    """Each kernel agent's expectation checks as ledger rows."""
    return [
        ExpectationRow(
            review_id=review_id,
            created_at=created_at,
            head_sha=report.head_sha,
            pr=report.pr,
            kernel=a.kernel or "",
            domain=a.domain or "",
            metric=c.metric,
            expected=json.dumps(c.expected),
            **c.model_dump(exclude={"metric", "expected"}),
        )
        for a in report.agents
        for c in a.expectations
    ]


def proposal_rows(report: Report, created_at: str) -> list[ProposalRow]:
    """What the agent proposed that the review judged: its candidate patches (`--try-candidates`), passed when every
    gate passed, and the cases of its test matrix the judge ran, passed when one found a bug of head that base does
    not have (verdict `fail`); a case head passes, or one base fails too, found nothing. A refused or not judged
    entry was not judged: no row."""
    rows = [
        ProposalRow(
            created_at=created_at,
            domain=k.domain,
            kernel=k.name,
            kind="candidate",
            name=k.name,
            verdict=k.candidate.verdict,
            passed=k.candidate.verdict == "pass",
        )
        for k in report.kernels
        if k.candidate is not None
    ]
    rows += [
        ProposalRow(
            created_at=created_at,
            domain=k.domain,
            kernel=k.name,
            kind="agent_case",
            name=c.name,
            verdict=c.verdict,
            passed=c.verdict == "fail",
        )
        for k in report.kernels
        if k.agent_cases is not None
        for c in k.agent_cases.cases
        if c.verdict != "not_judged"
    ]
    return rows


def acceptance_row(r: dict[str, Any]) -> AcceptanceRow:
    """One row of `acceptances` as the model."""
    return AcceptanceRow(
        pr=r["pr"],
        head_sha=r["head_sha"],
        login=r["login"],
        role=r["role"],
        kernels=json.loads(r["kernels_json"]),
        override=bool(r["override"]),
        reason=r["reason"],
        comment_id=r["comment_id"],
        created_at=r["created_at"],
    )


def _filters(*, domain: str | None = None, since: str | None = None) -> tuple[str, list[object]]:
    clauses: list[str] = []
    params: list[object] = []
    if domain is not None:
        clauses.append("domain = ?")
        params.append(domain)
    if since is not None:
        clauses.append("created_at >= ?")
        params.append(since)
    return (" WHERE " + " AND ".join(clauses) if clauses else "", params)
