"""The review command's flow (bot/review/orchestrate.py) called directly: a review that cannot run still leaves
report.json and comment.md (and, when it is the whole review, a ledger row); a matrix part names its kernel;
--merge checks its folders before anything is written; a review that stops mid-kernel still annotates from the head
checkout it made, and removes it."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from bot.commands.review import changed_lint
from bot.config.settings import Settings, load_settings
from bot.errors import InputError
from bot.ledger import open_ledger
from bot.models.report import Report
from bot.review.fanout import UNSEEN_FILE
from bot.review.host import here
from bot.review.orchestrate import review
from bot.review.request import ReviewRequest
from tests.conftest import REPO_CONFIG, KernelRepo, git


def settings_for(tmp_path: Path) -> Settings:
    return load_settings({"OPGATE_DATABASE_URL": str(tmp_path / "ledger.sqlite")}, REPO_CONFIG)


def test_a_review_of_an_unknown_revision_writes_an_error_report_and_records_it(
    kernel_repo: KernelRepo, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    settings = settings_for(tmp_path)
    options = ReviewRequest(base="no-such-branch", head=kernel_repo.base, out=out, repo=kernel_repo.path, offline=True)
    result = review(options, settings, host=here(settings))
    assert result.failure is not None and "unknown revision 'no-such-branch'" in str(result.failure)
    on_disk = Report.model_validate_json((out / "report.json").read_text())
    assert on_disk.verdict == result.report.verdict == "error"
    assert on_disk.error is not None and "no-such-branch" in on_disk.error
    assert on_disk.kernels == []  # the whole review: no kernel was judged
    assert (out / "comment.md").read_text() == result.comment and "no-such-branch" in result.comment
    assert json.loads((out / UNSEEN_FILE).read_text()) == []
    ledger = open_ledger(settings.database_url)
    try:
        recorded = ledger.latest_review(kernel_repo.base)
    finally:
        ledger.close()
    assert recorded is not None and recorded.verdict == "error"


def test_report_json_and_the_ledger_get_the_lines_written_from_the_findings(tmp_path: Path) -> None:
    """The review keeps findings; `write` writes their English lines once, into report.json and the ledger alike."""
    import tests.comment_reports as cr
    from bot.review.orchestrate import write

    settings = settings_for(tmp_path)
    report = cr.fail_correctness()
    ledger = open_ledger(settings.database_url)
    try:
        result = write(report, tmp_path / "out", [], ledger, settings, record=True, pr=None)
        rows = ledger.db.rows("SELECT kernel, reasons_json FROM verdicts")
    finally:
        ledger.close()
    on_disk = Report.model_validate_json((tmp_path / "out" / "report.json").read_text())
    k = next(k for k in on_disk.kernels if k.verdict == "fail")
    assert k.reasons[0].startswith("stability: ") and result.report.kernels == on_disk.kernels
    recorded = [(r["kernel"], json.loads(r["reasons_json"])) for r in rows]
    assert recorded == [(k.name, k.reasons) for k in on_disk.kernels]
    assert all(k.reasons == [] for k in report.kernels)  # the review's own report holds findings only


def test_the_comment_of_a_pull_request_says_when_the_configuration_allows_self_acceptance(
    kernel_repo: KernelRepo, tmp_path: Path
) -> None:
    settings = settings_for(tmp_path)
    options = ReviewRequest(base="no-such-branch", head=kernel_repo.base, out=tmp_path / "out", repo=kernel_repo.path,
                            offline=True, pr=42)  # fmt: skip
    assert "Self-acceptance is allowed here" not in review(options, settings, host=here(settings)).comment
    weakened = settings.model_copy(update={"repo_config": REPO_CONFIG.model_copy(update={"allow_self_accept": True})})
    assert "Self-acceptance is allowed here" in review(options, weakened, host=here(weakened)).comment


def test_a_matrix_part_that_cannot_run_names_its_kernel_and_is_not_recorded(
    kernel_repo: KernelRepo, tmp_path: Path
) -> None:
    out = tmp_path / "part"
    settings = settings_for(tmp_path)
    options = ReviewRequest(
        base="no-such-branch", head=kernel_repo.base, out=out, repo=kernel_repo.path, offline=True,
        only_kernel="deepgemm_tile",
    )  # fmt: skip
    result = review(options, settings, host=here(settings))
    [kernel] = result.report.kernels
    assert (kernel.name, kernel.verdict, kernel.changed) == ("deepgemm_tile", "error", True)
    assert kernel.reasons == [result.report.error]
    ledger = open_ledger(settings.database_url)
    try:
        assert ledger.latest_review(kernel_repo.base) is None  # parts are recorded when they are merged
    finally:
        ledger.close()


def test_merge_names_a_missing_part_folder_before_writing_anything(tmp_path: Path) -> None:
    part = tmp_path / "part-a"
    part.mkdir()
    out = tmp_path / "out"
    options = ReviewRequest(base="b", head="h", out=out, merge=[part, tmp_path / "part-b"])
    with pytest.raises(InputError, match=r"--merge: no such folder: .*part-b"):
        review(options, settings_for(tmp_path))
    assert not out.exists()


class LostJudge:
    """A case runner whose build never comes back: the review stops on an internal error mid-kernel."""

    def __call__(self, *args: object, **kwargs: object) -> LostJudge:
        return self

    def build(self, head_k: object, base_k: object) -> object:
        raise RuntimeError("the judge's machine went away")


def test_a_review_that_stops_mid_kernel_still_annotates_from_its_head_checkout_and_removes_it(
    kernel_repo: KernelRepo, tmp_path: Path
) -> None:
    kernel_repo.edit("kernels/deepgemm_tile/gemm_cpu.cpp", "#include", "// head: unrolled\n#include")
    kernel_repo.write("tools/.env", "BATCH=1\nBATCH=2\n")  # lint ENV003 at line 2
    head = kernel_repo.commit("head")
    settings = settings_for(tmp_path)
    request = ReviewRequest(base=kernel_repo.base, head=head, out=tmp_path / "out", repo=kernel_repo.path,
                            offline=True, resource_check=False)  # fmt: skip
    host = dataclasses.replace(here(settings), cases=LostJudge())
    result = review(request, settings, host=host, lint=changed_lint(settings.repo_config))
    assert result.report.verdict == "error" and "the judge's machine went away" in (result.report.error or "")
    assert [(a.path, a.start_line, a.title) for a in result.annotations] == [("tools/.env", 2, "lint ENV003")]
    assert git(kernel_repo.path, "worktree", "list").count("\n") == 0  # base's and head's worktrees are gone
