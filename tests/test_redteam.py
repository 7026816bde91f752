"""Red team: a kernel in a pull request attacks the judge, the secrets, the network, the cache and the log.

Every attack below reproduced against the runner before the sandboxed, out-of-process judge (main at
5060a5c): a forged PASS, the canary key read from an ancestor's /proc environ, a TCP connection out,
the base's cached extension rewritten, a workflow command in opgate's own stdout, PR code run by
`-ccbin`. Each test here asserts the verdict the attack deserves and that nothing leaked.
"""

from __future__ import annotations

import hashlib
import socket
import threading
from pathlib import Path

import pytest

from bot.untrusted.sandbox import Sandbox
from tests import redteam
from tests.redteam import GEMM

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
        pytest.fail(f"the red-team suite needs the sandbox: {isolation.reason}")


def review(opgate, repo, *extra: str, env: dict[str, str] | None = None):
    head = repo.commit("hostile change")
    return opgate("review", "--repo", str(repo.path), "--base", repo.base, "--head", head, "--offline", *extra, env=env)


def hostile(repo, **parts: str) -> None:
    path = repo.path / GEMM
    path.write_text(redteam.body(path.read_text(), **parts))


def cpu_cases(run) -> list[dict]:
    return [c for c in run.kernel("deepgemm_tile")["cases"] if c["device"] == "cpu"]


def everything_written(run) -> str:
    """stdout, stderr and every file the review wrote (report, comment, candidates)."""
    files = [p.read_text(errors="replace") for p in run.out.rglob("*") if p.is_file()]
    return "\n".join([run.stdout, run.stderr, *files])


def test_a_kernel_that_replaces_the_judges_comparison_still_fails(opgate, kernel_repo):
    hostile(kernel_repo, load=redteam.PATCH_JUDGE, replace=redteam.ZEROS)
    run = review(opgate, kernel_repo)
    assert run.code == 1
    kernel = run.kernel("deepgemm_tile")
    assert kernel["verdict"] == "fail"
    for case in cpu_cases(run):
        assert case["status"] == "incorrect" and case["max_abs_err"] > case["tolerance"]


def test_forged_lines_in_every_file_and_descriptor_change_nothing(opgate, kernel_repo):
    hostile(kernel_repo, call=redteam.on_call(redteam.FORGE), replace=redteam.ZEROS)
    run = review(opgate, kernel_repo)
    assert run.code == 1
    assert run.kernel("deepgemm_tile")["verdict"] in ("fail", "error")
    assert all(c["verdict"] in ("fail", "error") for c in cpu_cases(run))


def test_replaying_the_first_result_fails_on_the_fresh_inputs_of_timed_calls(opgate, kernel_repo):
    hostile(kernel_repo, replace=redteam.REPLAY)
    run = review(opgate, kernel_repo)
    assert run.code == 1
    for case in cpu_cases(run):
        assert case["verdict"] == "fail" and case["status"] == "incorrect"
        assert any("checked timed calls differ from the reference" in r for r in case["reasons"]), case["reasons"]


def test_work_left_running_after_the_timed_calls_is_caught(opgate, kernel_repo):
    hostile(kernel_repo, replace=redteam.ASYNC)
    run = review(opgate, kernel_repo)
    assert run.code == 1
    caught = ("differ from the reference", "outside its timed calls", "more than one thread", "crashed")
    for case in cpu_cases(run):
        # A checked call's output was not there yet, or the CPU spent outside the timed region shows, or the
        # thread wrote into an output the harness had already freed (this attack corrupts its own heap).
        assert case["verdict"] in ("fail", "error"), case
        assert any(word in r for r in case["reasons"] for word in caught), case["reasons"]


def test_the_canary_key_is_out_of_reach_of_kernel_code(opgate, kernel_repo):
    hostile(kernel_repo, load=redteam.hunt(CANARY), call=redteam.on_call(redteam.hunt(CANARY), once=True))
    run = review(opgate, kernel_repo, env=KEY_ENV)
    assert "CANARY-FOUND" not in everything_written(run)
    assert CANARY not in everything_written(run)
    # The kernel aborts when it finds the key: every case ran to a measurement instead.
    assert all(c["status"] == "ok" for c in cpu_cases(run)), cpu_cases(run)


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


def test_kernel_code_cannot_rewrite_the_build_cache(opgate, kernel_repo, build_dir):
    before = _hashes(build_dir)
    poison = redteam.poison(str(build_dir))
    hostile(kernel_repo, load=poison, call=redteam.on_call(poison, once=True))
    run = review(opgate, kernel_repo)
    assert all(c["status"] == "ok" for c in cpu_cases(run)), cpu_cases(run)
    after = _hashes(build_dir)
    assert {path: after.get(path) for path in before} == before  # nothing that was there changed
    assert not any(Path(p).read_bytes().startswith(b"poisoned") for p in after)


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


def test_kernel_output_cannot_write_workflow_commands_into_opgates_log(opgate, kernel_repo):
    hostile(kernel_repo, load=redteam.PARENT_STDOUT, call=redteam.on_call(redteam.PARENT_STDOUT, once=True))
    run = review(opgate, kernel_repo)
    for line in (run.stdout + run.stderr).splitlines():
        assert not line.lstrip().startswith("::"), line
    assert "\r" not in run.stdout + run.stderr


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


def test_a_new_kernels_own_reference_runs_in_the_sandbox_too(opgate, kernel_repo):
    """A kernel new in the change is judged by its own reference: PR code, so the judge is sandboxed as well."""
    src = kernel_repo.path / "kernels/deepgemm_tile"
    new = kernel_repo.path / "kernels/newgemm"
    new.mkdir()
    for f in src.iterdir():
        if f.is_file():
            (new / f.name).write_bytes(f.read_bytes())
    manifest = (new / "kernel.toml").read_text().replace('"deepgemm_tile"', '"newgemm"')
    (new / "kernel.toml").write_text(manifest.replace("deepgemm_tile/", "newgemm/"))
    (new / "reference.py").write_text((new / "reference.py").read_text() + redteam.hunt(CANARY))
    run = review(opgate, kernel_repo, env=KEY_ENV)
    assert "CANARY-FOUND" not in everything_written(run) and CANARY not in everything_written(run)
    kernel = run.kernel("newgemm")
    assert all(c["status"] == "ok" for c in kernel["cases"] if c["device"] == "cpu"), kernel
    assert run.report["isolation"]["mode"] == "bwrap"
