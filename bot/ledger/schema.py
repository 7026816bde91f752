"""The ledger's ordered migrations, written once for SQLite and PostgreSQL (`{pk}`, `{real}`, `{bigint}`)."""

from __future__ import annotations

# Ordered; each runs once, inside a transaction, and is recorded in schema_migrations.
# Never edit an applied migration: add the next one.
MIGRATIONS: list[tuple[int, str]] = [
    (
        1,
        """
        CREATE TABLE operator_agent_usage (
            id {pk},
            task_id TEXT NOT NULL,
            model_name TEXT NOT NULL,
            prompt_tokens INTEGER NOT NULL,
            completion_tokens INTEGER NOT NULL,
            total_tokens INTEGER NOT NULL,
            created_at TEXT NOT NULL,
            request_id TEXT NOT NULL UNIQUE,
            domain TEXT NOT NULL,
            key_fingerprint TEXT NOT NULL,
            pr INTEGER,
            head_sha TEXT NOT NULL,
            status TEXT NOT NULL,
            status_code INTEGER,
            latency_ms {real},
            usage_source TEXT NOT NULL
        );
        CREATE INDEX operator_agent_usage_domain ON operator_agent_usage (domain, created_at);
        CREATE TABLE reviews (
            id {pk},
            created_at TEXT NOT NULL,
            base_sha TEXT NOT NULL,
            head_sha TEXT NOT NULL,
            pr INTEGER,
            verdict TEXT NOT NULL,
            report_json TEXT NOT NULL
        );
        CREATE INDEX reviews_head ON reviews (head_sha);
        CREATE TABLE acceptances (
            id {pk},
            created_at TEXT NOT NULL,
            pr INTEGER NOT NULL,
            head_sha TEXT NOT NULL,
            login TEXT NOT NULL,
            role TEXT NOT NULL,
            kernels_json TEXT NOT NULL,
            override INTEGER NOT NULL,
            reason TEXT NOT NULL,
            comment_id {bigint} NOT NULL UNIQUE
        );
        CREATE INDEX acceptances_pr ON acceptances (pr, head_sha);
        CREATE TABLE verdicts (
            id {pk},
            review_id INTEGER NOT NULL REFERENCES reviews (id),
            kernel TEXT NOT NULL,
            domain TEXT NOT NULL,
            changed INTEGER NOT NULL,
            verdict TEXT NOT NULL,
            reasons_json TEXT NOT NULL
        );
        """,
    ),
    (
        2,
        """
        ALTER TABLE operator_agent_usage ADD COLUMN call_id TEXT;
        ALTER TABLE operator_agent_usage ADD COLUMN attempt INTEGER NOT NULL DEFAULT 1;
        ALTER TABLE operator_agent_usage ADD COLUMN error_type TEXT;
        ALTER TABLE operator_agent_usage ADD COLUMN wire TEXT NOT NULL DEFAULT 'openai';
        ALTER TABLE operator_agent_usage ADD COLUMN cached INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE operator_agent_usage ADD COLUMN cached_tokens INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE operator_agent_usage ADD COLUMN reasoning_tokens INTEGER NOT NULL DEFAULT 0;
        ALTER TABLE operator_agent_usage ADD COLUMN estimated_prompt_tokens INTEGER;
        ALTER TABLE operator_agent_usage ADD COLUMN estimate_ratio {real};
        CREATE TABLE agent_budgets (
            domain TEXT NOT NULL,
            week TEXT NOT NULL,
            limit_tokens {bigint} NOT NULL,
            updated_at TEXT NOT NULL,
            PRIMARY KEY (domain, week)
        );
        CREATE TABLE agent_reservations (
            id {pk},
            call_id TEXT NOT NULL UNIQUE,
            domain TEXT NOT NULL,
            week TEXT NOT NULL,
            reserved_tokens {bigint} NOT NULL,
            settled_tokens {bigint},
            state TEXT NOT NULL,
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL
        );
        CREATE INDEX agent_reservations_week ON agent_reservations (domain, week, state);
        CREATE TABLE agent_response_cache (
            cache_key TEXT PRIMARY KEY,
            model TEXT NOT NULL,
            wire TEXT NOT NULL,
            content TEXT NOT NULL,
            prompt_tokens INTEGER NOT NULL,
            completion_tokens INTEGER NOT NULL,
            created_at TEXT NOT NULL
        )
        """,
    ),
    (
        3,
        """
        CREATE TABLE baselines (
            id {pk},
            cache_key TEXT NOT NULL,
            base_sha TEXT NOT NULL,
            kernel TEXT NOT NULL,
            case_name TEXT NOT NULL,
            device_name TEXT NOT NULL,
            p50_ms {real} NOT NULL,
            samples INTEGER NOT NULL,
            max_abs_err {real},
            created_at TEXT NOT NULL
        );
        CREATE INDEX baselines_key ON baselines (cache_key, id)
        """,
    ),
    (
        4,
        """
        CREATE TABLE main_commits (
            sha TEXT PRIMARY KEY,
            base_sha TEXT NOT NULL,
            branch TEXT NOT NULL,
            committed_at TEXT NOT NULL,
            subject TEXT NOT NULL,
            pr INTEGER,
            recorded_at TEXT NOT NULL
        );
        CREATE INDEX main_commits_time ON main_commits (committed_at);
        CREATE TABLE main_figures (
            id {pk},
            sha TEXT NOT NULL,
            base_sha TEXT NOT NULL,
            kernel TEXT NOT NULL,
            domain TEXT NOT NULL,
            case_name TEXT NOT NULL,
            device TEXT NOT NULL,
            device_name TEXT NOT NULL,
            p50_ms {real} NOT NULL,
            base_p50_ms {real},
            regression_pct {real},
            ci_low_pct {real},
            ci_high_pct {real},
            max_abs_err {real},
            verdict TEXT NOT NULL,
            committed_at TEXT NOT NULL,
            recorded_at TEXT NOT NULL,
            UNIQUE (sha, kernel, case_name, device_name)
        );
        CREATE INDEX main_figures_kernel ON main_figures (kernel, committed_at);
        CREATE TABLE main_resources (
            id {pk},
            sha TEXT NOT NULL,
            kernel TEXT NOT NULL,
            function TEXT NOT NULL,
            registers INTEGER NOT NULL,
            spill_bytes INTEGER NOT NULL,
            smem_bytes INTEGER NOT NULL,
            stack_bytes INTEGER NOT NULL,
            threads INTEGER,
            committed_at TEXT NOT NULL,
            UNIQUE (sha, kernel, function)
        );
        CREATE TABLE drift_checks (
            id {pk},
            checked_at TEXT NOT NULL,
            kernel TEXT NOT NULL,
            case_name TEXT NOT NULL,
            device_name TEXT NOT NULL,
            reference_label TEXT NOT NULL,
            reference_sha TEXT NOT NULL,
            drift_pct {real} NOT NULL,
            ci_low_pct {real} NOT NULL,
            ci_high_pct {real} NOT NULL,
            limit_pct {real} NOT NULL,
            flagged INTEGER NOT NULL,
            issue_url TEXT NOT NULL
        );
        CREATE INDEX drift_checks_time ON drift_checks (checked_at)
        """,
    ),
    (
        5,
        """
        ALTER TABLE operator_agent_usage ADD COLUMN purpose TEXT NOT NULL DEFAULT 'review';
        ALTER TABLE operator_agent_usage ADD COLUMN tuning_run TEXT;
        CREATE INDEX operator_agent_usage_tuning ON operator_agent_usage (tuning_run);
        CREATE TABLE tuning_runs (
            run_id TEXT PRIMARY KEY,
            kernel TEXT NOT NULL,
            domain TEXT NOT NULL,
            base_sha TEXT NOT NULL,
            device_name TEXT NOT NULL,
            strategy TEXT NOT NULL,
            max_rounds INTEGER NOT NULL,
            token_limit {bigint} NOT NULL,
            state TEXT NOT NULL,
            stop TEXT NOT NULL DEFAULT '',
            stop_detail TEXT NOT NULL DEFAULT '',
            handover INTEGER NOT NULL DEFAULT 0,
            best_key TEXT NOT NULL DEFAULT '',
            best_speedup {real},
            pull_url TEXT NOT NULL DEFAULT '',
            created_at TEXT NOT NULL,
            updated_at TEXT NOT NULL
        );
        CREATE INDEX tuning_runs_kernel ON tuning_runs (kernel, base_sha, state);
        CREATE TABLE tuning_trials (
            id {pk},
            kernel TEXT NOT NULL,
            base_sha TEXT NOT NULL,
            device_name TEXT NOT NULL,
            candidate_key TEXT NOT NULL,
            verify_of TEXT NOT NULL DEFAULT '',
            run_id TEXT NOT NULL,
            source TEXT NOT NULL,
            config_json TEXT NOT NULL,
            status TEXT NOT NULL,
            verdict TEXT NOT NULL,
            speedup {real},
            cases_faster INTEGER NOT NULL,
            cases_judged INTEGER NOT NULL,
            resources TEXT NOT NULL,
            reasons_json TEXT NOT NULL,
            seconds {real} NOT NULL,
            patch TEXT NOT NULL,
            created_at TEXT NOT NULL,
            UNIQUE (kernel, base_sha, device_name, candidate_key, verify_of)
        );
        CREATE TABLE tuning_cases (
            id {pk},
            trial_id {bigint} NOT NULL REFERENCES tuning_trials (id),
            case_name TEXT NOT NULL,
            status TEXT NOT NULL,
            verdict TEXT NOT NULL,
            regression_pct {real},
            ci_low_pct {real},
            ci_high_pct {real},
            p50_ms {real},
            base_p50_ms {real},
            max_abs_err {real},
            reason TEXT NOT NULL,
            UNIQUE (trial_id, case_name)
        );
        CREATE TABLE tuning_rounds (
            id {pk},
            run_id TEXT NOT NULL,
            seq INTEGER NOT NULL,
            round INTEGER NOT NULL,
            source TEXT NOT NULL,
            outcome TEXT NOT NULL,
            candidate_key TEXT NOT NULL DEFAULT '',
            tokens INTEGER NOT NULL DEFAULT 0,
            elapsed_s {real} NOT NULL DEFAULT 0,
            detail TEXT NOT NULL DEFAULT '',
            created_at TEXT NOT NULL,
            UNIQUE (run_id, seq)
        )
        """,
    ),
    (
        6,
        """
        CREATE TABLE bisections (
            id {pk},
            created_at TEXT NOT NULL,
            kernel TEXT NOT NULL,
            case_name TEXT NOT NULL,
            device_name TEXT NOT NULL,
            good_sha TEXT NOT NULL,
            bad_sha TEXT NOT NULL,
            verdict TEXT NOT NULL,
            first_bad_sha TEXT NOT NULL,
            report_json TEXT NOT NULL
        );
        CREATE INDEX bisections_range ON bisections (kernel, case_name, good_sha, bad_sha, id)
        """,
    ),
    (
        7,
        """
        CREATE TABLE main_resources_arch (
            id {pk},
            sha TEXT NOT NULL,
            kernel TEXT NOT NULL,
            function TEXT NOT NULL,
            arch TEXT NOT NULL DEFAULT 'sm_90a',
            registers INTEGER NOT NULL,
            spill_bytes INTEGER NOT NULL,
            smem_bytes INTEGER NOT NULL,
            stack_bytes INTEGER NOT NULL,
            threads INTEGER,
            committed_at TEXT NOT NULL,
            UNIQUE (sha, kernel, function, arch)
        );
        INSERT INTO main_resources_arch
            (sha, kernel, function, arch, registers, spill_bytes, smem_bytes, stack_bytes, threads, committed_at)
            SELECT sha, kernel, function, 'sm_90a', registers, spill_bytes, smem_bytes, stack_bytes, threads,
                committed_at
            FROM main_resources ORDER BY id;
        DROP TABLE main_resources;
        ALTER TABLE main_resources_arch RENAME TO main_resources
        """,
    ),
    (
        8,
        """
        CREATE TABLE agent_expectations (
            id {pk},
            review_id {bigint} NOT NULL REFERENCES reviews (id),
            created_at TEXT NOT NULL,
            head_sha TEXT NOT NULL,
            pr INTEGER,
            kernel TEXT NOT NULL,
            domain TEXT NOT NULL,
            metric TEXT NOT NULL,
            expected TEXT NOT NULL,
            quantity TEXT NOT NULL,
            subject TEXT NOT NULL,
            expected_value {real},
            measured {real},
            low {real},
            high {real},
            unit TEXT NOT NULL,
            outcome TEXT NOT NULL,
            note TEXT NOT NULL
        );
        CREATE INDEX agent_expectations_domain ON agent_expectations (domain, created_at);
        CREATE TABLE agent_proposals (
            id {pk},
            review_id {bigint} REFERENCES reviews (id),
            created_at TEXT NOT NULL,
            domain TEXT NOT NULL,
            kernel TEXT NOT NULL,
            kind TEXT NOT NULL,
            name TEXT NOT NULL,
            verdict TEXT NOT NULL,
            passed INTEGER NOT NULL
        );
        CREATE INDEX agent_proposals_domain ON agent_proposals (domain, created_at)
        """,
    ),
    (
        9,
        # opgate tune's agent expects metrics too: an expectation belongs to a review or to a tuning run's candidate
        """
        CREATE TABLE agent_expectations_9 (
            id {pk},
            review_id {bigint} REFERENCES reviews (id),
            tuning_run TEXT NOT NULL DEFAULT '',
            candidate_key TEXT NOT NULL DEFAULT '',
            created_at TEXT NOT NULL,
            head_sha TEXT NOT NULL,
            pr INTEGER,
            kernel TEXT NOT NULL,
            domain TEXT NOT NULL,
            metric TEXT NOT NULL,
            expected TEXT NOT NULL,
            quantity TEXT NOT NULL,
            subject TEXT NOT NULL,
            expected_value {real},
            measured {real},
            low {real},
            high {real},
            unit TEXT NOT NULL,
            outcome TEXT NOT NULL,
            note TEXT NOT NULL
        );
        INSERT INTO agent_expectations_9
            (review_id, created_at, head_sha, pr, kernel, domain, metric, expected, quantity, subject, expected_value,
             measured, low, high, unit, outcome, note)
            SELECT review_id, created_at, head_sha, pr, kernel, domain, metric, expected, quantity, subject,
                expected_value, measured, low, high, unit, outcome, note
            FROM agent_expectations ORDER BY id;
        DROP TABLE agent_expectations;
        ALTER TABLE agent_expectations_9 RENAME TO agent_expectations;
        CREATE INDEX agent_expectations_domain ON agent_expectations (domain, created_at);
        CREATE INDEX agent_expectations_tuning ON agent_expectations (tuning_run, candidate_key)
        """,
    ),
]
