"""The review flow (bot/review/flow.py) called directly: one case picked for a bisection with its own latency limit,
a repository with no kernel manifest, and the flow's decisions on a machine and a case runner the test passes in (a
recorded runner: what it reports gives the verdict; a GPU machine judges a CUDA change that a CPU one cannot)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import pytest

from bot.config.manifest import Kernel
from bot.config.settings import Settings, load_settings
from bot.errors import InputError
from bot.ledger import Ledger, open_ledger
from bot.models.evidence import CaseEvidence, KernelEvidence, NotRun
from bot.models.finding import Phrase
from bot.models.judging import CaseRun
from bot.models.report import CaseStatus, KernelReport, Machine
from bot.present.progress import Steps
from bot.review.cases import Builds
from bot.review.flow import Reviewer, only_case
from bot.review.host import Host, here
from bot.review.request import ReviewRequest
from bot.untrusted.build import Built
from bot.untrusted.runner.health import snapshot
from bot.untrusted.sandbox import Sandbox
from bot.verdict.findings import BASE, HEAD
from bot.verdict.written import written
from tests.conftest import KERNELS, REPO_CONFIG, KernelRepo, discover, git
from tests.test_kernel import timed


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
        reviewer = Reviewer(request, settings, ledger, here(settings, agent_only=True))
        with pytest.raises(
            InputError, match=r"no kernel manifest found: kernels/\*/kernel\.toml match no kernel\.toml"
        ):
            reviewer.run()
        assert reviewer.base_sha == reviewer.head_sha == git(repo, "rev-parse", "HEAD")
    finally:
        ledger.close()


# -- the seams: a machine and a case runner passed in -------------------------------------------------------------

CPU_BOX = Machine(device="cpu", torch="2.13.0", python="3.11")
H100 = Machine(device="cuda", gpu="NVIDIA H100 80GB HBM3", arch="sm_90", torch="2.13.0", python="3.11")
CPU_BODY = "kernels/deepgemm_tile/gemm_cpu.cpp"
CUDA_BODY = "kernels/deepgemm_tile/gemm_cuda.cu"


class Recorded:
    """A case runner that compiles and runs nothing: both sides "build" on every device the machine has, and each case
    of such a device reports what was recorded for it (head's p50 `head_ms` against base's 1 ms, both within
    tolerance, or a crash); a case on a device the machine lacks is not run."""

    def __init__(self, head_ms: float = 1.0, crash: str | None = None) -> None:
        self.head_ms, self.crash = head_ms, crash
        self.machines: list[Machine] = []
        self.baselines: list[str] = []  # the kernels whose base latencies the review asked to keep

    def __call__(self, settings: Settings, env: Machine, ledger: Ledger, sandbox: Sandbox, steps: Steps, *,
                 secret: str, base_sha: str, arch: str | None = None) -> Recorded:  # fmt: skip
        self.machines.append(env)
        return self

    def build(self, head_k: Kernel, base_k: Kernel | None) -> Builds:
        devices: list[Literal["cpu", "cuda"]] = ["cpu", "cuda"] if self.machines[-1].device == "cuda" else ["cpu"]
        return {side: {d: Built(ok=True, device=d, key=f"{side}-{d}") for d in devices} for side in (BASE, HEAD)}

    def run(self, rules: Kernel, builds: Builds, evidence: KernelEvidence, *, trusted_reference: bool,
            held_out: frozenset[str] = frozenset(), looks: bool = True) -> None:  # fmt: skip
        crashed = (
            CaseRun(status=CaseStatus.crashed, detail=Phrase.as_written(self.crash), failed_label=HEAD)
            if self.crash
            else None
        )
        evidence.cases = [
            CaseEvidence(name=c.name, run=crashed or timed(self.head_ms))
            if c.device in builds[HEAD]
            else CaseEvidence(name=c.name, not_run=NotRun.no_gpu)
            for c in rules.manifest.cases
        ]

    def record_baselines(self, rules: Kernel, report: KernelReport) -> None:
        self.baselines.append(rules.name)


def review_on(machine: Machine, runner: Recorded, repo: KernelRepo, head: str, tmp_path: Path) -> KernelReport:
    """`head` reviewed offline on `machine` with `runner` (no compile-only resource check: nvcc is not the seam)."""
    tmp_path.mkdir()
    settings = load_settings({"OPGATE_DATABASE_URL": str(tmp_path / "ledger.sqlite")}, REPO_CONFIG)
    ledger = open_ledger(settings.database_url)
    try:
        request = ReviewRequest(repo=repo.path, base=repo.base, head=head, out=tmp_path / "out", offline=True,
                                resource_check=False)  # fmt: skip
        report = Reviewer(request, settings, ledger, Host(machine, Sandbox.detect(), snapshot(), runner)).run()
    finally:
        ledger.close()
    assert report.environment == machine and runner.machines == [machine]
    [kernel] = written(report).kernels  # as report.json states it
    return kernel


def test_a_kernel_whose_runner_reports_head_slower_fails_and_one_as_fast_passes(
    kernel_repo: KernelRepo, tmp_path: Path
) -> None:
    kernel_repo.edit(CPU_BODY, "#include", "// head: the loop unrolled\n#include")
    head = kernel_repo.commit("cpu body")
    slower = Recorded(head_ms=1.25)
    kernel = review_on(CPU_BOX, slower, kernel_repo, head, tmp_path / "slower")
    cpu = [c for c in kernel.cases if c.device == "cpu"]
    assert kernel.verdict == "fail" and cpu and all(c.verdict == "fail" for c in cpu)
    assert all(c.verdict == "skipped" for c in kernel.cases if c.device == "cuda")  # this machine has no GPU
    assert [r.split(" (95% CI")[0] for r in kernel.reasons] == [f"performance: {c.name} p50 +25.00%" for c in cpu]
    assert all(r.endswith("> 3% limit") for r in kernel.reasons)  # the manifest's limit, as the comment says it
    assert slower.baselines == ["deepgemm_tile"]
    same = review_on(CPU_BOX, Recorded(head_ms=1.0), kernel_repo, head, tmp_path / "same")
    assert same.verdict == "pass", same.reasons
    crashed = review_on(CPU_BOX, Recorded(crash="killed by signal 11 (SIGSEGV)"), kernel_repo, head, tmp_path / "c")
    assert crashed.verdict == "error"
    assert f"{cpu[0].name}: head crashed: killed by signal 11 (SIGSEGV)" in crashed.reasons


def test_a_cuda_change_is_judged_on_a_gpu_machine_and_named_unjudged_on_a_cpu_one(
    kernel_repo: KernelRepo, tmp_path: Path
) -> None:
    kernel_repo.edit(CUDA_BODY, "#include", "// head: one more pipeline stage\n#include")
    head = kernel_repo.commit("cuda body")
    on_gpu = review_on(H100, Recorded(), kernel_repo, head, tmp_path / "gpu")
    assert on_gpu.verdict == "pass", on_gpu.reasons
    assert all(c.verdict == "pass" for c in on_gpu.cases if c.device == "cuda")
    on_cpu = review_on(CPU_BOX, Recorded(), kernel_repo, head, tmp_path / "cpu")
    assert on_cpu.verdict != "pass"  # what changed ran nowhere here
    [unread] = [f for f in on_cpu.findings if f.key == "coverage.not_compiled_here"]
    assert unread.file == CUDA_BODY and unread.params["builds"] == "[build.cuda]"
