"""Publishing a review: the sticky comment, the status, the step summary, voided acceptances, and
`opgate review --plan/--part/--merge` (the merge itself is in test_fanout.py)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.edges import publish
from bot.edges.events import PullRequestEvent
from bot.ledger import open_ledger
from bot.models.agent_report import AgentReport
from bot.models.ledger import AcceptanceRow, UsageRow
from bot.models.report import Build, Resource
from bot.present.render import REVIEW_MARKER, render_comment
from bot.present.status import acceptance_status
from bot.spend import pull_request
from bot.spend.budget import BudgetState
from tests.github_server import FakeGitHub, load_fixture
from tests.test_accept import BASE, HEAD, OLD, PR, REPO, TOKEN, Accept, github_env, make_report

CONFIG = "kernels/deepgemm_tile/tile_config.json"


def usage(domain: str, tokens: int, pr: int | None = PR, request_id: str | None = None) -> UsageRow:
    return UsageRow(
        task_id="t",
        model_name="m",
        prompt_tokens=tokens,
        completion_tokens=0,
        total_tokens=tokens,
        request_id=request_id or f"req-{domain}-{tokens}-{pr}",
        domain=domain,
        key_fingerprint="sha256:x",
        pr=pr,
        head_sha=HEAD,
        status="ok",
    )


def acceptance(head: str, login: str = "maint-bob", comment_id: int = 1, override: bool = False) -> AcceptanceRow:
    return AcceptanceRow(
        pr=PR, head_sha=head, login=login, role="maintain", kernels=["deepgemm_tile"], override=override,
        reason="timer noise" if override else "", comment_id=comment_id,
    )  # fmt: skip


# ---------------------------------------------------------------------------- pure parts


def event(action: str = "opened", draft: bool = False) -> PullRequestEvent:
    data = load_fixture("pull_request.opened.json", head_sha=HEAD, base_sha=BASE)
    data["action"], data["pull_request"]["draft"] = action, draft
    return PullRequestEvent.model_validate(data)


def test_drafts_and_other_actions_are_skipped() -> None:
    for action in publish.REVIEW_ACTIONS:
        assert publish.skip_reason(event(action)) is None
    assert "draft" in (publish.skip_reason(event(draft=True)) or "")
    assert "'labeled' is not one of" in (publish.skip_reason(event("labeled")) or "")


def test_pr_context_splits_acceptances_by_head_and_sums_spend_of_this_pr_only() -> None:
    report = make_report()
    report.agents.append(AgentReport(status="ok", domain="deepgemm", requests=1, total_tokens=1500))
    rows = [usage("deepgemm", 1000), usage("deepgemm", 1500), usage("deepgemm", 9999, pr=7), usage("flashmla", 10)]
    week = BudgetState(domain="deepgemm", week="2024-W18", limit=10_000, used=2_000, reserved=500)
    accs = [acceptance(OLD), acceptance(HEAD, comment_id=2)]
    ctx = pull_request.pr_context(report, PR, rows, accs, {"deepgemm": week})
    assert [a.head_sha for a in ctx.voided] == [OLD] and [a.head_sha for a in ctx.accepted] == [HEAD]
    spend = {d.domain: d for d in ctx.spend}
    assert (spend["deepgemm"].run_tokens, spend["deepgemm"].pr_requests, spend["deepgemm"].pr_tokens) == (1500, 2, 2500)
    assert (spend["deepgemm"].week_budget, spend["deepgemm"].week_used) == (10_000, 2_500)
    assert spend["flashmla"].week_budget is None and spend["flashmla"].week_used is None
    assert spend["flashmla"].run_tokens == 0 and spend["flashmla"].pr_tokens == 10


def test_the_comment_says_which_head_it_is_for_what_a_push_voided_and_what_the_pr_spent() -> None:
    report = make_report()
    report.agents.append(AgentReport(status="ok", domain="deepgemm", model="deepseek-v4", requests=1, total_tokens=90))
    ctx = pull_request.pr_context(report, PR, [usage("deepgemm", 90), usage("deepgemm", 410)], [acceptance(OLD)])
    text = render_comment(report, unseen_files=["kernels/deepgemm_tile/huge.cu"], pr=ctx)
    assert text.startswith(REVIEW_MARKER + "\n")
    assert f"updated for {HEAD}" in text
    assert "A new push voided an earlier `/accept`" in text
    assert f"@maint-bob (maintain) accepted `deepgemm_tile` for `{OLD[:10]}`; the head is now `{HEAD[:10]}`" in text
    assert "| deepgemm | 90 | 2 | 500 | — | — | — |" in text  # no budget state given: the columns stay empty
    assert "key domain `deepgemm`" in text and "model `deepseek-v4`" in text
    assert "Files the agent did not see: `kernels/deepgemm_tile/huge.cu`" in text
    assert f"opgate review --base {BASE} --head {HEAD}" in text


def test_the_comment_warns_while_self_acceptance_is_allowed() -> None:
    report = make_report()
    allowed = pull_request.pr_context(report, PR, [], [], self_accept=True)
    text = render_comment(report, unseen_files=[], pr=allowed)
    assert "> [!WARNING]\n> **Self-acceptance is allowed here**" in text
    assert "sets `allow_self_accept = true`, so the author of this pull request and whoever pushed" in text
    plain = pull_request.pr_context(report, PR, [], [])
    assert "Self-acceptance" not in render_comment(report, unseen_files=[], pr=plain)


def test_agent_notes_cannot_post_images_html_or_links() -> None:
    report = make_report()
    report.agents.append(
        AgentReport(
            status="ok",
            domain="deepgemm",
            risk_notes=[
                '<img src="https://t.example/p.gif"> ![x](https://t.example/q.png) [docs](https://t.example/d)'
            ],
        )
    )
    text = render_comment(report, unseen_files=[], pr=None)
    assert "<img" not in text and "![x]" not in text and "](https://" not in text and "https://t.example" not in text


def test_resources_put_base_beside_head_and_build_logs_fold() -> None:
    report = make_report()
    kernel = report.kernels[0]
    kernel.build = Build(
        ok=True, seconds=1.0, cached=False, device="cuda", log_tail="ptxas info: Used 128 registers",
        resources=[Resource(function="gemm_tile", registers=128, spill_bytes=16, smem_bytes=49152)],
    )  # fmt: skip
    kernel.base_build = Build(
        ok=True, seconds=1.0, cached=True, device="cuda",
        resources=[Resource(function="gemm_tile", registers=96, spill_bytes=0, smem_bytes=32768)],
    )  # fmt: skip
    text = render_comment(report, unseen_files=[], pr=None)
    # a report without launch descriptions (older, or no [launch]): static smem only, no occupancy
    assert "| `gemm_tile` | 96 → 128 | 0 → **16** | 32,768 → 49,152 | — | — → — | — → — | — | 0 → 0 |" in text
    assert "<details><summary>build log (head, cuda)</summary>" in text and "Used 128 registers" in text


@pytest.mark.parametrize(
    ("verdicts", "state", "description"),
    [
        ({"deepgemm_tile": "pass"}, "success", "all gates pass: deepgemm_tile"),
        ({}, "success", "no kernel changed"),
        ({"deepgemm_tile": "fail"}, "failure", "gate failed: deepgemm_tile — latency p50 +7.1%"),
        ({"deepgemm_tile": "error"}, "error", "could not judge: deepgemm_tile — latency p50"),
    ],
)
def test_the_status_is_one_line_per_verdict(verdicts, state, description) -> None:
    got_state, got_description = acceptance_status(make_report(verdicts=verdicts))
    assert got_state == state and got_description.startswith(description)


def test_an_override_for_this_head_keeps_the_gate_green_on_a_rerun() -> None:
    report = make_report(verdicts={"deepgemm_tile": "fail"})
    assert acceptance_status(report, [acceptance(OLD, override=True)])[0] == "failure"
    state, description = acceptance_status(report, [acceptance(HEAD, override=True)])
    assert state == "success" and description == "gates failed, overridden by @maint-bob (maintain): timer noise"


def test_the_step_summary_is_appended_without_the_marker(tmp_path: Path) -> None:
    path = tmp_path / "summary.md"
    path.write_text("# earlier step\n")
    publish.write_step_summary(path, f"{REVIEW_MARKER}\n## opgate: pass\n")
    assert path.read_text() == "# earlier step\n## opgate: pass\n\n"
    publish.write_step_summary(None, "ignored")


# ---------------------------------------------------------------------------- end to end


@pytest.fixture
def server() -> Iterator[FakeGitHub]:
    with FakeGitHub(TOKEN) as gh:
        gh.add_repo(REPO)
        gh.set_permission(REPO, "maint-bob", "maintain")
        yield gh


class Review:
    """Writes a pull_request event for the scratch repository and runs `opgate review --event … --post`."""

    def __init__(self, opgate, server: FakeGitHub, repo, tmp_path: Path) -> None:
        self.opgate, self.server, self.repo, self.tmp_path = opgate, server, repo, tmp_path
        self.summary = tmp_path / "step_summary.md"
        self.opened = False

    def __call__(self, head: str, action: str = "opened", *extra: str, post: bool = True, draft: bool = False):
        data = load_fixture(f"pull_request.{'synchronize' if action == 'synchronize' else 'opened'}.json",
                            head_sha=head, base_sha=self.repo.base, before_sha=OLD)  # fmt: skip
        data["action"], data["pull_request"]["draft"] = action, draft
        path = self.tmp_path / f"event-{head[:8]}-{action}.json"
        path.write_text(json.dumps(data))
        if not self.opened:  # the PR as the API shows it: opened at the first head reviewed
            self.server.add_pull(REPO, number=PR, head_sha=head, base_sha=self.repo.base, author="alice-dev")
            self.opened = True
        self.server.requests.clear()
        env = github_env(self.server) | {"GITHUB_STEP_SUMMARY": str(self.summary)}
        args = ["review", "--event", str(path), "--repo", str(self.repo.path), *(["--post"] if post else []), *extra]
        return self.opgate(*args, env=env, timeout=300)

    def calls(self) -> list[tuple[str, str]]:
        return [(r.method, r.path) for r in self.server.requests]


@pytest.fixture
def review(opgate, server: FakeGitHub, kernel_repo, tmp_path: Path) -> Review:
    return Review(opgate, server, kernel_repo, tmp_path)


def test_a_pull_request_event_posts_one_comment_and_a_status(review: Review, server, kernel_repo) -> None:
    kernel_repo.edit(CONFIG, '"tile_m": 128', '"tile_m": 96')  # fails statically: no build
    head = kernel_repo.commit()
    run = review(head)
    assert run.code == 1, run.stderr
    assert review.calls() == [
        ("GET", f"/repos/{REPO}/issues/{PR}/comments"),
        ("POST", f"/repos/{REPO}/issues/{PR}/comments"),
        ("POST", f"/repos/{REPO}/statuses/{head}"),
        ("POST", f"/repos/{REPO}/check-runs"),
    ]
    (comment,) = server.comments(REPO, PR)
    assert comment["body"] == run.comment  # comment.md is exactly what was posted
    assert comment["body"].startswith(REVIEW_MARKER) and f"updated for {head}" in comment["body"]
    (status,) = server.statuses(REPO, head)
    assert (status["context"], status["state"]) == ("opgate/acceptance", "failure")
    assert status["description"] == "gate failed: deepgemm_tile — tile_config.json: tile_m=96 not in {64,128,256}"
    assert status["target_url"] == comment["html_url"]
    assert review.summary.read_text().startswith("## ❌ opgate: **fail**")
    assert "| deepgemm | 0 | 0 | 0 | 0 | 500,000 | 0.0% |" in comment["body"]  # offline: no spend, default budget
    assert f"posted:  {comment['html_url']} (opgate/acceptance=failure)" in run.stdout
    (check,) = server.check_runs(REPO, head)  # the static failure sits on the tunable's line of the config
    assert (check["name"], check["conclusion"]) == ("opgate/review", "neutral")
    assert [(a["path"], a["start_line"], a["annotation_level"], a["message"]) for a in check["annotations"]] == [
        ("kernels/deepgemm_tile/tile_config.json", 1, "failure", "tile_config.json: tile_m=96 not in {64,128,256}")
    ]
    assert check["output"]["summary"].startswith(f"opgate/acceptance: {status['description']}")
    assert f"check:   opgate/review: 1 annotation(s) {check['html_url']}" in run.stdout
    assert json.loads((run.out / "annotations.json").read_text()) == check["annotations"]  # what was located, posted
    assert TOKEN not in run.stdout + run.stderr


def test_a_rerun_edits_the_same_comment(review: Review, server, kernel_repo) -> None:
    kernel_repo.edit(CONFIG, '"tile_m": 128', '"tile_m": 96')
    first = kernel_repo.commit()
    assert review(first).code == 1
    (original,) = server.comments(REPO, PR)
    kernel_repo.edit(CONFIG, '"tile_m": 96', '"tile_m": 97')
    second = kernel_repo.commit()
    run = review(second, "synchronize")
    assert run.code == 1, run.stderr
    assert review.calls() == [
        ("GET", f"/repos/{REPO}/issues/{PR}/comments"),
        ("PATCH", f"/repos/{REPO}/issues/comments/{original['id']}"),
        ("POST", f"/repos/{REPO}/statuses/{second}"),
        ("POST", f"/repos/{REPO}/check-runs"),  # a check run of its own per review: GitHub shows the newest
    ]
    (edited,) = server.comments(REPO, PR)
    assert (
        edited["id"] == original["id"] and f"updated for {second}" in edited["body"] and "tile_m=97" in edited["body"]
    )


def test_a_push_after_accept_voids_it_and_the_next_comment_says_so(review: Review, server, kernel_repo, tmp_path):
    kernel_repo.edit(CONFIG, '"tile_m": 128', '"tile_m": 96')
    first = kernel_repo.commit()
    assert review(first).code == 1
    accept = Accept(review.opgate, server, tmp_path)
    granted = accept('/accept --override "tile 96 measured by hand on H100: +1.2%"')
    assert granted.code == 0 and "granted" in granted.stdout, granted.stderr
    assert {s["context"]: s["state"] for s in server.statuses(REPO, first)} == {
        "opgate/acceptance": "success",  # failure, then overridden
        "opgate/accepted": "success",
    }

    kernel_repo.write("kernels/deepgemm_tile/NOTES.md", "pushed after the accept\n")
    second = kernel_repo.commit()
    run = review(second, "synchronize")
    assert run.code == 1, run.stderr
    bodies = [c["body"] for c in server.comments(REPO, PR) if c["body"].startswith(REVIEW_MARKER)]
    assert len(bodies) == 1
    assert "A new push voided an earlier `/accept`" in bodies[0]
    assert f"@maint-bob (maintain) accepted `deepgemm_tile` for `{first[:10]}` with --override" in bodies[0]
    assert f"the head is now `{second[:10]}`" in bodies[0]
    assert {s["context"]: s["state"] for s in server.statuses(REPO, second)} == {"opgate/acceptance": "failure"}


def test_a_draft_is_skipped_without_a_call(review: Review, kernel_repo) -> None:
    kernel_repo.write("README.md", "docs only\n")
    run = review(kernel_repo.commit(), draft=True)
    assert run.code == 0 and "skipped" in run.stdout and "draft" in run.stdout
    assert review.calls() == [] and not (run.out / "report.json").exists()


def test_a_5xx_is_retried(review: Review, server, kernel_repo) -> None:
    kernel_repo.write("README.md", "docs only: no kernel changed\n")
    head = kernel_repo.commit()
    server.fail(f"/repos/{REPO}/statuses/{head}", status=502, times=1)
    run = review(head)
    assert run.code == 0, run.stderr
    assert [r.status for r in server.requests_to("POST", f"/repos/{REPO}/statuses/{head}")] == [502, 201]
    assert [s["state"] for s in server.statuses(REPO, head)] == ["success"]
    assert "retry 1/3" in run.stderr


def test_a_github_outage_exits_3_with_the_local_report_written(review: Review, server, kernel_repo) -> None:
    kernel_repo.write("README.md", "docs only: no kernel changed\n")
    head = kernel_repo.commit()
    server.fail(re.compile(rf"/repos/{REPO}/issues/{PR}/comments"), status=503, times=None)
    run = review(head)
    assert run.code == 3, run.stderr
    assert run.report["verdict"] == "pass" and run.comment.startswith(REVIEW_MARKER)
    assert "outside service failed" in run.stdout and "HTTP 503" in run.stdout and "after 4 attempts" in run.stdout
    assert len(server.requests_to("GET", f"/repos/{REPO}/issues/{PR}/comments")) == 4
    assert server.comments(REPO, PR) == [] and server.statuses(REPO, head) == []
    assert TOKEN not in run.stdout + run.stderr


def test_post_without_a_token_is_a_configuration_error(opgate, kernel_repo) -> None:
    kernel_repo.write("README.md", "x\n")
    run = opgate("review", "--repo", str(kernel_repo.path), "--base", kernel_repo.base, "--head",
                 kernel_repo.commit(), "--pr", "42", "--post")  # fmt: skip
    assert run.code == 2 and "GITHUB_TOKEN is not set" in run.stderr
    assert not (run.out / "report.json").exists()  # checked before the review, not after


def test_plan_then_parts_then_merge_and_post(opgate, server, kernel_repo, tmp_path) -> None:
    kernel_repo.edit(CONFIG, '"tile_m": 128', '"tile_m": 96')
    kernel_repo.write("docs/tiles.md", "# Tiles\n\ntile_m 96 measured by hand\n")  # no gate reads it
    head = kernel_repo.commit()
    server.add_pull(REPO, number=PR, head_sha=head, base_sha=kernel_repo.base)
    repo, base = str(kernel_repo.path), kernel_repo.base

    planned = opgate("review", "--plan", "--repo", repo, "--base", base, "--head", head)
    assert planned.code == 0, planned.stderr
    assert json.loads(planned.stdout) == {
        "include": [{"kernel": "deepgemm_tile", "domain": "deepgemm"}],  # one agent job per kernel
        "gpu": [{"kernel": "deepgemm_tile", "domain": "deepgemm", "arch": "sm_90", "part": "deepgemm_tile"}],
    }

    parts = tmp_path / "parts"
    part = opgate("review", "--repo", repo, "--base", base, "--head", head, "--pr", str(PR),
                  "--kernel", "deepgemm_tile", "--out", str(parts / "part-deepgemm_tile"))  # fmt: skip
    assert part.code == 1, part.stderr
    (parts / "part-flashmla_decode").mkdir()  # planned, but its job left nothing

    out = tmp_path / "merged"
    merged = opgate("review", "--merge", *map(str, sorted(parts.iterdir())), "--base", base, "--head", head,
                    "--pr", str(PR), "--out", str(out), "--post", env=github_env(server))  # fmt: skip
    assert merged.code == 1, merged.stderr
    report = json.loads((out / "report.json").read_text())
    assert [(k["name"], k["verdict"]) for k in report["kernels"]] == [
        ("deepgemm_tile", "fail"),
        ("flashmla_decode", "error"),
    ]
    (status,) = server.statuses(REPO, head)
    assert status["state"] == "error" and status["description"].startswith("could not judge: deepgemm_tile, flashmla")
    (comment,) = server.comments(REPO, PR)
    assert comment["body"] == (out / "comment.md").read_text()
    (check,) = server.check_runs(REPO, head)  # the part's annotations, located where head was, posted by the merge
    assert [(a["path"], a["start_line"], a["annotation_level"]) for a in check["annotations"]] == [
        ("kernels/deepgemm_tile/tile_config.json", 1, "failure"),  # the tunable outside its set, on its line
        ("docs/tiles.md", 1, "warning"),
    ]
    assert json.loads((out / "annotations.json").read_text()) == json.loads(
        (parts / "part-deepgemm_tile" / "annotations.json").read_text()
    )
    ledger = open_ledger(str(tmp_path / "ledger.sqlite"))
    latest = ledger.latest_review(head)
    ledger.close()
    assert latest is not None and [k.name for k in latest.kernels] == ["deepgemm_tile", "flashmla_decode"]


def test_plan_of_a_change_outside_every_kernel_is_empty(opgate, kernel_repo) -> None:
    kernel_repo.write("README.md", "docs\n")
    head = kernel_repo.commit()
    run = opgate("review", "--plan", "--repo", str(kernel_repo.path), "--base", kernel_repo.base, "--head", head)
    assert run.code == 0 and json.loads(run.stdout) == {"include": [], "gpu": []}


@pytest.mark.untimed  # the same build: never timed
@pytest.mark.slow
def test_a_passing_review_sets_success(review: Review, server, kernel_repo) -> None:
    kernel_repo.write("kernels/deepgemm_tile/NOTES.md", "a note: touches the kernel, changes no code\n")
    head = kernel_repo.commit()
    run = review(head)
    assert run.code == 0, run.stderr
    (status,) = server.statuses(REPO, head)
    assert (status["state"], status["description"]) == ("success", "all gates pass: deepgemm_tile")
