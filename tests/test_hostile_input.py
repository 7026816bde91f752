"""Broken and hostile input: names that try to write CI log commands, bytes that are not UTF-8, malformed events."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import KERNELS, make_repo
from tests.github_server import FakeGitHub, load_fixture
from tests.test_accept import PR, REPO, TOKEN, github_env

FORGED = "::error title=forged::PASS"


def workflow_commands(text: str) -> list[str]:
    """Lines a GitHub Actions runner would read as a workflow command (it splits on CR as well as LF)."""
    return [line for line in re.split(r"\r\n|\r|\n", text) if line.lstrip().startswith(("::", "##["))]


def test_a_kernel_folder_named_like_a_workflow_command_cannot_issue_one_from_plan(opgate, tmp_path: Path):
    repo = make_repo(tmp_path / "repo", ["deepgemm_tile"])
    forged = repo.path / "kernels" / f"x\n{FORGED}"
    shutil.copytree(KERNELS / "deepgemm_tile", forged)
    manifest = forged / "kernel.toml"  # the kernel's name is its manifest's: forge that one too
    manifest.write_text(manifest.read_text().replace('name = "deepgemm_tile"', f"name = {json.dumps(forged.name)}"))
    run = opgate("review", "--plan", "--repo", str(repo.path), "--base", repo.base, "--head", repo.commit())
    assert run.code == 2, run.stdout + run.stderr
    assert "a kernel folder name must match" in run.stderr
    assert workflow_commands(run.stdout + run.stderr) == []


# ---------------------------------------------------------------------------- bytes, not text


def test_a_byte_that_is_not_utf8_in_a_changed_file_does_not_stop_the_review(opgate, kernel_repo):
    (kernel_repo.path / "README.md").write_bytes(b"caf\xe9 \xff\xfe notes\n")
    run = opgate("review", "--repo", str(kernel_repo.path), "--base", kernel_repo.base, "--head", kernel_repo.commit())
    assert run.code == 0, run.stderr
    assert "Traceback" not in run.stderr and run.report["verdict"] == "pass"
    assert run.report["coverage"]["unmatched"] == {"total": 1, "names": ["README.md"]}


def test_a_file_named_with_bytes_that_are_not_utf8_is_planned_for_its_kernel(opgate, kernel_repo):
    folder = kernel_repo.path / "kernels" / "deepgemm_tile"
    (folder / "tile_config.json").write_bytes((folder / "tile_config.json").read_bytes() + b"\n")
    with open(bytes(folder) + b"/note-\xff\xfe.txt", "wb") as f:  # a name that is not UTF-8
        f.write(b"\xff\xfe\n")
    head = kernel_repo.commit()
    plan = opgate("review", "--plan", "--repo", str(kernel_repo.path), "--base", kernel_repo.base, "--head", head)
    assert plan.code == 0, plan.stderr
    assert json.loads(plan.stdout)["include"] == [{"kernel": "deepgemm_tile", "domain": "deepgemm"}]


def test_a_quoted_file_name_in_the_diff_lands_in_its_kernel():
    from bot.review.changes import parse_diff, touching

    diff = (
        'diff --git "a/kernels/k/caf\\303\\251 \\"x\\".cu" "b/kernels/k/caf\\303\\251 \\"x\\".cu"\n'
        "new file mode 100644\nindex 0000000..587be6b\n--- /dev/null\n"
        '+++ "b/kernels/k/caf\\303\\251 \\"x\\".cu"\n@@ -0,0 +1 @@\n+x\n'
        'diff --git "a/kernels/k/bad\\377.bin" "b/kernels/k/bad\\377.bin"\n'
        "new file mode 100644\nindex 0000000..1111111\n"
        'Binary files /dev/null and "b/kernels/k/bad\\377.bin" differ\n'
    )
    changes = parse_diff(diff)
    assert [c.path for c in changes] == ['kernels/k/café "x".cu', "kernels/k/bad\ufffd.bin"]
    assert changes[1].binary and touching(changes, ["kernels/k/**"]) == changes


# ---------------------------------------------------------------------------- malformed event files

DEEP = "[" * 100_000 + "]" * 100_000


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (b'{"action": "opened", "number": 1, "pull_request": {"title": "caf\xe9"}}', "not UTF-8"),
        (DEEP.encode(), "nests deeper than"),
        (('{"a": ' * 200 + "1" + "}" * 200).encode(), "nests deeper than"),
        (b'{"action": ["opened"], "number": "one", "pull_request": [], "issue": 1, "comment": "x"}', "event"),
        (b'{"number": 1' + b"0" * 5000 + b"}", "not valid JSON"),
        (b"\x00\x01", "not valid JSON"),
    ],
)
@pytest.mark.parametrize("command", ["review", "accept"])
def test_a_malformed_event_file_is_one_line_and_exit_2(opgate, tmp_path: Path, content: bytes, says: str, command: str):
    event = tmp_path / "event.json"
    event.write_bytes(content)
    run = opgate(command, "--event", str(event), timeout=60)
    assert run.code == 2, run.stderr
    assert says in run.stderr and "Traceback" not in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1 and run.stderr.startswith("opgate: error: ")


# ---------------------------------------------------------------------------- a review always reports


@pytest.fixture
def server() -> Iterator[FakeGitHub]:
    with FakeGitHub(TOKEN) as gh:
        gh.add_repo(REPO)
        yield gh


def test_a_review_that_cannot_run_still_writes_report_json_a_comment_and_an_error_status(
    opgate, server, kernel_repo, tmp_path: Path
):
    kernel_repo.write("README.md", "changed\n")
    head = kernel_repo.commit()
    missing_base = "0123456789" * 4  # e.g. a force-pushed base or a clone too shallow to hold it
    server.add_pull(REPO, number=PR, head_sha=head, base_sha=missing_base, author="alice-dev")
    event = tmp_path / "event.json"
    event.write_text(json.dumps(load_fixture("pull_request.opened.json", head_sha=head, base_sha=missing_base)))
    run = opgate("review", "--event", str(event), "--repo", str(kernel_repo.path), "--post", env=github_env(server))
    assert run.code == 2 and "Traceback" not in run.stderr
    assert run.stderr.strip().splitlines()[-1].startswith("opgate: error: unknown revision")
    assert run.report["verdict"] == "error" and "unknown revision" in run.report["error"]
    (status,) = server.statuses(REPO, head)
    assert status["state"] == "error" and status["description"].startswith("could not judge: unknown revision")
    (comment,) = server.comments(REPO, PR)
    assert "The review could not run: unknown revision" in comment["body"] and comment["body"] == run.comment


def test_a_matrix_part_that_cannot_run_is_an_error_kernel_in_the_merge(opgate, kernel_repo, tmp_path: Path):
    head = kernel_repo.base
    part = tmp_path / "part-deepgemm_tile"
    run = opgate("review", "--repo", str(kernel_repo.path), "--base", "nosuch", "--head", head,
                 "--kernel", "deepgemm_tile", "--out", str(part))  # fmt: skip
    assert run.code == 2
    bad = tmp_path / "part-flashmla_decode"
    bad.mkdir()
    (bad / "report.json").write_bytes(b'{"schema": "opgate.report/1", "verdict": "\xff')  # what a hostile job left
    merged = opgate("review", "--repo", str(kernel_repo.path), "--base", "nosuch", "--head", head,
                    "--merge", str(part), str(bad), "--out", str(tmp_path / "merged"))  # fmt: skip
    assert merged.code == 1, merged.stderr
    report = json.loads((tmp_path / "merged" / "report.json").read_text())
    verdicts = {k["name"]: (k["verdict"], k["reasons"][0]) for k in report["kernels"]}
    assert verdicts["deepgemm_tile"][0] == "error" and "unknown revision" in verdicts["deepgemm_tile"][1]
    assert verdicts["flashmla_decode"][0] == "error" and "no readable opgate report" in verdicts["flashmla_decode"][1]


# ---------------------------------------------------------------------------- compiler output


def test_absurd_counts_in_ptxas_output_are_capped_not_a_crash_and_long_digit_runs_parse_in_linear_time():
    import time

    from bot.untrusted.resources import NUMBER_CAP, parse_ptx_threads, parse_ptxas

    text = (
        "ptxas info    : Compiling entry function '_Z1kv' for 'sm_90a'\n"
        "ptxas info    : Function properties for _Z1kv\n"
        f"    0 bytes stack frame, {'9' * 5000} bytes spill stores, 0 bytes spill loads\n"
        f"ptxas info    : Used {'9' * 5000} registers, 0 bytes smem\n"
    )
    (res,) = parse_ptxas(text)
    assert res.spill_bytes == res.registers == NUMBER_CAP  # absurd, so the spill gate fails: never read as 0
    assert parse_ptx_threads(f".entry k(\n.maxntid {'9' * 5000}, 1, 1\n{{") == {"k": NUMBER_CAP}
    started = time.perf_counter()
    parse_ptxas("1" * 200_000 + " bytes spill stores\n")
    assert time.perf_counter() - started < 1.0
