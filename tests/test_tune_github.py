"""`opgate tune` on GitHub, through the local GitHub server: the winner as a branch and a pull request (git data
API, then pulls), and the `/tune KERNEL` comment's role check and dispatch."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bot import __version__
from bot.models.report import Machine
from bot.tune.model import CaseResult, RoundEvent, Stop, Trial
from bot.tune.result import TUNE_MARKER, Proposed, TokenUse, TuneResult
from bot.tune.space import config_key, file_patch
from tests.conftest import git
from tests.github_server import FakeGitHub, load_fixture
from tests.test_accept import REPO, TOKEN, github_env

CONFIG = "kernels/deepgemm_tile/tile_config.json"
RUN = "tune-deepgemm_tile-0123abcd-9f8e7d"
BRANCH = "opgate/tune-deepgemm_tile-9f8e7d"
ISSUE = 7


@pytest.fixture
def server():
    with FakeGitHub(token=TOKEN) as gh:
        gh.add_repo(REPO)
        yield gh


def outcome(base_sha: str, base_text: str) -> TuneResult:
    """A finished run whose winner (tile_n 128 -> 256) was re-verified: what `opgate tune` writes as tune.json."""
    base = json.loads(base_text)
    config = {**base, "tile_n": 256}
    patch = file_patch(CONFIG, base_text, json.dumps(config) + "\n")
    cases = [
        CaseResult(name="square_512", verdict="pass", regression_pct=-6.1, ci95_pct=(-7.0, -5.2), p50_ms=2.1,
                   base_p50_ms=2.24),
        CaseResult(name="ragged_200x328x264", verdict="pass", regression_pct=-1.0, ci95_pct=(-2.0, 0.1), p50_ms=0.5,
                   base_p50_ms=0.505),
    ]  # fmt: skip
    found = Trial(key=config_key(config), config=config, source="agent", status="judged", verdict="pass",
                  cases=cases, patch=patch, run_id=RUN)  # fmt: skip
    verified = found.model_copy(update={"source": "verify", "verify_of": RUN})
    return TuneResult(
        run_id=RUN, kernel="deepgemm_tile", domain="deepgemm", base_sha=base_sha, device_name="cpu", strategy="agent",
        config_path=CONFIG, base_config=base, max_rounds=6, rounds=3, space_size=27, seen=4,
        stop=Stop(kind="plateau", detail="the best verified speedup ×1.037 has not improved over 3 rounds"),
        events=[RoundEvent(seq=1, round=1, source="agent", outcome="judged", key=found.key, tokens=1555)],
        trials=[found], best=found, verified=verified,
        proposal=Proposed(key=found.key, label=found.label, config=config, patch=patch, speedup=found.speedup or 1,
                          verified_speedup=verified.speedup or 1, branch=BRANCH),
        pass_rate=(1, 2), tokens=TokenUse(requests=3, prompt_tokens=3702, completion_tokens=963, total_tokens=4665,
                                          limit=20_000, weekly_left=480_000),
        environment=Machine(device="cpu", python="3.11"), created_at="2026-03-04T12:00:00+00:00",
        opgate_version=__version__,
    )  # fmt: skip


@pytest.fixture
def published(kernel_repo, server, tmp_path):
    """The scratch repository pushed to the server's git store, an issue to reply on, and a tune.json."""
    bare = server.git(REPO)
    git(kernel_repo.path, "push", "-q", str(bare.path), "main")
    server.add_issue(REPO, "Tune deepgemm_tile", author="maint-bob")  # #1
    for n in range(2, ISSUE + 1):
        server.add_issue(REPO, f"issue {n}")
    result = outcome(kernel_repo.base, (kernel_repo.path / CONFIG).read_text())
    folder = tmp_path / "tune-out"
    folder.mkdir()
    (folder / "tune.json").write_text(result.to_json())
    return folder, result


def post(opgate, server, kernel_repo, folder: Path, *extra: str):
    args = ["tune", "--publish", str(folder), "--repo", str(kernel_repo.path), "--post", *extra]
    return opgate(*args, env=github_env(server), timeout=120)


def fetch(repo: Path, bare: Path, branch: str) -> str:
    git(repo, "fetch", "-q", str(bare), f"+refs/heads/{branch}:refs/remotes/fake/{branch}")
    return git(repo, "rev-parse", f"refs/remotes/fake/{branch}")


def test_the_winner_becomes_a_branch_and_a_pull_request_with_the_evidence(
    opgate, server, kernel_repo, published
) -> None:
    folder, result = published
    run = post(opgate, server, kernel_repo, folder, "--issue", str(ISSUE))
    assert run.code == 0, run.stderr
    [pull] = [i for i in server.issues(REPO, include_pulls=True) if "pull_request" in i]
    assert f"posted:  {pull['html_url']} (opened, branch {BRANCH})" in run.stdout
    assert pull["title"] == "opgate tune: deepgemm_tile tile_m=128 tile_n=256 tile_k=64 (x1.037 re-verified)"
    body = pull["body"]
    assert body.startswith(TUNE_MARKER) and "### Evidence: the winner re-verified against base" in body
    assert "| `square_512` | 2.24 ms | 2.1 ms | -6.10% | -7.00% to -5.20% | pass |" in body
    assert "| 3 | 3,702 | 963 | 4,665 | 20,000 | 480,000 |" in body  # the tokens spent
    assert "The normal review runs on this pull request." in body
    # the branch: one commit on top of base, with exactly the patch, written through blobs, a tree and a commit
    sha = fetch(kernel_repo.path, server.git(REPO).path, BRANCH)
    assert git(kernel_repo.path, "rev-parse", f"{sha}^") == kernel_repo.base
    assert git(kernel_repo.path, "diff", "--name-only", kernel_repo.base, sha) == CONFIG
    assert json.loads(git(kernel_repo.path, "show", f"{sha}:{CONFIG}")) == result.proposal.config
    assert git(kernel_repo.path, "log", "-1", "--format=%an <%ae> %aI", sha) == (
        "opgate <opgate@users.noreply.github.com> 2026-03-04T12:00:00+00:00"
    )
    calls = [(r.method, r.path.rsplit("/", 1)[-1] if "/git/" in r.path else r.path) for r in server.writes()]
    assert calls[:4] == [("POST", "blobs"), ("POST", "trees"), ("POST", "commits"), ("POST", "refs")]
    assert ("POST", f"/repos/{REPO}/pulls") in calls
    pulled = json.loads((folder / "pull.json").read_text())
    assert pulled == {"number": pull["number"], "url": pull["html_url"], "head_sha": sha, "branch": BRANCH,
                      "created": True}  # fmt: skip
    assert json.loads((folder / "tune.json").read_text())["pull"]["number"] == pull["number"]
    [reply] = server.comments(REPO, ISSUE)
    assert f"/pull/{pull['number']} proposes" in reply["body"]
    assert "x1.037 re-verified" in reply["body"].replace("×", "x")


def test_posting_again_finds_the_same_branch_and_pull_request(opgate, server, kernel_repo, published) -> None:
    folder, _ = published
    assert post(opgate, server, kernel_repo, folder).code == 0
    server.requests.clear()
    again = post(opgate, server, kernel_repo, folder)
    assert again.code == 0, again.stderr
    assert "(already open," in again.stdout
    assert len([i for i in server.issues(REPO, include_pulls=True) if "pull_request" in i]) == 1
    assert not server.requests_to("POST", f"/repos/{REPO}/pulls") and not server.requests_to("PATCH")


def test_a_lost_answer_and_a_stale_branch_still_give_one_commit_on_base(opgate, server, kernel_repo, published):
    folder, _ = published
    kernel_repo.write("README.md", "an older attempt\n")
    stale = kernel_repo.commit("an older attempt on the same branch")
    git(kernel_repo.path, "push", "-q", str(server.git(REPO).path), f"{stale}:refs/heads/{BRANCH}")
    server.fail(f"/repos/{REPO}/git/commits", method="POST", status=502, after=True)  # made, but the answer is lost
    run = post(opgate, server, kernel_repo, folder)
    assert run.code == 0, run.stderr
    sha = fetch(kernel_repo.path, server.git(REPO).path, BRANCH)
    assert git(kernel_repo.path, "rev-parse", f"{sha}^") == kernel_repo.base
    assert server.requests_to("PATCH", f"/repos/{REPO}/git/refs/heads/{BRANCH}")  # the stale branch was moved
    assert len([i for i in server.issues(REPO, include_pulls=True) if "pull_request" in i]) == 1


def test_a_result_without_a_proposal_replies_and_pushes_nothing(opgate, server, kernel_repo, published) -> None:
    folder, result = published
    nothing = result.model_copy(update={"proposal": None, "not_proposed": "no candidate beat base by ≥ 1%",
                                        "stop": Stop(kind="budget", detail="spent", handover=True)})  # fmt: skip
    (folder / "tune.json").write_text(nothing.to_json())
    run = post(opgate, server, kernel_repo, folder, "--issue", str(ISSUE))
    assert run.code == 0, run.stderr
    assert not server.requests_to("POST", f"/repos/{REPO}/git/blobs")
    [reply] = server.comments(REPO, ISSUE)
    assert "nothing proposed" in reply["body"] and "hand over to a person: review the search space" in reply["body"]


def test_a_tampered_result_is_refused(opgate, server, kernel_repo, published) -> None:
    folder, result = published
    data = json.loads(result.to_json())
    data["proposal"]["patch"] = data["proposal"]["patch"].replace("kernels/deepgemm_tile/", ".github/workflows/")
    (folder / "tune.json").write_text(json.dumps(data))
    run = post(opgate, server, kernel_repo, folder)
    assert run.code == 2 and "outside kernels/deepgemm_tile/" in run.stderr
    assert not server.writes()
    (folder / "tune.json").write_text('{"schema": "opgate.review/1"}')
    assert post(opgate, server, kernel_repo, folder).code == 2


# ---------------------------------------------------------------------------- /tune KERNEL


class Slash:
    """Posts a comment, writes its issue_comment event, runs `opgate tune --event … [--post]`."""

    def __init__(self, opgate, server: FakeGitHub, repo: Path, tmp: Path) -> None:
        self.opgate, self.server, self.repo, self.tmp = opgate, server, repo, tmp

    def __call__(self, body: str, *, login: str = "maint-bob", post: bool = True, action: str = "created"):
        number = self.server.add_issue(REPO, "Tune please", author="alice-dev")
        comment_id = self.server.add_comment(REPO, number, body, author=login)
        self.server.requests.clear()
        event = load_fixture("issue_comment.on_issue.json")
        event["action"] = action
        event["comment"].update(id=comment_id, body=body)
        event["comment"]["user"]["login"] = event["sender"]["login"] = login
        event["comment"]["user"]["type"] = event["sender"]["type"] = "Bot" if login.endswith("[bot]") else "User"
        event["issue"]["number"] = number
        path = self.tmp / f"event-{comment_id}.json"
        path.write_text(json.dumps(event))
        self.number, self.comment_id = number, comment_id
        args = ["tune", "--event", str(path), "--repo", str(self.repo)] + (["--post"] if post else [])
        return self.opgate(*args, env=github_env(self.server), timeout=60)

    def reactions(self) -> list[str]:
        return [r["content"] for r in self.server.reactions(self.comment_id)]

    def replies(self) -> list[str]:
        return [c["body"] for c in self.server.comments(REPO, self.number)[1:]]


@pytest.fixture
def slash(opgate, server, kernel_repo, tmp_path) -> Slash:
    server.set_permission(REPO, "maint-bob", "write")
    server.set_permission(REPO, "rita-reader", "read")
    return Slash(opgate, server, kernel_repo.path, tmp_path)


def test_tune_by_a_writer_dispatches_the_workflow(slash: Slash, server: FakeGitHub) -> None:
    run = slash("/tune deepgemm_tile --strategy both --rounds 4")
    assert run.code == 0, run.stderr
    assert server.dispatches == [
        {"repository": REPO, "workflow": "tune.yml", "ref": "main",
         "inputs": {"kernel": "deepgemm_tile", "strategy": "both", "rounds": "4", "issue": str(slash.number)}}
    ]  # fmt: skip
    assert slash.reactions() == ["eyes", "rocket"]
    [reply] = slash.replies()
    assert "tune.yml" in reply and "deepgemm_tile" in reply


def test_the_author_of_the_issue_may_tune_too(slash: Slash, server: FakeGitHub) -> None:
    """Unlike /accept, /tune has no rule against the author: it proposes a change and accepts nothing."""
    server.set_permission(REPO, "alice-dev", "write")
    run = slash("/tune deepgemm_tile", login="alice-dev")  # on an issue alice-dev opened
    assert run.code == 0, run.stderr
    assert slash.reactions() == ["eyes", "rocket"] and len(server.dispatches) == 1


@pytest.mark.parametrize(
    ("body", "login", "why"),
    [
        ("/tune deepgemm_tile", "rita-reader", "has the role `read` here; `/tune` needs write, maintain or admin"),
        ("/tune nope", "maint-bob", "no kernel `nope` on the default branch (have: `deepgemm_tile`)"),
        ("/tune deepgemm_tile --rounds many", "maint-bob", "--rounds needs a whole number"),
    ],
)
def test_tune_is_refused_with_the_reason(slash: Slash, server: FakeGitHub, body: str, login: str, why: str) -> None:
    run = slash(body, login=login)
    assert run.code == 0, run.stderr
    assert server.dispatches == []
    assert slash.reactions() == ["eyes", "-1"]
    [reply] = slash.replies()
    assert why in reply and "refused" in reply


@pytest.mark.parametrize(
    ("body", "login", "action"),
    [("/tune deepgemm_tile", "opgate[bot]", "created"), ("/tune deepgemm_tile", "maint-bob", "edited"),
     ("please /tune deepgemm_tile", "maint-bob", "created")],
)  # fmt: skip
def test_bots_edits_and_other_comments_are_ignored(slash: Slash, server: FakeGitHub, body, login, action) -> None:
    run = slash(body, login=login, action=action)
    assert run.code == 0 and "ignored" in run.stdout and server.requests == []


def test_without_post_tune_only_says_what_it_would_do(slash: Slash, server: FakeGitHub) -> None:
    run = slash("/tune deepgemm_tile", post=False)
    assert run.code == 0 and "granted" in run.stdout and "dry run" in run.stdout
    assert server.writes() == [] and server.dispatches == []


def test_the_pull_request_opened_is_dispatched_for_review_at_its_head(opgate, server, kernel_repo, published) -> None:
    """tune.yml's publish job: opgate dispatches pr-review.yml for the new pull request's head (no `gh` there)."""
    folder, _ = published
    run = post(opgate, server, kernel_repo, folder, "--review-workflow", "pr-review.yml")
    assert run.code == 0, run.stderr
    pulled = json.loads((folder / "pull.json").read_text())
    assert pulled["head_sha"] == fetch(kernel_repo.path, server.git(REPO).path, BRANCH)
    assert [(d["workflow"], d["ref"], d["inputs"]) for d in server.dispatches] == [
        ("pr-review.yml", "main", {"pr": str(pulled["number"]), "head_sha": pulled["head_sha"]})
    ]
    assert f"review:  pr-review.yml dispatched for #{pulled['number']}" in run.stdout
    bad = post(opgate, server, kernel_repo, folder, "--review-workflow", "../pr-review.yml")
    assert bad.code == 2 and "--review-workflow: not a workflow file" in bad.stderr
    assert len(server.dispatches) == 1
