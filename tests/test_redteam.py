"""Red team: a kernel in a pull request attacks the judge, the secrets, the network, the cache and the log.

Every attack below reproduced against the runner before the sandboxed, out-of-process judge (main at
5060a5c): a forged PASS, the canary key read from an ancestor's /proc environ, a TCP connection out,
the base's cached extension rewritten, a workflow command in opgate's own stdout, PR code run by
`-ccbin`. Each test here asserts the verdict the attack deserves and that nothing leaked.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import socket
import threading
from pathlib import Path

import pytest

from bot.config.manifest_tables import Case, Constraints
from bot.models.cost import SideCost, SimulatedCost
from bot.models.finding import Finding, Gate, Outcome
from bot.models.judging import CaseRun, JudgeJob, MeasureSettings, ReferenceSource, SideEntry
from bot.models.report import CaseReport, CaseStatus, Report
from bot.present.status import acceptance_status
from bot.untrusted.runner.cost import Costs
from bot.untrusted.runner.spawn import new_secret, run_cases
from bot.untrusted.sandbox import Sandbox
from bot.verdict.findings import add_case, case_lines
from bot.verdict.gate import case_verdict
from bot.verdict.gate_latency import simulated_note
from bot.verdict.written import written_case
from bot.wording.messages import phrase
from tests import redteam
from tests.conftest import git, only_latency_can_fail
from tests.github_server import FakeGitHub, load_fixture
from tests.redteam import GEMM
from tests.test_accept import PR as GH_PR
from tests.test_accept import REPO as GH_REPO
from tests.test_accept import TOKEN as GH_TOKEN
from tests.test_accept import github_env
from tests.test_out_arguments import BODY as OUT_ARG_BODY_PATH
from tests.test_out_arguments import EDITS as OUT_ARG_EDITS
from tests.test_out_arguments import FIXTURE as OUT_ARG_FIXTURE
from tests.test_out_arguments import Adopted, adopt, pull_request

pytestmark = pytest.mark.slow

CANARY = "sk-canary-redteam-5e1f0a9b7c3d"
KEY_ENV = {
    "TAOTOKEN_API_KEY_DEEPGEMM_AGENT": CANARY,
    "GITHUB_TOKEN": f"ghs_{CANARY}",
}


@pytest.fixture(autouse=True)
def _needs_the_sandbox() -> None:
    isolation = Sandbox.detect().isolation
    if isolation.mode != "bwrap":  # a red-team suite that skips would hide a hole: fail loudly instead
        pytest.fail(f"the red-team suite needs the sandbox: {isolation}")


def review(opgate, repo, *extra: str, env: dict[str, str] | None = None):
    head = repo.commit("hostile change")
    return opgate("review", "--repo", str(repo.path), "--base", repo.base, "--head", head, "--offline", *extra, env=env)


def hostile(repo, **parts: str) -> None:
    path = repo.path / GEMM
    path.write_text(redteam.body(path.read_text(), **parts))


def cpu_cases(run, kernel: str = "deepgemm_tile") -> list[dict]:
    return [c for c in run.kernel(kernel)["cases"] if c["device"] == "cpu"]


def everything_written(run) -> str:
    """stdout, stderr and every file the review wrote (report, comment, candidates)."""
    files = [p.read_text(errors="replace") for p in run.out.rglob("*") if p.is_file()]
    return "\n".join([run.stdout, run.stderr, *files])


@pytest.mark.untimed  # correctness: a wrong side is never timed
def test_a_kernel_that_replaces_the_judges_comparison_still_fails(opgate, kernel_repo):
    hostile(kernel_repo, load=redteam.PATCH_JUDGE, replace=redteam.ZEROS)
    run = review(opgate, kernel_repo)
    assert run.code == 1
    kernel = run.kernel("deepgemm_tile")
    assert kernel["verdict"] == "fail"
    for case in cpu_cases(run):
        assert case["status"] == "incorrect" and case["max_abs_err"] > case["tolerance"]


@pytest.mark.untimed  # fail or error, no latency judged
def test_forged_lines_in_every_file_and_descriptor_change_nothing(opgate, kernel_repo):
    hostile(kernel_repo, call=redteam.on_call(redteam.FORGE), replace=redteam.ZEROS)
    run = review(opgate, kernel_repo)
    assert run.code == 1
    assert run.kernel("deepgemm_tile")["verdict"] in ("fail", "error")
    assert all(c["verdict"] in ("fail", "error") for c in cpu_cases(run))


@pytest.mark.untimed  # correctness of the checked timed calls
def test_replaying_the_first_result_fails_on_the_fresh_inputs_of_timed_calls(opgate, kernel_repo):
    hostile(kernel_repo, replace=redteam.REPLAY)
    run = review(opgate, kernel_repo)
    assert run.code == 1
    for case in cpu_cases(run):
        assert case["verdict"] == "fail" and case["status"] == "incorrect"
        assert any("checked timed calls differ from the reference" in r for r in case["reasons"]), case["reasons"]


@pytest.mark.untimed  # caught as wrong, crashed or CPU outside the calls
def test_work_left_running_after_the_timed_calls_is_caught(opgate, kernel_repo):
    hostile(kernel_repo, replace=redteam.ASYNC)
    run = review(opgate, kernel_repo)
    assert run.code == 1
    caught = ("differ from the reference", "outside its timed calls", "crashed")
    for case in cpu_cases(run):
        # A checked call's output was not there yet, or the CPU spent outside the timed region shows, or the
        # thread wrote into an output the harness had already freed (this attack corrupts its own heap).
        assert case["verdict"] in ("fail", "error"), case
        assert any(word in r for r in case["reasons"] for word in caught), case["reasons"]


@pytest.mark.untimed  # leaks and statuses, no verdict
def test_the_canary_key_is_out_of_reach_of_kernel_code(opgate, kernel_repo):
    hostile(kernel_repo, load=redteam.hunt(CANARY), call=redteam.on_call(redteam.hunt(CANARY), once=True))
    run = review(opgate, kernel_repo, env=KEY_ENV)
    assert "CANARY-FOUND" not in everything_written(run)
    assert CANARY not in everything_written(run)
    # The kernel aborts when it finds the key: every case ran to a measurement instead.
    assert all(c["status"] == "ok" for c in cpu_cases(run)), cpu_cases(run)


@pytest.mark.untimed  # connections and statuses, no verdict
def test_kernel_code_reaches_no_network(opgate, kernel_repo):
    connections: list[object] = []
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        listener.settimeout(0.2)
        port = listener.getsockname()[1]
        stop = threading.Event()

        def accept() -> None:
            while not stop.is_set():
                try:
                    connections.append(listener.accept()[0])
                except OSError:
                    continue

        thread = threading.Thread(target=accept, daemon=True)
        thread.start()
        hostile(kernel_repo, load=redteam.connect(port), call=redteam.on_call(redteam.connect(port), once=True))
        run = review(opgate, kernel_repo)
        stop.set()
        thread.join(timeout=5)
    assert connections == []
    assert "NETWORK-REACHED" not in everything_written(run)
    assert all(c["status"] == "ok" for c in cpu_cases(run)), cpu_cases(run)


def _hashes(folder: Path) -> dict[str, str]:
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in folder.rglob("*") if p.is_file()}


@pytest.mark.untimed  # the cache's hashes and statuses, no verdict
def test_kernel_code_cannot_rewrite_the_build_cache(opgate, kernel_repo, build_dir):
    before = _hashes(build_dir)
    poison = redteam.poison(str(build_dir))
    hostile(kernel_repo, load=poison, call=redteam.on_call(poison, once=True))
    run = review(opgate, kernel_repo)
    assert all(c["status"] == "ok" for c in cpu_cases(run)), cpu_cases(run)
    after = _hashes(build_dir)
    assert {path: after.get(path) for path in before} == before  # nothing that was there changed
    assert not any(Path(p).read_bytes().startswith(b"poisoned") for p in after)


@pytest.mark.untimed  # builds and statuses, no latency judged
def test_a_tampered_cache_entry_is_refused_and_rebuilt(opgate, kernel_repo, build_dir):
    kernel_repo.edit(GEMM, "namespace {", "// first look\nnamespace {")
    first = review(opgate, kernel_repo)
    assert first.kernel("deepgemm_tile")["base_build"]["ok"]
    key = first.kernel("deepgemm_tile")["base_build"]["key"]
    [so] = [p for p in (build_dir / "ext").glob(f"{key}*/ext.so")]
    so.chmod(0o644)
    so.write_bytes(b"\x7fELF poisoned extension")  # what a kernel run without a sandbox could have done
    kernel_repo.edit(GEMM, "// first look", "// second look")
    second = review(opgate, kernel_repo)
    assert all(c["status"] == "ok" for c in cpu_cases(second)), cpu_cases(second)
    base = second.kernel("deepgemm_tile")["base_build"]
    assert base["key"].startswith(key[:16]) and base["cached"] is False  # rebuilt, not loaded
    assert not so.read_bytes().startswith(b"\x7fELF poisoned")


@pytest.mark.untimed  # opgate's log lines, no verdict
def test_kernel_output_cannot_write_workflow_commands_into_opgates_log(opgate, kernel_repo):
    hostile(kernel_repo, load=redteam.PARENT_STDOUT, call=redteam.on_call(redteam.PARENT_STDOUT, once=True))
    run = review(opgate, kernel_repo)
    for line in (run.stdout + run.stderr).splitlines():
        assert not line.lstrip().startswith("::"), line
    assert "\r" not in run.stdout + run.stderr


@pytest.mark.untimed  # refused before any compile
def test_compiler_flags_that_run_pr_code_are_refused_before_any_compile(opgate, kernel_repo, tmp_path):
    marker = tmp_path / "pwned"
    script = kernel_repo.path / "kernels/deepgemm_tile/evil.sh"
    script.write_text(f'#!/bin/sh\ntouch {marker}\nexec g++ "$@"\n')
    script.chmod(0o755)
    kernel_repo.edit(
        "kernels/deepgemm_tile/kernel.toml",
        'cuda_cflags = ["-O3", "-gencode=arch=compute_90a,code=sm_90a", "-std=c++17"]',
        'cuda_cflags = ["-O3", "-gencode=arch=compute_90a,code=sm_90a", "-std=c++17", "-ccbin", "./evil.sh"]',
    )
    run = review(opgate, kernel_repo)
    assert run.code == 1
    kernel = run.kernel("deepgemm_tile")
    assert kernel["verdict"] == "fail" and kernel["build"] is None
    assert any("'-ccbin' is not allowed" in r for r in kernel["reasons"]), kernel["reasons"]
    assert not marker.exists()


@pytest.mark.untimed  # leaks and statuses, no verdict
def test_a_new_kernels_own_reference_runs_in_the_sandbox_too(opgate, kernel_repo):
    """A kernel new in the change is judged by its own reference: PR code, so the judge is sandboxed as well."""
    new_kernel(kernel_repo, "newgemm", reference_extra=redteam.hunt(CANARY))
    run = review(opgate, kernel_repo, env=KEY_ENV)
    assert "CANARY-FOUND" not in everything_written(run) and CANARY not in everything_written(run)
    kernel = run.kernel("newgemm")
    assert all(c["status"] == "ok" for c in kernel["cases"] if c["device"] == "cpu"), kernel
    assert run.report["isolation"]["mode"] == "bwrap"


# -- round two: the judge alone, with hostile torch-free extensions (tests/data/fake_ext.c, built in a second) ------

REFERENCE = Path(__file__).resolve().parent.parent / "kernels/deepgemm_tile/reference.py"
TINY = Case(name="tiny", device="cpu", dtype="bfloat16", shape={"m": 32, "n": 32, "k": 32})


@pytest.fixture(scope="module")
def fake(tmp_path_factory: pytest.TempPathFactory):
    """fake(name, onload=…, defines=…): a fake extension built once per module."""
    folder = tmp_path_factory.mktemp("hostile_ext")
    built: dict[str, Path] = {}

    def make(name: str, **kwargs) -> Path:
        if name not in built:
            built[name] = redteam.fake_ext(folder, name, **kwargs)
        return built[name]

    return make


def judge(sides: dict[str, Path], entries: dict[str, str] | None = None) -> tuple[CaseRun, CaseReport]:
    """Run the tiny case on `sides` in the real judge (sandboxed workers); the run and the gate's verdict."""
    job = JudgeJob(
        kernel="fake",
        reference=ReferenceSource(path=str(REFERENCE)),
        cases=[{**TINY.model_dump(), "tolerance": 1e-2, "max_regression_pct": 3.0}],
        sides={label: {"cpu": str(so)} for label, so in sides.items()},
        module="opgate_ext",
        entry="gemm",
        entries={label: SideEntry(module="opgate_ext", entry=e) for label, e in (entries or {}).items()},
        measure=MeasureSettings(max_seconds=0.6, min_blocks=3, min_processes=2),
        noise_limit_cores=64,  # verdicts, not the machine's quiet (as the opgate fixture)
        timeout_s=60,
        secret=new_secret(),
    )
    run = run_cases(job)["tiny"]
    return run, written_case(case_verdict(TINY, Constraints(), run))  # its lines as report.json says them


@pytest.mark.untimed  # correctness: a wrong side is never timed
def test_outputs_computed_only_when_the_judge_fetches_them_fail(fake):
    """Issue 24, 1: timed calls return at once; the answer is computed when fetched (write_tensors replaced)."""
    run, report = judge({"base": fake("honest"), "head": fake("lazy", onload=redteam.LAZY_FETCH)})
    assert report.verdict == "fail" and report.status == CaseStatus.incorrect, (report.reasons, run.detail)
    assert any("checked timed calls differ from the reference" in r for r in report.reasons), report.reasons
    assert run.spots["head"].failed == run.spots["head"].checked == run.spots["base"].checked  # every block


@pytest.mark.untimed  # correctness: a wrong side is never timed
def test_lazy_outputs_computed_in_a_self_reaped_child_fail(fake):
    """Issue 24, 2: the same lazy answer, computed in a forked child with SIGCHLD ignored (invisible CPU)."""
    run, report = judge({"base": fake("honest"), "head": fake("lazy_child", onload=redteam.LAZY_CHILD)})
    assert report.verdict == "fail" and report.status == CaseStatus.incorrect, (report.reasons, run.detail)
    assert any("checked timed calls differ from the reference" in r for r in report.reasons), report.reasons


@pytest.mark.untimed  # a refused fork
def test_a_kernel_cannot_start_processes_to_hide_cpu(fake):
    """Issue 24, 2: every call forks a self-reaped child that does half the work; the filter refuses the fork."""
    run, report = judge({"base": fake("honest"), "head": fake("hidden_cpu", onload=redteam.HIDDEN_CPU)})
    assert report.verdict == "fail", (report.reasons, run.detail)
    assert any("PermissionError: [Errno 1] Operation not permitted" in r for r in report.reasons), report.reasons
    assert run.checks["base"].error is None  # base, honest, is unaffected


@pytest.mark.untimed  # a refused fork
def test_module_init_code_cannot_start_processes_either(fake):
    """The extension's module init runs in the worker under the filter: a helper process it forks is refused."""
    run, report = judge({"base": fake("honest"), "head": fake("helper", onload=redteam.HELPER_ON_LOAD)})
    assert report.verdict == "error" and run.failed_label == "head", (report.reasons, run.detail)
    assert "Operation not permitted" in phrase(run.detail), run.detail


@pytest.mark.untimed  # a protocol error
def test_a_frame_nested_too_deep_is_an_error_of_that_side_not_a_judge_crash(fake):
    """Issue 24, 5: a 200 KB [[[[…]]]] reply crashed the judge (RecursionError): every case blamed on the runner."""
    run, report = judge({"base": fake("honest"), "head": fake("deep", onload=redteam.DEEP_FRAME)})
    assert run.status == CaseStatus.crashed and run.failed_label == "head", run.detail
    assert "protocol broken" in phrase(run.detail) and "nested" in phrase(run.detail), run.detail
    assert report.verdict == "error" and report.reasons[0].startswith("head crashed"), report.reasons


@pytest.mark.untimed  # a protocol error
def test_a_tensor_header_of_impossible_shape_is_an_error_of_that_side_not_a_judge_crash(fake):
    """Issue 24, 5: shape [0, 2**70] with nbytes 0 made read_tensors raise TypeError inside the judge."""
    run, report = judge({"base": fake("honest"), "head": fake("bad_header", onload=redteam.BAD_HEADER)})
    assert run.status == CaseStatus.crashed and run.failed_label == "head", run.detail
    assert "protocol broken" in phrase(run.detail) and "shape" in phrase(run.detail), run.detail
    assert report.verdict == "error", report.reasons


@pytest.mark.untimed  # statuses; the latency is the load's (only_latency_can_fail)
def test_base_runs_its_own_entry_not_the_one_heads_build_names(fake):
    """Issue 24, 6: head's manifest names entry gemm2; base's extension has only gemm (base crashed on main)."""
    head = fake("gemm2", defines=("ENTRY=gemm2",))
    run, report = judge({"base": fake("honest"), "head": head}, entries={"base": "gemm", "head": "gemm2"})
    assert run.status == CaseStatus.ok, run.detail
    assert run.checks["base"].error is None and run.checks["head"].error is None
    assert only_latency_can_fail(report) and report.base_p50_ms is not None and report.p50_ms is not None, (
        report.reasons
    )


# -- round two: reviews ------------------------------------------------------------------------------------------

ZERO_REFERENCE = """

def reference(a, b):  # rewritten in the same change: agrees with a kernel that writes zeros
    return torch.zeros(a.shape[0], b.shape[1])
"""


@pytest.mark.untimed  # correctness: a wrong side is never timed
def test_a_renamed_kernel_is_judged_by_bases_manifest_and_reference(opgate, kernel_repo):
    """Issue 24, 3: git mv to a new name, a body that writes zeros and a reference that returns zeros: PASS on main."""
    git(kernel_repo.path, "mv", "kernels/deepgemm_tile", "kernels/deepgemm_fast")
    new = "kernels/deepgemm_fast"
    kernel_repo.edit(f"{new}/kernel.toml", 'name = "deepgemm_tile"', 'name = "deepgemm_fast"')
    kernel_repo.edit(f"{new}/kernel.toml", '"kernels/deepgemm_tile/**"', '"kernels/deepgemm_fast/**"')
    path = kernel_repo.path / new / "reference.py"
    path.write_text(path.read_text() + ZERO_REFERENCE)
    path = kernel_repo.path / new / "gemm_cpu.cpp"
    path.write_text(redteam.body(path.read_text(), replace=redteam.ZEROS))
    run = review(opgate, kernel_repo)
    assert run.code == 1
    kernel = run.kernel("deepgemm_fast")
    assert kernel["verdict"] == "fail", kernel
    assert any("renamed from deepgemm_tile" in n for n in kernel["notes"]), kernel["notes"]
    assert all(c["status"] == "incorrect" for c in cpu_cases(run, "deepgemm_fast")), cpu_cases(run, "deepgemm_fast")
    assert any("renamed to deepgemm_fast" in n for n in run.kernel("deepgemm_tile")["notes"])


def new_kernel(repo, name: str, *, reference_extra: str = "", body: str | None = None) -> None:
    """kernels/NAME: deepgemm_tile's files, its sources, manifest and reference each grown by a long block of their
    own, so that git sees new files rather than copies (the binding and the headers stay: its build is cached)."""
    src, new = repo.path / "kernels/deepgemm_tile", repo.path / "kernels" / name
    new.mkdir()
    for f in src.iterdir():
        text = f.read_text().replace("deepgemm_tile", name) if f.name == "kernel.toml" else f.read_text()
        if f.name == "gemm_cpu.cpp" and body is not None:
            text = redteam.body(text, replace=body)
        if f.name == "reference.py":
            text += reference_extra
        if f.suffix in (".cpp", ".cu", ".toml", ".py") and f.name != "binding_cpu.cpp":
            mark = "#" if f.suffix in (".toml", ".py") else "//"
            text = (
                "".join(f"{mark} {name} {i}: written for this kernel, not taken from another one\n" for i in range(150))
                + text
            )
        (new / f.name).write_text(text)


@pytest.mark.untimed  # a new kernel: no base to time against
def test_a_new_kernel_with_a_reference_that_agrees_with_anything_needs_a_person(opgate, kernel_repo):
    """Issue 24, 3: a brand-new kernel brings its own reference (zeros) and a body that writes zeros: PASS on main."""
    new_kernel(kernel_repo, "zerogemm", reference_extra=ZERO_REFERENCE, body=redteam.ZEROS)
    # Its author declares no [work]: with it, zeros this fast are above the machine's peak and fail on their own
    # (the throughput gate); without it every gate of its own passes, and only its newness stands in the way.
    manifest = kernel_repo.path / "kernels/zerogemm/kernel.toml"
    manifest.write_text(re.sub(r"\[work\]\nflops = .*\nbytes = .*\n", "", manifest.read_text()))
    run = review(opgate, kernel_repo)
    kernel = run.kernel("zerogemm")
    assert all(c["verdict"] == "pass" for c in cpu_cases(run, "zerogemm")), cpu_cases(run, "zerogemm")
    assert kernel["verdict"] == "needs_accept", kernel
    assert any("new kernel: judged by its own manifest and reference" in a for a in kernel["accept_needed"])
    assert run.report["verdict"] == "needs_accept" and run.code == 1  # pending until a person says /accept


@pytest.mark.untimed  # builds and statuses, no latency judged
def test_a_build_cache_written_by_sandboxed_reviews_serves_an_unsandboxed_one(opgate, kernel_repo, build_dir):
    """Issue 24, 7: after sandboxed reviews, OPGATE_SANDBOX=none on the same cache failed "head does not build"
    (ninja looked for <cache>/root/.cache/opgate/build/…/objects/….o): the cache's own path holds /opgate/build."""
    assert "/opgate/build" in str(build_dir)
    kernel_repo.edit(GEMM, "namespace {", "// sandboxed\nnamespace {")
    first = review(opgate, kernel_repo)
    assert first.kernel("deepgemm_tile")["build"]["ok"], first.kernel("deepgemm_tile")
    kernel_repo.edit(GEMM, "// sandboxed", "// not sandboxed")  # a new body: its object is built, the binding's reused
    second = review(opgate, kernel_repo, env={"OPGATE_SANDBOX": "none"})
    assert second.report["isolation"]["mode"] == "none"
    kernel = second.kernel("deepgemm_tile")
    assert kernel["build"]["ok"] and not kernel["build"]["cached"], kernel
    assert all(c["status"] == "ok" for c in cpu_cases(second)), cpu_cases(second)


# -- round three (issue 37) -----------------------------------------------------------------------------------------


def test_work_hidden_on_a_second_thread_fails_on_cpu_time(opgate, kernel_repo):
    """Issue 37, 3: a quarter of the rows on a helper std::thread that computes them twice (25 % more work): faster on
    the clock of one call on an idle machine, more CPU time per call counted over every thread of the sandbox (the
    kernel's accounting). It fails on CPU time and never passes, idle or loaded (on a loaded runner the helper waits
    for a core and the wall time fails too; a case whose CPU interval a heavy load widens past the limit is
    undecided, never a pass)."""
    hostile(kernel_repo, replace=redteam.TWO_THREADS)
    run = review(opgate, kernel_repo, env={"OPGATE_MEASURE_MAX_SECONDS": "3"})
    cases = cpu_cases(run)
    seen = [(c["name"], c["verdict"], c["cpu_ci95_pct"], c["reasons"]) for c in cases]
    assert run.code == 1 and run.kernel("deepgemm_tile")["verdict"] == "fail", seen
    assert all(c["verdict"] in ("fail", "inconclusive") and c["cpu_regression_pct"] > 3.0 for c in cases), seen
    on_cpu = [c for c in cases if any(r.startswith("performance: CPU time per call") for r in c["reasons"])]
    assert on_cpu and all(c["verdict"] == "fail" and c["cpu_ci95_pct"][0] > 3.0 for c in on_cpu), seen
    assert "**CPU +" in run.comment  # the comment shows the CPU time that failed it beside the wall time


def test_work_done_while_inputs_load_counts_in_the_cpu_time_per_call(opgate, kernel_repo):
    """Issue 50, 2: a kernel that burns CPU in the worker's load path (its body is base's) escaped the clock and stayed
    under the fixed allowance for untimed CPU: it passed. A block's load now counts in its CPU time per call, held
    against base's like the timed calls': the head fails on CPU time, or is undecided; never a pass."""
    hostile(kernel_repo, load=redteam.LOAD_WORK)
    run = review(opgate, kernel_repo, env={"OPGATE_MEASURE_MAX_SECONDS": "3"})
    cases = cpu_cases(run)
    seen = [(c["name"], c["verdict"], c["regression_pct"], c["cpu_regression_pct"], c["reasons"]) for c in cases]
    print(seen)  # on 92dae34: pass, square_512 p50 -0.2 % and CPU -0.1 %, ragged -1.5 % and -1.7 %
    assert run.code == 1 and run.kernel("deepgemm_tile")["verdict"] == "fail", seen
    assert all(c["verdict"] in ("fail", "inconclusive") and c["cpu_regression_pct"] > 3.0 for c in cases), seen
    assert any(r.startswith("performance: CPU time per call") for c in cases for r in c["reasons"]), seen


@pytest.mark.untimed  # instruction counts, deterministic under load
@pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind is not installed")
def test_a_forged_callgrind_dump_decides_nothing(fake):
    """Issue 37, 4: a guest under callgrind rewrites its own dump (counts x0.9) or adds one: the added dump refuses
    the side's count; the rewritten one cannot be told from callgrind's, so a count within the limit passes no head."""
    from tests.test_judge import job

    base = fake("cost_base", spin_us=0, defines=("WORK=100000",))
    head = fake("cost_forger", onload=redteam.FORGED_DUMP, spin_us=0, defines=("WORK=110000",))
    extra = fake("cost_extra", onload=redteam.EXTRA_DUMP, spin_us=0, defines=("WORK=110000",))
    costs = Costs(job({"base": base, "head": head, "extra": extra}), Sandbox.detect())
    try:
        got = costs.sides()
    finally:
        costs.close()
    b, forged, added = got["base"][0], got["head"][0], got["extra"][0]
    assert isinstance(b, SideCost) and isinstance(forged, SideCost), got
    assert forged.instructions < b.instructions  # 10 % more work, counted 1 % less: the forgery went unnoticed …
    assert isinstance(added, str) and "unexpected file 'callgrind.out.7'" in added, added  # … an added dump did not
    # a wall-time interval the forged ratio lies inside, as the gate states it
    report = CaseReport(name="tiny", tolerance=0.01, verdict="inconclusive", regression_pct=2.0, ci95_pct=[-6.0, 6.0])
    span = {"delta": "+2.00%", "low": "-6.00%", "high": "+6.00%", "limit": "3"}
    add_case(report, Finding(gate=Gate.performance, outcome=Outcome.undecided, key="performance.inconclusive",
                             params=span))  # fmt: skip
    assert case_lines(report) == ["performance inconclusive: p50 +2.00% (95% CI -6.00%..+6.00%) straddles the 3% limit"]
    simulated_note(report, SimulatedCost(head=forged, base=b))
    assert report.verdict == "inconclusive" and report.simulated and not report.simulated.decided, case_lines(report)
    assert case_lines(report)[0].endswith("a model the counted code can lower, it decides nothing"), case_lines(report)


# -- round three: acceptance stays in other people's hands (issue 37) -----------------------------------------------
# Reproduced on main at 16856ce: the pull request's author, with maintain, answered `/accept` on their own change
# and `/accept --override` on their own failed gates, and both were granted (opgate/accepted and
# opgate/acceptance success). Here `opgate accept` runs through the GitHub edge against the local GitHub server,
# on a pull request whose commits are real ones in the server's git store.


@pytest.fixture
def own_change(opgate, tmp_path: Path):
    """PR #42 on the local GitHub server: alice-dev opened it with one commit, carol-coauthor pushed a second
    (from an e-mail GitHub maps to her account); both may override (maintain), as may maint-bob; wanda-writer
    has write. Yields (accept, server, head)."""
    from tests.github_server import FakeGitHub
    from tests.test_accept import PR, REPO, TOKEN, Accept

    work = tmp_path / "work"
    work.mkdir()
    git(work, "init", "-q", "-b", "main")
    with FakeGitHub(TOKEN) as server:
        server.add_repo(REPO)
        for login, base_role in (("alice-dev", "maintain"), ("carol-coauthor", "maintain")):
            server.set_permission(REPO, login, base_role)
        server.set_permission(REPO, "maint-bob", "maintain")
        server.set_permission(REPO, "wanda-writer", "write")
        server.user("carol-coauthor", email="carol@example.com")

        def commit(name: str, email: str, text: str) -> str:
            (work / "kernel.cu").write_text(text)
            git(work, "add", "kernel.cu")
            git(work, "-c", f"user.name={name}", "-c", f"user.email={email}", "commit", "-q", "-m", text)
            return git(work, "rev-parse", "HEAD")

        base = commit("Maintainer", "maint@example.com", "base")
        git(work, "push", "-q", str(server.git(REPO).path), "main")
        git(work, "checkout", "-q", "-b", "feature")
        commit("Alice", server.noreply("alice-dev"), "a faster tile")
        head = commit("Carol", "carol@example.com", "and its epilogue")
        git(work, "push", "-q", str(server.git(REPO).path), "feature")
        server.add_pull(REPO, number=PR, head_sha=head, base_sha=base, head_ref="feature", author="alice-dev")
        yield Accept(opgate, server, tmp_path), server, head


def _refused_with(own_change, body: str, login: str, verdict: str) -> str:
    """Run `body` by `login` on a review of the head whose deepgemm_tile `verdict`; the refusal's reply."""
    from tests.test_accept import PR, REPO, make_report

    accept, server, head = own_change
    accept.store(make_report(head=head, verdicts={"deepgemm_tile": verdict}))
    run = accept(body, login=login)
    assert run.code == 0, run.stderr
    assert "/accept refused" in run.stdout and accept.reactions() == ["eyes", "-1"]
    assert accept.acceptances() == [] and server.statuses(REPO, head) == []  # nothing green, nothing recorded
    assert ("GET", f"/repos/{REPO}/pulls/{PR}/commits") in accept.calls()
    (reply,) = [c["body"] for c in server.comments(REPO, PR) if c["id"] != accept.comment_id]
    assert reply.startswith("<!-- opgate:accept -->\n👎 **`/accept` refused**")
    assert (
        "and nobody accepts their own change: `/accept` needs a collaborator with write, maintain or admin, and "
        "`--override` one with maintain or admin, who neither opened this pull request nor pushed a commit to it."
    ) in reply
    return reply


@pytest.mark.untimed
@pytest.mark.parametrize(
    ("body", "verdict"),
    [("/accept", "pass"), ("/accept", "needs_accept"), ('/accept --override "mine is fine"', "fail")],
)
def test_the_author_cannot_accept_their_own_change(own_change, body: str, verdict: str):
    reply = _refused_with(own_change, body, "alice-dev", verdict)
    assert "@\u200balice-dev opened pull request #42" in reply


@pytest.mark.untimed
@pytest.mark.parametrize(("body", "verdict"), [("/accept", "pass"), ('/accept --override "ours is fine"', "fail")])
def test_a_coauthor_who_pushed_a_commit_cannot_accept_it(own_change, body: str, verdict: str):
    _, _, head = own_change
    reply = _refused_with(own_change, body, "carol-coauthor", verdict)
    assert f"@\u200bcarol-coauthor wrote or committed commit `{head[:10]}` of pull request #42" in reply


@pytest.mark.untimed
def test_another_writer_accepts_it_and_another_maintainer_overrides_it(own_change):
    from tests.test_accept import REPO, make_report

    accept, server, head = own_change
    accept.store(make_report(head=head))
    run = accept("/accept", login="wanda-writer")
    assert run.code == 0, run.stderr
    assert accept.reactions() == ["eyes", "+1"]
    assert [(s["context"], s["state"]) for s in server.statuses(REPO, head)] == [("opgate/accepted", "success")]
    accept.store(make_report(head=head, verdicts={"deepgemm_tile": "fail"}))
    run = accept('/accept --override "re-measured by hand: +0.4%"', login="maint-bob")
    assert run.code == 0, run.stderr
    assert accept.reactions() == ["eyes", "+1"]
    statuses = {s["context"]: s["state"] for s in server.statuses(REPO, head)}
    assert statuses == {"opgate/accepted": "success", "opgate/acceptance": "success"}
    assert [(r.login, r.override) for r in accept.acceptances()] == [("wanda-writer", False), ("maint-bob", True)]


# Round three, item 2: a launch that asks 64 KiB more dynamic shared memory (the opt-in and `<<<…, smem>>>`) with
# kernel.toml untouched was "resource check: unchanged from base … same shared memory and occupancy".
GEMM_CUDA = "kernels/deepgemm_tile/gemm_cuda.cu"
LAUNCH = "kernel<<<grid, Cfg::kThreads, Cfg::kSmemBytes, stream>>>"
OPT_IN = "cudaFuncAttributeMaxDynamicSharedMemorySize, Cfg::kSmemBytes)"


def more_shared_memory(repo, extra: str) -> None:
    """The launch and its opt-in ask `extra` more bytes of dynamic shared memory; kernel.toml is not touched."""
    repo.edit(GEMM_CUDA, "if (Cfg::kSmemBytes > 48 * 1024)", f"if (Cfg::kSmemBytes + {extra} > 48 * 1024)")
    repo.edit(GEMM_CUDA, OPT_IN, OPT_IN.replace("Cfg::kSmemBytes", f"Cfg::kSmemBytes + {extra}"))
    repo.edit(GEMM_CUDA, LAUNCH, LAUNCH.replace("Cfg::kSmemBytes", f"Cfg::kSmemBytes + {extra}"))


@pytest.mark.untimed  # resource figures (ptxas)
def test_a_launch_asking_64_kib_more_shared_memory_is_judged_as_the_code_launches_it(opgate, kernel_repo):
    more_shared_memory(kernel_repo, "65536")
    run = review(opgate, kernel_repo)
    kernel = run.kernel("deepgemm_tile")
    assert run.code == 1 and kernel["verdict"] == "fail"
    check = kernel["resource_check"]
    assert check["launch_sites"] and check["launch_undecided"] == []
    for r in check["head"]:  # each instantiation read back from its own launch, the manifest's figure beside it
        assert (r["launch_from"], r["dynamic_smem_bytes"], r["declared_dynamic_smem_bytes"]) == (
            "read back",
            163_840,
            98_304,
        )
    occupancy = [x for x in kernel["reasons"] if "occupancy" in x and "2 -> 1 blocks/SM" in x]
    # Both instantiations fail on both architectures: sm_100a's launches are folded for sm_100a alone (the manifest's
    # -gencode for sm_90a beside -arch=sm_100a made nvcc refuse --ptx, leaving them unfolded)
    for arch in ("sm_90a", "sm_100a"):  # a line names one instantiation, or a family "(N instantiations)" alike
        named = [r for r in occupancy if r.endswith(f"on {arch}")]
        counted = sum(int(m.group(1)) if (m := re.search(r"\((\d+) instantiations", r)) else 1 for r in named)
        assert counted == len(check["head"]), (arch, occupancy)
    assert all(r["launch_from"] == "read back" for c in kernel["arch_checks"] for r in c["head"])
    assert not any("unchanged from base" in n for n in kernel["notes"])
    assert "the launch (kernels/deepgemm_tile/gemm_cuda.cu:406 kernel&lt;&lt;&lt;…" in run.comment


@pytest.mark.untimed  # a .cu edit: the CPU build is base's, never timed
def test_a_launch_sized_at_run_time_on_a_cpu_runner_is_undecided_naming_the_launch(opgate, kernel_repo):
    more_shared_memory(kernel_repo, "(k > 4096 ? 65536 : 0)")  # no compile-time constant: nothing to read back
    run = review(opgate, kernel_repo)
    kernel = run.kernel("deepgemm_tile")
    assert kernel["verdict"] == "undecided" and run.report["verdict"] == "undecided"
    launch = [u for u in kernel["undecided"] if u.startswith("resource: launch figures declared, not measured")]
    shown = f"resource: launch figures declared, not measured: {GEMM_CUDA} holds the launch: "
    assert launch and all(u.startswith(shown) and f"{GEMM_CUDA}:406 kernel<<<…, Cfg::kThreads, " in u for u in launch)
    assert all("not a compile-time constant" in u and "shared memory and occupancy are undecided" in u for u in launch)
    assert not any("unchanged from base" in n for n in kernel["notes"])
    headline = run.comment.split("\n")[1]
    assert f"undecided: launch figures declared, not measured: {GEMM_CUDA}:406 kernel" in headline
    _, status = acceptance_status(Report.model_validate(run.report))
    assert status.startswith(
        f"undecided, not blocking: deepgemm_tile (launch figures declared, not measured: {GEMM_CUDA}:406"
    )


# -- round four (issue 50) ------------------------------------------------------------------------------------------

# A key of another shape than opgate's own: an echoing gateway may quote any key it saw, so anything shaped like a key
# is masked too, not only the values opgate read.
OTHER_KEY = "sk-proj-" + "Q7w9E2r4T6y8U0i1O3p5A7s9"
ECHO_REPLY = {
    "id": f"chatcmpl-{CANARY}",
    "model": f"echo-model {CANARY} {OTHER_KEY}",
    "choices": [
        {
            "index": 0,
            "finish_reason": f"stop {CANARY}",
            "message": {
                "role": "assistant",
                "content": json.dumps(
                    {
                        "candidate_patch": None,
                        "risk_notes": [f"your key is {CANARY}"],
                        "local_commands": [],
                        "expected_metrics": {},
                    }
                ),
                "tool_calls": [{"id": "t1", "type": "function", "function": {"name": CANARY, "arguments": "{}"}}],
            },
        }
    ],
    "usage": {"prompt_tokens": CANARY, "completion_tokens": 12, "total_tokens": OTHER_KEY},
}
ECHO_ERROR = {
    "error": {"code": f"invalid_api_key {CANARY}", "type": f"auth {OTHER_KEY}", "message": f"invalid key {CANARY}"}
}


@pytest.mark.untimed  # a static failure: nothing is built or timed
@pytest.mark.parametrize(
    ("status", "body", "shown"), [(200, ECHO_REPLY, "echo-model ***"), (401, ECHO_ERROR, "auth ***")]
)
def test_a_gateway_that_echoes_the_key_puts_it_nowhere(opgate, kernel_repo, httpserver, tmp_path, status, body, shown):
    """Issue 50, 3: the gateway's own words (model id, error code, type and message, usage, tool-call names, finish
    reason, request id) carry the key and another key-shaped token. Neither reaches the log, report.json, comment.md,
    the annotations, the step summary, the ledger or anything posted to GitHub; the gateway's words are still shown."""
    httpserver.expect_request("/v1/chat/completions", method="POST").respond_with_json(body, status=status)
    kernel_repo.edit("kernels/deepgemm_tile/tile_config.json", '"tile_m": 128', '"tile_m": 96')  # static: no build
    head = kernel_repo.commit("a change the agent reviews")
    summary = tmp_path / "step_summary.md"
    with FakeGitHub(GH_TOKEN) as gh:
        gh.add_repo(GH_REPO)
        event = load_fixture("pull_request.opened.json", head_sha=head, base_sha=kernel_repo.base, before_sha="0" * 40)
        (tmp_path / "event.json").write_text(json.dumps(event))
        gh.add_pull(GH_REPO, number=GH_PR, head_sha=head, base_sha=kernel_repo.base, author="alice-dev")
        env = {**github_env(gh), "GITHUB_STEP_SUMMARY": str(summary), "TAOTOKEN_API_KEY_DEEPGEMM_AGENT": CANARY,
               "TAOTOKEN_BASE_URL": httpserver.url_for("/").rstrip("/"), "OPGATE_AGENT_RETRIES": "0"}  # fmt: skip
        run = opgate("review", "--event", str(tmp_path / "event.json"), "--repo", str(kernel_repo.path), "--post",
                     env=env)  # fmt: skip
        posted = json.dumps([r.body for r in gh.requests if r.is_write])
    assert run.code == 1, run.stdout + run.stderr  # the static failure; the agent's answer decides nothing
    ledger = (tmp_path / "ledger.sqlite").read_bytes().decode("latin-1")
    written = "\n".join([everything_written(run), summary.read_text(), posted, ledger])
    assert len(httpserver.log) == 1 and summary.read_text() and posted != "[]"
    for secret in (CANARY, OTHER_KEY, CANARY[len("sk-") :]):
        assert secret not in written, [line for line in written.splitlines() if secret in line][:3]
    assert shown in run.stderr + json.dumps(run.report)  # the gateway's words, masked, not dropped


# -- round four (issue 50, 1): no timed call sees what an earlier call left -----------------------------------------

# mul(A, B, C, s, workspace) of tests/fixtures/out_arg_repo at a size whose call takes well under a millisecond: a timed
# block then holds many calls (up to 50), more than the input sets a block once had (12 sets of 5 tensors).
SMALL_MUL = [*OUT_ARG_EDITS[:2], ("shape = { n = 1024 }", "shape = { m = 32, n = 64, k = 128 }")]
MUL_LOOP = """  for (long e = 0; e < m * n; ++e) {
    long i = e / n, j = e % n;
    float acc = 0.0f;
    for (long t = 0; t < k; ++t) acc += A[i * k + t] * B[t * n + j];
    C[e] = acc * s[j];
  }
"""
SKIPS_WHEN_WRITTEN = f"""#include <cmath>
// An op that returns at once when its output already holds no NaN (an earlier call wrote it), and otherwise does
// twice base's work: slower on every fresh call, faster wherever a call sees a set an earlier call saw.
int mul_body(const float* A, const float* B, float* C, const float* s, int* workspace, long m, long n, long k) {{
  bool written = true;
  for (long e = 0; e < m * n; ++e) if (std::isnan(C[e])) {{ written = false; break; }}
  if (written) return 0;
  for (int twice = 0; twice < 2; ++twice) {{
{MUL_LOOP}    asm volatile("" ::: "memory");
  }}
  (void)workspace;
  return 0;
}}
"""
SCRATCH_MARKER = f"""// An op that leaves a marker in its scratch and returns at once where it finds it.
int mul_body(const float* A, const float* B, float* C, const float* s, int* workspace, long m, long n, long k) {{
  if (workspace[0] == 0x0ECA) return 0;
{MUL_LOOP}  workspace[0] = 0x0ECA;
  return 0;
}}
"""


@pytest.fixture(scope="module")
def small_mul(tmp_path_factory: pytest.TempPathFactory, build_dir: Path) -> Adopted:
    adopted = adopt(tmp_path_factory.mktemp("small_mul"), build_dir, SMALL_MUL)
    assert [s.code for s in adopted.steps] == [0, 0, 0, 0], [(s.command, s.stdout, s.stderr) for s in adopted.steps]
    return adopted


def _mul_review(small_mul: Adopted, name: str, body: str, **env: str) -> dict:
    base = (OUT_ARG_FIXTURE / OUT_ARG_BODY_PATH).read_text()
    done, report = pull_request(small_mul, name, base, body, env={"OPGATE_MEASURE_MAX_SECONDS": "3", **env})
    assert report, done.stdout + done.stderr
    (kernel,) = report["kernels"]
    (case,) = kernel["cases"]
    print(name, case["verdict"], case["regression_pct"], case.get("ci95_pct"), kernel["reasons"])
    assert done.code == 1 and kernel["verdict"] == "fail", (done.stdout, kernel)
    return kernel


def test_an_op_that_skips_when_its_output_is_already_written_is_twice_as_slow(small_mul):
    """Issue 50, 1: 50 calls over 12 input sets, outputs not poisoned again between calls: 38 calls found their output
    written and returned at once; twice base's work on the other 12 passed at -57 %. Every call of a block now has its
    own set (its own poisoned output, its own zeroed scratch): every call does twice the work, and it fails on it."""
    kernel = _mul_review(small_mul, "skips-when-written", SKIPS_WHEN_WRITTEN, OPGATE_SIMULATE="always")
    (case,) = kernel["cases"]
    assert case["regression_pct"] > 40.0, case
    assert any(r.startswith("performance: smoke p50") for r in kernel["reasons"]), kernel["reasons"]
    # Under callgrind too every counted call has a set of its own: twice base's instructions (on bf81e7b the second
    # and third counted calls found their output written, and head counted less than base).
    simulated = case["simulated"]
    assert simulated["error"] is None, simulated
    assert simulated["head"]["instructions"] > 1.5 * simulated["base"]["instructions"], simulated


def test_an_op_that_leaves_a_marker_in_its_scratch_fails_on_it(small_mul):
    """Issue 50, 1: a marker left in scratch let every later call of the same set return at once (-55 %, passed).
    Every call now gets zeroed scratch, so the marker saves nothing; scratch left non-zero is itself a finding (a
    kernel that needs zeroed scratch must leave it so, as in production)."""
    kernel = _mul_review(small_mul, "scratch-marker", SCRATCH_MARKER)
    assert any(
        r.startswith("correctness: smoke left scratch non-zero after ") and ", first at workspace[0] = 3786: " in r
        for r in kernel["reasons"]
    ), kernel["reasons"]
