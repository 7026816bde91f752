"""Main's record, its drift bisection and the dashboard (opgate-main.yml, opgate-drift.yml, opgate-dashboard.yml,
called by main-record.yml, drift.yml and dashboard.yml): what they may do, and the range script run with bash on
this repository."""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.test_workflows import ROOT, WORKFLOWS, fake_gh, load, run_script, script, steps  # noqa: F401  (fixture)

RANGE = ("opgate-main.yml", "plan", "Decide the range (the previous main commit .. this one)")


def test_main_is_recorded_on_push_and_dispatch_only_and_judged_offline_without_keys() -> None:
    caller = load("main-record.yml")
    assert set(caller["on"]) == {"push", "workflow_dispatch"}
    assert caller["on"]["push"] == {"branches": ["main"]}
    assert caller["jobs"]["opgate"]["uses"] == "$/.github/workflows/opgate-main.yml"
    assert set(caller["jobs"]["opgate"]["secrets"]) == {"OPGATE_DATABASE_URL"}
    workflow = load("opgate-main.yml")
    jobs = workflow["jobs"]
    assert jobs["review"]["permissions"] == {"contents": "read"}
    assert jobs["record"]["permissions"] == {"contents": "read", "issues": "write"}
    judge = next(s for j, s in steps(workflow) if j == "review" and "opgate review" in s.get("run", ""))
    assert "--offline" in judge["run"] and not any(k.startswith("TAOTOKEN") for k in judge["env"])
    record = next(s for j, s in steps(workflow) if j == "record" and "history record" in s.get("run", ""))
    assert "opgate history drift" in record["run"] and "--post --no-bisect" in record["run"]
    assert "TAOTOKEN" not in str(workflow)


def test_the_dashboard_is_built_without_write_access_and_deployed_by_a_job_that_only_deploys() -> None:
    assert load("dashboard.yml")["jobs"]["opgate"]["uses"] == "$/.github/workflows/opgate-dashboard.yml"
    jobs = load("opgate-dashboard.yml")["jobs"]
    assert jobs["build"]["permissions"] == {"contents": "read"}
    assert jobs["deploy"]["permissions"] == {"pages": "write", "id-token": "write"}
    assert [s["uses"].split("@")[0] for s in jobs["deploy"]["steps"]] == ["actions/deploy-pages"]
    assert any("opgate dashboard --out site" in s.get("run", "") for s in jobs["build"]["steps"])


def _git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(ROOT), *args], check=True, capture_output=True, text=True).stdout.strip()


def test_the_range_is_the_push_before_else_the_commits_first_parent(fake_gh: Path) -> None:  # noqa: F811
    text, _ = script(*RANGE)
    head, parent = _git("rev-parse", "HEAD"), _git("rev-parse", "HEAD^1")
    grand = _git("rev-parse", "HEAD~2")
    for before, expected in ((grand, grand), ("0" * 40, parent), ("not-a-sha", parent), ("", parent)):
        code, out, _, log = run_script(text, {"BEFORE": before, "INPUT_BASE": "", "HEAD_SHA": head}, fake_gh)
        assert code == 0, log
        assert out == {"base_sha": expected, "head_sha": head}
    code, out, _, _ = run_script(text, {"BEFORE": grand, "INPUT_BASE": "", "HEAD_SHA": "HEAD; rm -rf /"}, fake_gh)
    assert code != 0 and "head_sha" not in out


def test_drift_is_bisected_on_a_schedule_by_a_job_without_secrets_and_posted_by_one_that_builds_nothing() -> None:
    caller = load("drift.yml")
    assert set(caller["on"]) == {"schedule", "workflow_dispatch"}
    assert caller["jobs"]["opgate"]["uses"] == "$/.github/workflows/opgate-drift.yml"
    assert set(caller["jobs"]["opgate"]["secrets"]) == {"OPGATE_DATABASE_URL"}
    workflow = load("opgate-drift.yml")
    jobs = workflow["jobs"]
    builds = {job for job, step in steps(workflow) if "opgate history bisect" in step.get("run", "")}
    assert builds == {"bisect"}
    bisect = jobs["bisect"]
    assert "secrets." not in str(bisect) and "environment" not in bisect and "github.token" not in str(bisect)
    assert bisect["permissions"] == {"contents": "read"} and bisect["strategy"]["max-parallel"] == 1
    run = next(s["run"] for s in bisect["steps"] if "opgate history bisect" in s.get("run", ""))
    assert "--require-isolation" in run and '--good "$GOOD" --bad "$BAD"' in run
    assert jobs["plan"]["permissions"] == {"contents": "read"}
    assert jobs["post"]["permissions"] == {"contents": "read", "issues": "write"}
    plan = next(s["run"] for s in jobs["plan"]["steps"] if "opgate history drift" in s.get("run", ""))
    assert "--bisect-plan" in plan and "--post" not in plan
    post = next(s["run"] for s in jobs["post"]["steps"] if "opgate history drift" in s.get("run", ""))
    assert "--post --bisections" in post and "--post --no-bisect" in post


def test_every_drift_post_in_a_job_that_holds_a_secret_builds_nothing() -> None:
    """`opgate history drift --post` bisects (builds and runs main's history) unless told not to: a job holding
    the ledger URL or a write token may only read bisections (--no-bisect, --bisections)."""
    for path in WORKFLOWS.glob("opgate-*.yml"):
        for job, step in steps(load(path)):
            for line in step.get("run", "").splitlines():
                if "opgate history drift" in line and "--post" in line:
                    assert "--no-bisect" in line or "--bisections" in line, f"{path.name}: {job}: {line.strip()}"
