"""The review flow (bot/review/flow.py) called directly: one case picked for a bisection with its own latency limit,
what a review without the runner extra says, and a repository with no kernel manifest."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from bot.config.settings import load_settings
from bot.errors import InputError
from bot.ledger import open_ledger
from bot.review import flow
from bot.review.flow import Reviewer, ReviewRequest, missing_runner, only_case
from tests.conftest import KERNELS, REPO_CONFIG, discover, git


def test_only_case_keeps_one_case_and_its_latency_limit() -> None:
    rules = discover(KERNELS.parent, REPO_CONFIG)["deepgemm_tile"]
    assert len(rules.manifest.cases) > 1
    picked = only_case(rules, "square_512", latency_limit_pct=7.5)
    assert [c.name for c in picked.manifest.cases] == ["square_512"]
    assert picked.manifest.constraints.max_regression_pct == 7.5
    assert len(rules.manifest.cases) > 1  # the kernel it came from is untouched
    kept = only_case(rules, "square_512")
    assert kept.manifest.constraints.max_regression_pct == rules.manifest.constraints.max_regression_pct


def test_only_case_names_the_cases_a_kernel_has() -> None:
    rules = discover(KERNELS.parent, REPO_CONFIG)["deepgemm_tile"]
    with pytest.raises(
        InputError, match=r"--case square_51: kernel deepgemm_tile has no such case \(have: square_512, "
    ):
        only_case(rules, "square_51")


REAL_FIND_SPEC = importlib.util.find_spec


def hide(monkeypatch: pytest.MonkeyPatch, *modules: str) -> None:
    """torch and ninja look installed except `modules`; every other module is looked up for real."""

    def find_spec(name: str, *args: object) -> object:
        if name in ("torch", "ninja"):
            return None if name in modules else REAL_FIND_SPEC("json")
        return REAL_FIND_SPEC(name, *args)

    monkeypatch.setattr(flow.importlib.util, "find_spec", find_spec)


def test_a_review_without_the_runner_extra_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    hide(monkeypatch, "torch", "ninja")
    assert missing_runner() == "torch and ninja"
    hide(monkeypatch)
    assert missing_runner() is None
    hide(monkeypatch, "ninja")
    assert missing_runner() == "ninja"
    settings = load_settings({"OPGATE_DATABASE_URL": str(tmp_path / "ledger.sqlite")}, REPO_CONFIG)
    ledger = open_ledger(settings.database_url)
    try:
        request = ReviewRequest(repo=tmp_path, base="main", head="HEAD", out=tmp_path / "out")
        with pytest.raises(InputError, match=r"needs ninja: pip install 'opgate\[runner\]'"):
            Reviewer(request, settings, ledger)
        Reviewer(ReviewRequest(repo=tmp_path, base="main", head="HEAD", out=tmp_path / "out", agent_only=True),
                 settings, ledger)  # fmt: skip
    finally:
        ledger.close()


def test_a_repository_without_a_kernel_manifest_is_an_input_error(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.email", "test@opgate.local")
    git(repo, "config", "user.name", "opgate tests")
    (repo / "README.md").write_text("no kernels here\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "base")
    settings = load_settings({"OPGATE_DATABASE_URL": str(tmp_path / "ledger.sqlite")}, REPO_CONFIG)
    ledger = open_ledger(settings.database_url)
    try:
        request = ReviewRequest(repo=repo, base="main", head="HEAD", out=tmp_path / "out", agent_only=True)
        reviewer = Reviewer(request, settings, ledger)
        with pytest.raises(
            InputError, match=r"no kernel manifest found: kernels/\*/kernel\.toml match no kernel\.toml"
        ):
            reviewer.run()
        assert reviewer.base_sha == reviewer.head_sha == git(repo, "rev-parse", "HEAD")
    finally:
        ledger.close()
