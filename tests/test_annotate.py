"""bot/review/annotate.py: a review's annotations located in a scratch repository's head and posted to the local
GitHub server; each lands on a file of the diff, on a line that file has."""

from __future__ import annotations

import json
from pathlib import Path

from bot.commands.review import changed_lint
from bot.config.key_lines import key_lines
from bot.config.manifest_tables import Constraints
from bot.config.repo import load_config
from bot.edges import gitio, publish
from bot.edges.github import GitHubEdge
from bot.models.agent_report import AgentReport
from bot.models.finding import Finding, Gate, Outcome
from bot.models.report import CaseReport, CaseStatus, KernelReport, Machine, Report, Resource, ResourceCheckReport
from bot.present.annotations import placed_annotations
from bot.review import annotate
from bot.review.changes import parse_diff
from bot.review.checkout import checkouts
from bot.review.coverage import coverage
from bot.verdict.findings import add_case, add_kernel
from bot.verdict.gate_resources import resource_findings
from bot.verdict.static import tunable_findings
from tests.conftest import KernelRepo, git
from tests.github_server import FakeGitHub

REPO = "octo-org/kernels"
TOKEN = "ghs_annotateTestToken0123456789"
CU = "kernels/deepgemm_tile/gemm_cuda.cu"
MANIFEST = "kernels/deepgemm_tile/kernel.toml"
FN = "void deepgemm_tile::gemm_bf16_kernel<128, 256, 64, false>(unsigned short const*, float*, int)"


def change(repo: KernelRepo) -> str:
    """Head: a line in the CUDA kernel's body, the CPU binding's entry reworded, a compiler flag lint refuses, a file
    outside every kernel."""
    smem = "  extern __shared__ __align__(128) unsigned char smem[];"
    repo.edit(CU, smem, f"{smem}\n  // head: one more pipeline stage")
    repo.edit("kernels/deepgemm_tile/binding_cpu.cpp", 'm.def("gemm"', 'm.def( "gemm"')
    repo.edit(MANIFEST, 'cflags = ["-O3"]\nentry = "gemm"', 'cflags = ["-O3", "-fplugin=./evil.so"]\nentry = "gemm"')
    repo.write("tools/notes.md", "# notes\n\nwhy the tile grew\n")
    return repo.commit("head")


def reviewed(repo: KernelRepo, head: str) -> Report:
    """The report a review of `head` leaves: a spill in the changed kernel, a failed CPU case, an unread file."""
    changes = parse_diff(gitio.diff(repo.path, repo.base, head))
    check = ResourceCheckReport(
        status="ok",
        head=[Resource(function=FN, registers=255, spill_bytes=64, spill_store_bytes=32, spill_load_bytes=32)],
        base=[Resource(function=FN, registers=200)],
    )
    case = CaseReport(name="square_512", tolerance=0.01, status=CaseStatus.incorrect, verdict="fail")
    add_case(case, Finding(gate=Gate.correctness, outcome=Outcome.fail, key="correctness.max_abs_err_total",
                           params={"value": "0.25", "limit": "0.01"}))  # fmt: skip
    kernel = KernelReport(name="deepgemm_tile", domain="deepgemm", changed=True, verdict="fail", resource_check=check,
                          cases=[case])  # fmt: skip
    failures, notes = resource_findings(check.head, check.base, Constraints(), arch=check.arch)
    for f in failures + notes:
        add_kernel(kernel, f)
    return Report(base_sha=repo.base, head_sha=head, pr=42, verdict="fail", kernels=[kernel],
                  agent=AgentReport(status="skipped"), environment=Machine(device="cpu", python="3.12"),
                  created_at="2026-12-02T01:00:00+00:00", opgate_version="0.2.0",
                  coverage=coverage(changes, ["kernels/deepgemm_tile/**"], {}))  # fmt: skip


def test_every_annotation_lands_on_a_file_of_the_diff_on_a_line_it_has(kernel_repo: KernelRepo, tmp_path: Path) -> None:
    head = change(kernel_repo)
    report = reviewed(kernel_repo, head)
    config = load_config(kernel_repo.path)
    changes = parse_diff(gitio.diff(kernel_repo.path, kernel_repo.base, head))
    with checkouts(kernel_repo.path, kernel_repo.base, head, config) as (_, head_side):  # as the review has them
        found = annotate.gather(report, changes, head_side, changed_lint(config))  # the lint the command passes
    assert {(a.path, a.annotation_level) for a in found} == {
        (CU, "failure"),  # the spill, at gemm_bf16_kernel's definition
        ("kernels/deepgemm_tile/binding_cpu.cpp", "failure"),  # square_512 failed: the CPU entry's definition
        ("tools/notes.md", "warning"),  # matched by no kernel: its first changed line
        (MANIFEST, "failure"),  # KERN004 at the cflags line
    }
    with FakeGitHub(TOKEN) as server:
        server.add_repo(REPO)
        server.add_pull(REPO, number=42, head_sha=head, base_sha=kernel_repo.base, author="alice-dev")
        with GitHubEdge(server.base_url, TOKEN, REPO, bot_login="opgate[bot]", seconds_between_requests=None,
                        seconds_between_writes=None) as edge:  # fmt: skip
            posted = publish.post(edge, 42, report, "<!-- opgate:review -->\nthe comment", annotations=found)
        (run,) = server.check_runs(REPO, head)
    assert posted.check is not None and posted.check.annotations == 4 and run["name"] == "opgate/review"
    diffed = set(git(kernel_repo.path, "diff", "--name-only", kernel_repo.base, head).split())
    for a in run["annotations"]:
        assert a["path"] in diffed, a
        lines = git(kernel_repo.path, "show", f"{head}:{a['path']}").split("\n")
        assert 1 <= a["start_line"] <= a["end_line"] <= len(lines), a
    where = {a["path"]: lines_at(kernel_repo, head, a["path"], a["start_line"]) for a in run["annotations"]}
    assert "gemm_bf16_kernel(" in where[CU]
    assert where["kernels/deepgemm_tile/binding_cpu.cpp"].startswith("torch::Tensor gemm(")
    assert where["tools/notes.md"] == "# notes"
    assert where[MANIFEST] == 'cflags = ["-O3", "-fplugin=./evil.so"]'
    (lint,) = [a for a in run["annotations"] if a["path"] == MANIFEST]
    assert lint["title"] == "lint KERN004" and "'-fplugin=./evil.so' is not allowed" in lint["message"]


CONFIG = "kernels/deepgemm_tile/tile_config.json"


def test_a_tunable_outside_its_set_is_annotated_at_its_key_in_the_config_of_the_diff(
    opgate, kernel_repo: KernelRepo, tmp_path: Path
):
    """The review's static findings carry the config file and the key's line (json gives no lines: the config's
    own reader finds them), so the check run puts the refusal on the changed line; nothing is built."""
    kernel_repo.write(CONFIG, '{\n  "tile_m": 128,\n  "tile_n": 128,\n  "tile_k": 64\n}\n')
    kernel_repo.base = kernel_repo.commit("the config one key a line")
    kernel_repo.edit(CONFIG, '"tile_n": 128', '"tile_n": 96')
    head = kernel_repo.commit("head")
    trace = tmp_path / "git-trace.txt"  # every git command the review ran
    run = opgate("review", "--repo", str(kernel_repo.path), "--base", kernel_repo.base, "--head", head, "--offline",
                 env={"GIT_TRACE": str(trace)})  # fmt: skip
    kernel = run.kernel("deepgemm_tile")
    assert (kernel["verdict"], kernel["build"]) == ("fail", None), run.stderr[-2000:]
    ran = [line.split("built-in: ", 1)[1] for line in trace.read_text().splitlines() if "built-in: " in line]
    added = [c.split()[-1] for c in ran if c.startswith("git worktree add ")]
    assert added == [kernel_repo.base, head]  # the annotations read the review's checkout of head: none of their own
    assert len([c for c in ran if c.startswith("git diff ")]) == 1  # and its diff
    [static] = [f for f in kernel["findings"] if f["gate"] == "static"]
    assert (static["key"], static["file"], static["line"]) == ("static.tunable_value", CONFIG, 3)
    found = annotate.read(run.out)
    assert [(a.path, a.start_line, a.annotation_level) for a in found] == [(CONFIG, 3, "failure")]
    assert "tile_n=96 not in {64,128,256}" in found[0].message
    assert CONFIG in git(kernel_repo.path, "diff", "--name-only", kernel_repo.base, head).split()
    assert lines_at(kernel_repo, head, CONFIG, 3) == '  "tile_n": 96,'


def test_a_missing_tunable_has_no_line_and_so_no_annotation():
    allowed = {"tile_m": [64, 128], "tile_n": [64, 128]}
    text = '{\n  "tile_m": 96\n}\n'
    lines = key_lines(text)
    findings = tunable_findings({"tile_m": 96}, allowed, "tile_config.json", CONFIG, lines)
    assert [(f.key, f.file, f.line) for f in findings] == [
        ("static.missing_tunable", CONFIG, None),  # 'tile_n' is nowhere in the file: the finding names the file
        ("static.tunable_value", CONFIG, 2),
    ]
    kernel = KernelReport(name="deepgemm_tile", domain="deepgemm", changed=True, verdict="fail")
    for f in findings:
        add_kernel(kernel, f)
    placed = placed_annotations(kernel, lambda path: path == CONFIG)
    assert [(a.path, a.start_line) for a in placed] == [(CONFIG, 2)]


def lines_at(repo: KernelRepo, sha: str, path: str, line: int) -> str:
    return git(repo.path, "show", f"{sha}:{path}").split("\n")[line - 1]


def test_a_part_carries_its_annotations_and_a_bad_file_is_left_out(tmp_path: Path) -> None:
    from bot.models.github import Annotation

    notes = [Annotation(path="a.cu", start_line=3, end_line=3, annotation_level="notice", message="m", title="t")]
    annotate.write(tmp_path, notes)
    assert annotate.read(tmp_path) == notes
    (tmp_path / annotate.ANNOTATIONS_FILE).write_text(json.dumps([{"path": "a.cu", "start_line": 0}]))
    assert annotate.read(tmp_path) == []  # from a job that ran PR code: checked, never a crash
    assert annotate.read(tmp_path / "missing") == []
