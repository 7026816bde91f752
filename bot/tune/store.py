"""Tuning runs in the ledger: runs, rounds, trials and their cases (migration 5), so a run resumes after a crash."""

from __future__ import annotations

import json
import uuid
from typing import Any

from pydantic import BaseModel

from bot.ledger.db import Database, now
from bot.ledger.store import Ledger
from bot.models.agent_report import ExpectationCheck
from bot.models.ledger import ExpectationRow
from bot.tune.model import CaseResult, RoundEvent, Stop, Trial

_EVENT_COLUMNS = ["seq", "round", "source", "outcome", "candidate_key", "tokens", "elapsed_s", "detail"]


class RunRow(BaseModel):
    """One `opgate tune` run: what it searches, how far it may go, and how it ended."""

    run_id: str
    kernel: str
    domain: str
    base_sha: str
    device_name: str
    strategy: str
    max_rounds: int
    token_limit: int
    state: str  # running | done
    stop: str = ""
    stop_detail: str = ""
    handover: bool = False
    best_key: str = ""
    best_speedup: float | None = None
    pull_url: str = ""
    created_at: str = ""
    updated_at: str = ""


class TokenSpend(BaseModel):
    requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0


class TuningStore:
    """The tuning tables of one ledger (the Ledger's migrations created them)."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger
        self.db: Database = ledger.db

    # -- runs ---------------------------------------------------------------------------------

    def open_run(
        self,
        *,
        kernel: str,
        domain: str,
        base_sha: str,
        device_name: str,
        strategy: str,
        max_rounds: int,
        token_limit: int,
    ) -> tuple[RunRow, bool]:
        """The unfinished run of the same kernel, base, device and strategy (resumed, with these limits), else a
        new one. Returns the run and whether it was resumed."""
        row = self.db.one(
            "SELECT * FROM tuning_runs WHERE kernel = ? AND base_sha = ? AND device_name = ? AND strategy = ?"
            " AND state = 'running' ORDER BY created_at DESC, run_id DESC LIMIT 1",
            (kernel, base_sha, device_name, strategy),
        )
        stamp = now()
        if row is not None:
            self.db.execute(
                "UPDATE tuning_runs SET max_rounds = ?, token_limit = ?, updated_at = ? WHERE run_id = ?",
                (max_rounds, token_limit, stamp, row["run_id"]),
            )
            return self.run(str(row["run_id"])), True
        run = RunRow(
            run_id=f"tune-{kernel}-{base_sha[:8]}-{uuid.uuid4().hex[:6]}",
            kernel=kernel,
            domain=domain,
            base_sha=base_sha,
            device_name=device_name,
            strategy=strategy,
            max_rounds=max_rounds,
            token_limit=token_limit,
            state="running",
            created_at=stamp,
            updated_at=stamp,
        )
        data = {**run.model_dump(), "handover": int(run.handover)}
        cols = ", ".join(data)
        self.db.execute(
            f"INSERT INTO tuning_runs ({cols}) VALUES ({', '.join('?' for _ in data)})", list(data.values())
        )
        return run, False

    def run(self, run_id: str) -> RunRow:
        row = self.db.one("SELECT * FROM tuning_runs WHERE run_id = ?", (run_id,))
        if row is None:
            raise KeyError(run_id)
        return RunRow.model_validate({**row, "handover": bool(row["handover"])})

    def runs(self) -> list[RunRow]:
        rows = self.db.rows("SELECT * FROM tuning_runs ORDER BY created_at")
        return [RunRow.model_validate({**r, "handover": bool(r["handover"])}) for r in rows]

    def set_stop(self, run_id: str, stop: Stop) -> None:
        """Record a phase's stop (`both`: the agent phase's, so a resumed run goes on with the sweep)."""
        self.db.execute(
            "UPDATE tuning_runs SET stop = ?, stop_detail = ?, handover = ?, updated_at = ? WHERE run_id = ?",
            (stop.kind, stop.detail, int(stop.handover), now(), run_id),
        )

    def finish(self, run_id: str, stop: Stop, best: Trial | None) -> None:
        self.db.execute(
            "UPDATE tuning_runs SET state = 'done', stop = ?, stop_detail = ?, handover = ?, best_key = ?,"
            " best_speedup = ?, updated_at = ? WHERE run_id = ?",
            (stop.kind, stop.detail, int(stop.handover), best.key if best else "", best.speedup if best else None,
             now(), run_id),
        )  # fmt: skip

    @staticmethod
    def stop_of(run: RunRow) -> Stop | None:
        """The stop a run recorded (None while its first phase still runs)."""
        if not run.stop:
            return None
        return Stop(kind=run.stop, detail=run.stop_detail, handover=run.handover)  # type: ignore[arg-type]

    def set_pull(self, run_id: str, url: str) -> None:
        self.db.execute("UPDATE tuning_runs SET pull_url = ?, updated_at = ? WHERE run_id = ?", (url, now(), run_id))

    # -- rounds and trials --------------------------------------------------------------------

    def record(
        self, run_id: str, event: RoundEvent, trial: Trial | None = None, *, kernel: str = "", base_sha: str = "",
        device_name: str = "", domain: str = "",
    ) -> Trial | None:  # fmt: skip
        """One round event and, when the round judged a candidate, its trial, cases and the agent's expectations of
        it (`agent_expectations`, of this run and candidate, in `domain`): one transaction, so a crash leaves all or
        none. A trial already stored under its key is kept (and returned)."""
        stored = trial
        with self.db.transaction() as tx:
            if trial is not None:
                stored, new = self._insert_trial(tx, trial, kernel, base_sha, device_name)
                if new and trial.expectations:
                    rows = [expectation_row(c, run_id, trial.key, kernel, domain) for c in trial.expectations]
                    self.ledger.record_expectations(rows, tx)
                    stored = stored.model_copy(update={"expectations": trial.expectations})
            data = {**dict(zip(_EVENT_COLUMNS, _event_values(event), strict=True)), "run_id": run_id}
            data["created_at"] = now()
            cols = ", ".join(data)
            tx.execute(
                f"INSERT INTO tuning_rounds ({cols}) VALUES ({', '.join('?' for _ in data)})", list(data.values())
            )
        return stored

    def _insert_trial(self, tx: Database, t: Trial, kernel: str, base_sha: str, device_name: str) -> tuple[Trial, bool]:
        """The trial as stored, and whether this call stored it (False: it was there already)."""
        where = (kernel, base_sha, device_name, t.key, t.verify_of)
        found = tx.one(
            "SELECT id FROM tuning_trials WHERE kernel = ? AND base_sha = ? AND device_name = ? AND candidate_key = ?"
            " AND verify_of = ?",
            where,
        )
        if found is not None:
            return self._load(tx, int(found["id"])), False
        faster = sum(1 for c in t.timed if c.faster)
        row = tx.one(
            "INSERT INTO tuning_trials (kernel, base_sha, device_name, candidate_key, verify_of, run_id, source,"
            " config_json, status, verdict, speedup, cases_faster, cases_judged, resources, reasons_json, seconds,"
            " patch, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
            (
                *where[:4],
                t.verify_of,
                t.run_id,
                t.source,
                json.dumps(t.config),
                t.status,
                t.verdict,
                t.speedup,
                faster,
                len(t.timed),
                t.resources,
                json.dumps(t.reasons),
                t.seconds,
                t.patch,
                now(),
            ),
        )
        trial_id = int(row["id"]) if row else 0
        for c in t.cases:
            lo, hi = c.ci95_pct if c.ci95_pct is not None else (None, None)
            tx.execute(
                "INSERT INTO tuning_cases (trial_id, case_name, status, verdict, regression_pct, ci_low_pct,"
                " ci_high_pct, p50_ms, base_p50_ms, max_abs_err, reason) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (trial_id, c.name, c.status, c.verdict, c.regression_pct, lo, hi, c.p50_ms, c.base_p50_ms,
                 c.max_abs_err, c.reason),
            )  # fmt: skip
        return t.model_copy(update={"id": trial_id}), True

    def trial(self, kernel: str, base_sha: str, device_name: str, key: str, verify_of: str = "") -> Trial | None:
        """The stored judgement of a candidate on this base and device (a repeat is answered from here)."""
        row = self.db.one(
            "SELECT id FROM tuning_trials WHERE kernel = ? AND base_sha = ? AND device_name = ? AND candidate_key = ?"
            " AND verify_of = ?",
            (kernel, base_sha, device_name, key, verify_of),
        )
        return self._load(self.db, int(row["id"])) if row else None

    def _load(self, db: Database, trial_id: int) -> Trial:
        row = db.one("SELECT * FROM tuning_trials WHERE id = ?", (trial_id,))
        assert row is not None
        cases = db.rows("SELECT * FROM tuning_cases WHERE trial_id = ? ORDER BY id", (trial_id,))
        cols = ", ".join(ExpectationRow.model_fields)
        expected = db.rows(
            f"SELECT {cols} FROM agent_expectations WHERE tuning_run = ? AND candidate_key = ? ORDER BY id",
            (row["run_id"], row["candidate_key"]),
        )
        trial = _trial(row, cases)
        if row["verify_of"]:  # a re-verification holds no expectation: the search's trial of the key does
            return trial
        return trial.model_copy(update={"expectations": [_check(ExpectationRow.model_validate(r)) for r in expected]})

    def events(self, run_id: str) -> list[RoundEvent]:
        rows = self.db.rows(
            f"SELECT {', '.join(_EVENT_COLUMNS)} FROM tuning_rounds WHERE run_id = ? ORDER BY seq", (run_id,)
        )
        return [RoundEvent.model_validate({**r, "key": r["candidate_key"]}) for r in rows]

    def tokens(self, run_id: str) -> TokenSpend:
        """Every agent request of the run (ledger usage rows with tuning_run = run_id)."""
        row = self.db.one(
            "SELECT COALESCE(SUM(CASE WHEN status = 'ok' THEN 1 ELSE 0 END), 0) AS requests,"
            " COALESCE(SUM(prompt_tokens), 0) AS prompt_tokens,"
            " COALESCE(SUM(completion_tokens), 0) AS completion_tokens,"
            " COALESCE(SUM(total_tokens), 0) AS total_tokens FROM operator_agent_usage WHERE tuning_run = ?",
            (run_id,),
        )
        return TokenSpend.model_validate(row or {})


def _event_values(e: RoundEvent) -> list[Any]:
    return [e.seq, e.round, e.source, e.outcome, e.key, e.tokens, e.elapsed_s, e.detail]


def _trial(row: dict[str, Any], cases: list[dict[str, Any]]) -> Trial:
    return Trial(
        id=int(row["id"]),
        key=row["candidate_key"],
        config=json.loads(row["config_json"]),
        source=row["source"],
        status=row["status"],
        verdict=row["verdict"],
        reasons=json.loads(row["reasons_json"]),
        resources=row["resources"],
        seconds=float(row["seconds"]),
        patch=row["patch"],
        run_id=row["run_id"],
        verify_of=row["verify_of"],
        cases=[
            CaseResult(
                name=c["case_name"],
                status=c["status"],
                verdict=c["verdict"],
                regression_pct=c["regression_pct"],
                ci95_pct=(c["ci_low_pct"], c["ci_high_pct"]) if c["ci_low_pct"] is not None else None,
                p50_ms=c["p50_ms"],
                base_p50_ms=c["base_p50_ms"],
                max_abs_err=c["max_abs_err"],
                reason=c["reason"],
            )
            for c in cases
        ],
    )


def expectation_row(c: ExpectationCheck, run_id: str, key: str, kernel: str, domain: str) -> ExpectationRow:
    """A tune candidate's expectation check as a row of `agent_expectations` (no review: the run and the key)."""
    return ExpectationRow(
        tuning_run=run_id, candidate_key=key, kernel=kernel, domain=domain, metric=c.metric,
        expected=json.dumps(c.expected), **c.model_dump(exclude={"metric", "expected"}),
    )  # fmt: skip


def _check(r: ExpectationRow) -> ExpectationCheck:
    fields = set(ExpectationCheck.model_fields) - {"metric", "expected", "note"}
    read = {"metric": r.metric, "expected": json.loads(r.expected), "note": r.said(), **r.model_dump(include=fields)}
    return ExpectationCheck.model_validate(read)
