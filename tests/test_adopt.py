"""A team adopting opgate: nothing passes silently, the CLI's conventions, the ledger path, the CI agent key."""

from __future__ import annotations

import json

import pytest

from tests.conftest import git, make_repo


def test_a_repository_where_no_manifest_is_found_says_so_and_exits_2(opgate, tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.email", "t@opgate.local")
    git(repo, "config", "user.name", "t")
    (repo / "ops" / "gemm").mkdir(parents=True)
    (repo / "ops" / "gemm" / "gemm.cu").write_text("// v1\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "base")
    (repo / "ops" / "gemm" / "gemm.cu").write_text("// v2\n")
    git(repo, "commit", "-q", "-am", "change")
    for mode in ([], ["--plan"]):
        run = opgate("review", "--repo", str(repo), "--base", "HEAD~1", "--head", "HEAD", *mode)
        assert run.code == 2, run.stderr
        line = run.stderr.strip().splitlines()[-1]
        assert "no kernel manifest found: kernels/*/kernel.toml match no kernel.toml in base or head" in line
        assert "set manifests in pyproject.toml ([tool.opgate]) or opgate.toml" in line


def test_a_changed_kernel_source_no_manifest_claims_fails_the_review_and_the_plan(opgate, tmp_path):
    repo = make_repo(tmp_path / "repo", ["deepgemm_tile"])
    repo.write("ops/fused_moe.cu", "__global__ void fused_moe() {}\n")
    repo.write("docs/notes.md", "a note\n")
    head = repo.commit("a kernel outside every manifest")
    args = ["review", "--repo", str(repo.path), "--base", repo.base, "--head", head]

    plan = opgate(*args, "--plan")
    assert (plan.code, json.loads(plan.stdout)) == (1, {"include": [], "gpu": []})
    assert "1 changed kernel source file(s) no kernel.toml claims (ops/fused_moe.cu)" in plan.stderr

    run = opgate(*args, "--offline")
    assert run.code == 1, run.stderr
    assert "verdict FAIL (no kernel changed)" in run.stdout
    assert "opgate: unjudged: 1 changed kernel source" in run.stdout
    coverage = run.report["coverage"]
    assert coverage["kernel_sources"] == {"total": 1, "names": ["ops/fused_moe.cu"]}
    assert coverage["unmatched"]["names"] == ["docs/notes.md", "ops/fused_moe.cu"]
    assert "ops/fused_moe.cu" in run.comment

    # The configuration may excuse vendored sources: then the change passes (and is still listed).
    (repo.path / "opgate.toml").write_text('ignore = ["ops/**"]\n' + (repo.path / "opgate.toml").read_text())
    run = opgate(*args, "--offline", "--json")
    assert run.code == 0, run.stderr
    assert json.loads(run.stdout) | {"report": "", "comment": ""} == {
        "verdict": "pass",
        "summary": "no kernel changed",
        "kernels": [],
        "unclaimed": None,
        "report": "",
        "comment": "",
        "service_errors": [],
        "posted": None,
    }


@pytest.mark.parametrize("where", ["before", "after"])
def test_global_flags_work_before_and_after_the_subcommand(opgate, where):
    flags = ["-q", "--json"]
    args = [*flags, "ledger", "budget"] if where == "before" else ["ledger", "budget", *flags]
    run = opgate(*args)
    assert run.code == 0, run.stderr
    data = json.loads(run.stdout)
    assert [d["domain"] for d in data["domains"]] == ["deepgemm", "flashmla", "v41_attention", "ci_summary"]
    assert data["domains"][0] | {"anomaly": ""} == {
        "domain": "deepgemm",
        "used": 0,
        "reserved": 0,
        "left": 500_000,
        "budget": 500_000,
        "pct_used": 0.0,
        "anomaly": "",
        "flagged": False,
    }
    assert run.stderr == ""  # --quiet and --json: no log lines


def test_commands_that_print_data_print_json(opgate, tmp_path):
    summary = opgate("summary", "--week", "2026-W10", "--out-dir", str(tmp_path / "r"), "--json")
    data = json.loads(summary.stdout)
    assert summary.code == 0 and data["week"] == "2026-W10" and data["issue"] is None
    assert [d["label"] for d in data["domains"]] == ["DeepGEMM", "FlashMLA", "V4.1 attention", "CI summary"]
    export = opgate("ledger", "export", "--csv", str(tmp_path / "usage.csv"), "--json")
    assert json.loads(export.stdout) == {"rows": 0, "csv": str(tmp_path / "usage.csv")}
    site = opgate("dashboard", "--out", str(tmp_path / "site"), "--json")
    assert json.loads(site.stdout)["pages"] == ["index.html", "tokens.html", "tuning.html"]
    lint = opgate("lint", "--json", str(tmp_path / "opgate.toml"))
    assert lint.code == 0 and json.loads(lint.stdout)["counts"]["error"] == 0


def test_a_ledger_whose_folder_does_not_exist_is_an_error_unless_created(opgate, tmp_path, kernel_repo):
    missing = tmp_path / "nonexistent" / "dir" / "x.sqlite"
    run = opgate("ledger", "budget", env={"OPGATE_DATABASE_URL": str(missing)})
    assert run.code == 2 and not missing.parent.exists()
    assert run.stderr.strip() == (
        f"opgate: error: ledger {missing}: its folder {missing.parent} does not exist; fix OPGATE_DATABASE_URL "
        "(or the configuration's ledger), create the folder, or pass --create-ledger"
    )
    run = opgate("ledger", "budget", "--create-ledger", env={"OPGATE_DATABASE_URL": str(missing)})
    assert run.code == 2 and "unrecognized arguments: --create-ledger" in run.stderr  # it only reads the ledger
    assert not missing.parent.exists()
    review = ("review", "--repo", str(kernel_repo.path), "--base", "HEAD", "--head", "HEAD", "--offline")
    run = opgate(*review, "--create-ledger", env={"OPGATE_DATABASE_URL": str(missing)})  # a command that writes it
    assert run.code == 0, run.stderr
    assert missing.is_file()


def test_the_ci_agent_key_serves_one_kernel_and_never_a_whole_review(opgate, kernel_repo):
    run = opgate(
        "review", "--repo", str(kernel_repo.path), "--base", "HEAD", "--head", "HEAD",
        env={"OPGATE_AGENT_KEY": "sk-ci-agent-0123456789abcdef"},
    )  # fmt: skip
    assert run.code == 2 and "OPGATE_AGENT_KEY is one domain's key: give --kernel K" in run.stderr
    assert "sk-ci-agent" not in run.stdout + run.stderr


def test_every_error_names_its_fix_and_the_help_lists_the_exit_codes(opgate):
    run = opgate("--help")
    assert run.code == 0 and "exit codes:" in run.stdout and "2  bad input or configuration" in run.stdout
    run = opgate("ledger", "budget", "--help")
    assert "3  an outside service" in run.stdout and "--create-ledger" not in run.stdout
    run = opgate("review", "--help")
    assert "3  an outside service" in run.stdout and "--create-ledger" in run.stdout


@pytest.mark.slow
@pytest.mark.untimed
def test_a_repository_with_its_sources_at_the_root_is_adopted_checked_and_reviewed(opgate, tmp_path):
    """The minimal flash-attention layout (main.cpp + flash.cu at the root, loaded by bench.py; .github/, tests/,
    docs/ beside them): init --kernels ., check, then a change's review compiles the kernel with the drafted
    [launch] figures, and a docs change beside it stays outside the kernel."""
    import torch

    from tests.layout_repos import REFERENCE_PY, commit, root_layout

    repo = root_layout(tmp_path / "flash")
    commit(repo)
    run = opgate("init", "--repo", str(repo), "--kernels", ".", "--domain", "flash")
    assert run.code == 0, run.stderr
    (repo / "reference.py").write_text(REFERENCE_PY)  # what the team writes after init
    commit(repo, "adopt opgate")
    run = opgate("check", "--repo", str(repo))
    assert run.code == 0, run.stdout + run.stderr
    base = git(repo, "rev-parse", "HEAD").strip()
    flash = (repo / "flash.cu").read_text()
    (repo / "flash.cu").write_text(flash.replace("sram[threadIdx.x] * v[i]", "v[i] * sram[threadIdx.x]"))
    (repo / "docs" / "index.md").write_text("# docs\n\nmore\n")
    commit(repo, "reorder the product")
    run = opgate("review", "--repo", str(repo), "--base", base, "--head", "HEAD", "--offline")
    kernel = run.kernel("flash")
    resources = kernel["resource_check"]
    assert resources["status"] == "ok" and resources["arch"] == "sm_90a"
    [fn] = resources["head"]
    assert fn["function"].startswith("forward_kernel(") and (fn["threads"], fn["dynamic_smem_bytes"]) == (128, 49152)
    assert run.report["coverage"]["unmatched"]["names"] == ["docs/index.md"]  # not the kernel's: its globs say so
    if torch.cuda.is_available():
        assert run.code == 0 and kernel["verdict"] == "pass", run.stdout
    else:
        assert kernel["verdict"] == "undecided" and kernel["undecided"] == [
            "flash.cu: changed, compiled by no build that ran here (only [build.cuda], which needs a CUDA GPU): "
            "not judged",
            "no case ran: 1 cuda case (needs a CUDA GPU; this machine has none)",
        ]
