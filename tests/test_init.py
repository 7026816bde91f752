"""`opgate init`: a kernel repository gets its configuration, manifests, .env.example and the workflow caller."""

from __future__ import annotations

import json
from pathlib import Path

from bot import UPSTREAM
from bot.commands.init import caller
from bot.config.repo import load_config
from tests.conftest import discover, git

SHA = "0123456789abcdef0123456789abcdef01234567"


def kernel_repository(root: Path) -> Path:
    """A team's repository before opgate: two kernel folders under ops/, one of them CPU-only."""
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    for name, files in {
        "moe_gate": ["gate_cuda.cu", "binding_cuda.cpp", "gate_cpu.cpp", "binding_cpu.cpp", "gate_config.json"],
        "rmsnorm": ["rmsnorm.cpp"],
        "docs": [],
    }.items():
        (root / "ops" / name).mkdir(parents=True)
        for f in files:
            (root / "ops" / name / f).write_text("{}\n" if f.endswith(".json") else "// kernel\n")
    (root / "ops" / "Not-A-Name").mkdir()
    (root / "ops" / "Not-A-Name" / "x.cu").write_text("// x\n")
    return root


def test_init_scaffolds_a_repository_that_lints_clean_and_loads(opgate, tmp_path):
    repo = kernel_repository(tmp_path / "kernels-team")
    run = opgate("init", "--repo", str(repo), "--kernels", "ops", "--domain", "moe", "--pin", SHA)
    assert run.code == 0, run.stderr
    assert run.stdout.splitlines()[:9] == [
        "opgate: wrote opgate.toml",
        "opgate: wrote ops/moe_gate/kernel.toml",
        "opgate: wrote ops/moe_gate/reference.py",
        "opgate: wrote ops/moe_gate/agent_task.json",
        "opgate: wrote ops/rmsnorm/tunables.json",
        "opgate: wrote ops/rmsnorm/kernel.toml",
        "opgate: wrote ops/rmsnorm/reference.py",
        "opgate: wrote ops/rmsnorm/agent_task.json",
        "opgate: wrote .env.example",
    ]
    assert "opgate: skipped ops/Not-A-Name: a kernel folder's name is a-z, 0-9 and _: rename it" in run.stdout
    assert "opgate: skipped ops/docs: no .cu, .cpp or .cc source in it" in run.stdout
    assert "opgate lint: 0 error(s), 0 warning(s), 2 info" in run.stderr  # the two model placeholders

    config = load_config(repo)
    assert config.manifests == ["ops/*/kernel.toml"] and list(config.domains) == ["moe"]
    assert config.key_variable("moe") == "TAOTOKEN_API_KEY_MOE_AGENT"
    kernels = discover(repo, config)
    gate, norm = kernels["moe_gate"].manifest, kernels["rmsnorm"].manifest
    assert gate.build["cuda"].sources == ["gate_cuda.cu", "binding_cuda.cpp"]
    assert gate.build["cpu"].sources == ["binding_cpu.cpp", "gate_cpu.cpp"] and gate.config == "gate_config.json"
    assert set(norm.build) == {"cpu"} and norm.globs == ["ops/rmsnorm/**"] and norm.domain == "moe"
    assert (
        kernels["rmsnorm"].task is not None
        and kernels["rmsnorm"].task.provider.api_key_env == "TAOTOKEN_API_KEY_MOE_AGENT"
    )
    assert "TAOTOKEN_API_KEY_MOE_AGENT=YOUR_MOE_KEY" in (repo / ".env.example").read_text()
    assert (repo / ".github" / "workflows" / "opgate.yml").read_text() == caller(UPSTREAM, SHA)

    again = opgate("init", "--repo", str(repo), "--json")  # the configuration now says where and which domain
    data = json.loads(again.stdout)
    assert again.code == 0 and data["written"] == [] and data["skipped"][0]["folder"] == "ops/Not-A-Name"
    assert {"opgate.toml", "ops/moe_gate/kernel.toml", ".env.example", ".github/workflows/opgate.yml"} <= set(
        data["kept"]
    )


def test_init_refuses_what_it_cannot_decide_with_the_fix(opgate, tmp_path):
    bare = tmp_path / "bare"
    bare.mkdir()
    git(bare, "init", "-q")
    run = opgate("init", "--repo", str(bare))
    assert run.code == 2 and "give --kernels DIR" in run.stderr
    repo = kernel_repository(tmp_path / "team")
    (repo / "opgate.toml").write_text(
        "[domains.a]\nweekly_budget = 1\nrequest_budget = 1\n[domains.b]\nweekly_budget = 1\nrequest_budget = 1\n"
    )
    run = opgate("init", "--repo", str(repo), "--kernels", "ops")
    assert run.code == 2 and "configures a, b: give --domain NAME" in run.stderr
    run = opgate("init", "--repo", str(repo), "--kernels", "ops", "--domain", "c")
    assert run.code == 2 and "domain 'c' is not configured (configured: a, b)" in run.stderr
