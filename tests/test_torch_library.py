"""A PyTorch extension laid out like PyTorch's custom-operator tutorial adopts opgate on the first try.

The fixture (tests/fixtures/torch_library_repo) registers `extension_cpp::mymuladd(Tensor a, Tensor b, float c)`
with TORCH_LIBRARY in `ops/csrc/muladd.cpp` (CPU) and TORCH_LIBRARY_IMPL in `ops/csrc/cuda/muladd.cu` (CUDA), and
defines `PyInit__C`, not a module named after opgate's build. The README's five adoption steps are followed on it
word for word; then three pull requests are reviewed: a comment, a bug in the CPU source, a change to the CUDA
source on this GPU-less machine. Each bad input the issue names has its test here.

The machine plays a CPU runner without the CUDA toolkit: nvcc is taken off the PATH, so the compile-only
resource check is skipped with a note (compiling a .cu that includes torch's headers needs torch's include flags,
issue 32's "ptxas with the build's flags").
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import ROOT, git

pytestmark = [pytest.mark.slow, pytest.mark.untimed]

FIXTURE = ROOT / "tests" / "fixtures" / "torch_library_repo"
CPU_SOURCE, CUDA_SOURCE = "ops/csrc/muladd.cpp", "ops/csrc/cuda/muladd.cu"
REFERENCE_PY = "ops/csrc/reference.py"
COMMENT = ("// Registers the CPU implementation", "// Registers the CPU implementation (a comment-only change)")
# What the team writes into the reference.py that opgate init left (the README's "fill in … its torch reference").
REFERENCE = '''"""Reference of extension_cpp::mymuladd: a * b + c."""

import torch


def make_inputs(case: dict, device: str, seed: int) -> tuple[torch.Tensor, ...]:
    gen = torch.Generator(device="cpu").manual_seed(seed)
    n, dtype = case["shape"]["n"], getattr(torch, case["dtype"])
    a = torch.randn(n, generator=gen).to(dtype)
    b = torch.randn(n, generator=gen).to(dtype)
    return a.to(device), b.to(device)


def reference(a: torch.Tensor, b: torch.Tensor, c: float) -> torch.Tensor:
    return a * b + c
'''


@dataclass
class Done:
    code: int
    stdout: str
    stderr: str
    seconds: float


def _cpu_runner_path() -> str:
    """PATH without the folders holding nvcc (a CPU runner without the CUDA toolkit)."""
    return os.pathsep.join(
        d for d in os.environ.get("PATH", "").split(os.pathsep) if d and not (Path(d) / "nvcc").exists()
    )


def _env(build_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TAOTOKEN_", "OPGATE_", "GITHUB_"))}
    env.update(
        PATH=f"{Path(sys.executable).parent}{os.pathsep}{_cpu_runner_path()}",  # `opgate` is this environment's
        OPGATE_BUILD_DIR=str(build_dir),
        OPGATE_MEASURE_MAX_SECONDS="0.5",
        OPGATE_NOISE_LIMIT_CORES="64",  # as tests/conftest.py: verdicts, not the machine's quiet
        OPGATE_SIMULATE="off",  # as tests/conftest.py: tests/test_simcost.py proves the simulated cost on its own
        OPGATE_CASE_TIMEOUT_S="60",
    )
    return env  # no OPGATE_DATABASE_URL: the default ledger, which must not land in the repository


def shell(repo: Path, command: str, build_dir: Path) -> Done:
    """Run one command line as a user types it, in the repository, with `opgate` on the PATH."""
    started = time.perf_counter()
    proc = subprocess.run(
        ["bash", "-c", command], cwd=repo, capture_output=True, text=True, env=_env(build_dir), timeout=900
    )
    return Done(proc.returncode, proc.stdout, proc.stderr, round(time.perf_counter() - started, 1))


def readme_commands() -> list[str]:
    """The command lines of the README's "Adopt opgate in five steps", in order, word for word."""
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## Adopt opgate in five steps") :]
    section = section[: section.index("\n## ", 3)]
    spans = re.findall(r"`([^`]+)`", section)
    return [s for s in spans if s.split(" ")[0] in ("pip", "opgate", "git")]


@dataclass
class Adopted:
    repo: Path
    origin: Path
    build_dir: Path
    steps: dict[str, Done]


@pytest.fixture(scope="module")
def adopted(tmp_path_factory: pytest.TempPathFactory, build_dir: Path) -> Adopted:
    """The fixture repository after the README's steps: opgate committed and pushed to origin's main."""
    root = tmp_path_factory.mktemp("tutorial")
    origin, repo = root / "origin.git", root / "ext"
    shutil.copytree(FIXTURE, repo)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.email", "team@example.com")
    git(repo, "config", "user.name", "team")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "the extension, before opgate")
    subprocess.run(["git", "init", "-q", "--bare", "-b", "main", str(origin)], check=True)
    git(repo, "remote", "add", "origin", str(origin))
    git(repo, "push", "-q", "origin", "main")

    steps: dict[str, Done] = {}
    commands = readme_commands()
    assert commands == [
        'pip install "opgate[runner]"',
        "pip install opgate",
        "opgate init --kernels ops --domain moe",
        "opgate lint",
        "opgate check",
        'git add -A && git commit -m "Adopt opgate"',
        "opgate review --base origin/main --head HEAD",
    ], "the README's adoption steps changed: follow them here"
    for command in commands:
        if command.startswith("pip "):
            continue  # step 1: this test runs in the environment that install made
        if command == "opgate lint":  # "Fill in each kernel's cases and its torch reference, then opgate lint"
            steps["check before the reference"] = shell(repo, "opgate check", build_dir)
            (repo / REFERENCE_PY).write_text(REFERENCE)
        steps[command] = shell(repo, command, build_dir)
    git(repo, "push", "-q", "origin", "main")  # step 4: push the workflow
    return Adopted(repo=repo, origin=origin, build_dir=build_dir, steps=steps)


def change(adopted: Adopted, name: str, path: str, old: str, new: str) -> Path:
    """A clone of origin's main with one commit changing `path` (a pull request's head)."""
    clone = adopted.repo.parent / name
    subprocess.run(["git", "clone", "-q", str(adopted.origin), str(clone)], check=True)
    git(clone, "config", "user.email", "dev@example.com")
    git(clone, "config", "user.name", "dev")
    target = clone / path
    text = target.read_text()
    assert old in text, f"{old!r} not in {path}"
    target.write_text(text.replace(old, new, 1))
    git(clone, "commit", "-q", "-am", f"{name}: {path}")
    return clone


def review(adopted: Adopted, clone: Path) -> tuple[Done, dict]:
    import json

    done = shell(clone, "opgate review --base origin/main --head HEAD --json", adopted.build_dir)
    report = clone / "reports" / "latest" / "report.json"
    return done, json.loads(report.read_text()) if report.is_file() else {}


def test_the_readme_adoption_steps_work_word_for_word_on_a_torch_library_extension(adopted):
    steps = adopted.steps
    init = steps["opgate init --kernels ops --domain moe"]
    assert init.code == 0, init.stderr
    assert "opgate: wrote ops/csrc/kernel.toml" in init.stdout and "then opgate check" in init.stdout
    for written in ("opgate.toml", "ops/csrc/reference.py", "ops/csrc/agent_task.json", ".env.example"):
        assert (adopted.repo / written).is_file(), written
    assert (adopted.repo / ".github" / "workflows" / "opgate.yml").is_file()

    # Before the reference is written, check names the line that raises (what init left), in seconds.
    early = steps["check before the reference"]
    assert early.code == 1
    assert re.search(
        r"✗   ops/csrc/reference\.py line \d+, in reference \(case smoke\): NotImplementedError: reference\.py of "
        r"extension_cpp: write the torch reference",
        early.stdout,
    ), early.stdout

    assert steps["opgate lint"].code == 0, steps["opgate lint"].stdout
    check = steps["opgate check"]
    assert check.code == 0, check.stdout + check.stderr
    assert "  ok  smoke (the smallest): entry and reference agree, max_abs_err 0 ≤ 0.01" in check.stdout
    # This runner compiles the .cu for the resource step where it has nvcc, and names what it cannot check.
    assert "  --  not checked on this runner: cases smoke_cuda: the entry against the reference (needs a CUDA GPU)" in (
        check.stdout
    )
    assert "ready (" not in check.stdout
    assert "opgate check: 1 kernel(s) without a problem in what was checked" in check.stdout

    first = steps["opgate review --base origin/main --head HEAD"]
    # The kernel is new to main: judged by its own reference (correct), perhaps waiting for a person's /accept.
    verdict = re.search(r"opgate: verdict (\w+) \(extension_cpp (\w+)\)", first.stdout)
    assert verdict is not None and verdict[2] in ("pass", "needs_accept", "undecided"), first.stdout + first.stderr
    assert first.code == (0 if verdict[2] in ("pass", "undecided") else 1)
    # Nothing of opgate's outputs lands in the repository: the report and the default ledger are ignored.
    assert (adopted.repo / "reports" / "opgate.sqlite").is_file()
    assert (adopted.repo / "reports" / "latest" / "report.json").is_file()
    assert git(adopted.repo, "status", "--porcelain") == ""
    seconds = {k: v.seconds for k, v in steps.items()}
    print(f"\ninit → first review on the fixture: {sum(seconds.values()):.1f} s {seconds} (shared machine)")


def test_a_comment_only_change_passes_or_stays_undecided_never_fails(adopted):
    clone = change(adopted, "comment", CPU_SOURCE, *COMMENT)
    done, report = review(adopted, clone)
    assert done.code == 0, done.stdout + done.stderr
    kernel = report["kernels"][0]
    assert kernel["name"] == "extension_cpp" and kernel["verdict"] in ("pass", "undecided"), kernel
    assert kernel["reasons"] == []
    if kernel["verdict"] == "undecided":  # the shared machine's noise: only latency may stay open
        assert all(line.startswith("performance inconclusive: smoke") for line in kernel["undecided"]), kernel


def test_a_bug_in_the_cpu_source_fails_naming_the_element(adopted):
    clone = change(adopted, "cpu-bug", CPU_SOURCE, "a_ptr[i] * b_ptr[i] + c", "a_ptr[i] * b_ptr[i] - c")
    done, report = review(adopted, clone)
    assert done.code == 1, done.stdout + done.stderr
    kernel = report["kernels"][0]
    assert kernel["verdict"] == "fail"
    assert any(
        re.match(r"correctness: smoke max_abs_err 3 > tolerance 0\.01 on out, first bad element out\[0\]: got ", r)
        for r in kernel["reasons"]
    ), kernel["reasons"]


def test_a_change_to_the_cuda_source_on_a_machine_without_a_gpu_is_not_judged_never_a_pass(adopted):
    clone = change(adopted, "cuda-bug", CUDA_SOURCE, "a[idx] * b[idx] + c", "a[idx] * b[idx] - c")
    done, report = review(adopted, clone)
    assert done.code == 0, done.stdout + done.stderr  # undecided does not block, and says why
    assert report["verdict"] == "undecided"
    kernel = report["kernels"][0]
    assert kernel["verdict"] == "undecided"
    assert (
        "ops/csrc/cuda/muladd.cu: changed, compiled by no build that ran here (only [build.cuda], which needs a "
        "CUDA GPU): not judged"
    ) in kernel["undecided"]


def test_a_key_error_in_make_inputs_names_the_reference_its_function_line_and_case(adopted):
    clone = change(adopted, "bad-reference", REFERENCE_PY, 'case["shape"]["n"]', 'case["shape"]["N"]')
    git(clone, "push", "-q", "origin", "HEAD:refs/heads/bad-reference")  # base's reference judges: make it base's
    done = shell(clone, "opgate check", adopted.build_dir)
    assert done.code == 1
    where = "ops/csrc/reference.py line 8, in make_inputs (case smoke): KeyError: 'N'"
    assert f"  ✗   {where}" in done.stdout, done.stdout
    head = change(adopted, "bad-reference-head", CPU_SOURCE, *COMMENT)  # the comment test's build, cached
    git(head, "fetch", "-q", "origin", "bad-reference")
    git(head, "rebase", "-q", "FETCH_HEAD")
    done = shell(head, "opgate review --base FETCH_HEAD --head HEAD", adopted.build_dir)
    assert done.code == 1, done.stdout + done.stderr
    assert f"the reference crashed: {where}" in done.stdout, done.stdout
    assert "the judge exited" not in done.stdout


def test_check_names_a_misspelt_entry_and_a_missing_tunables_file_with_their_lines(adopted):
    clone = change(
        adopted,
        "bad-entry",
        "ops/csrc/kernel.toml",
        '"torch.ops.extension_cpp.mymuladd"',
        '"torch.ops.extension_cpp.muladd"',
    )
    done = shell(clone, "opgate check", adopted.build_dir)
    assert done.code == 1
    line = next(i for i, t in enumerate((clone / "ops/csrc/kernel.toml").read_text().splitlines(), 1) if 'muladd"' in t)
    assert (
        f"  ✗   ops/csrc/kernel.toml line {line}: [build.cpu] entry = 'torch.ops.extension_cpp.muladd': no such op or "
        "function in its sources; did you mean 'torch.ops.extension_cpp.mymuladd'?"
    ) in done.stdout, done.stdout
    (clone / "ops" / "csrc" / "tunables.json").unlink()
    git(clone, "checkout", "-q", "origin/main", "--", "ops/csrc/kernel.toml")
    done = shell(clone, "opgate check extension_cpp", adopted.build_dir)
    assert done.code == 0, done.stdout  # no tunables declared: no tunables file needed
    toml = clone / "ops" / "csrc" / "kernel.toml"
    toml.write_text(re.sub(r"^\[tunables\].*$", "[tunables]\nblock = [64, 128]", toml.read_text(), flags=re.M))
    done = shell(clone, "opgate check extension_cpp", adopted.build_dir)
    line = next(
        i for i, t in enumerate((clone / "ops/csrc/kernel.toml").read_text().splitlines(), 1) if "config =" in t
    )
    assert done.code == 1
    assert f"ops/csrc/kernel.toml line {line}: config 'tunables.json': no such file beside kernel.toml" in done.stdout
    done = shell(clone, "opgate check nosuch", adopted.build_dir)
    assert done.code == 2 and "opgate: error: no kernel nosuch (have: extension_cpp)" in done.stderr


def test_a_manifest_typo_makes_the_review_exit_2_with_the_message(adopted):
    clone = change(adopted, "typo", "ops/csrc/kernel.toml", 'dtype = "float32"', 'dtype = "float32"\ntolerence = 1e-3')
    done = shell(clone, "opgate review --base origin/main --head HEAD", adopted.build_dir)
    assert done.code == 2, done.stdout + done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        "opgate: error: invalid kernel definition: ops/csrc/kernel.toml: cases.0.tolerence: Extra inputs are not "
        "permitted (did you mean 'tolerance'?)"
    )
    assert "verdict FAIL" in done.stdout  # the report still says so, for CI's status


def test_a_review_outside_a_git_repository_writes_nothing(adopted, tmp_path):
    plain = tmp_path / "not-a-repo"
    plain.mkdir()
    done = shell(plain, "opgate review --base main --head HEAD", adopted.build_dir)
    assert done.code == 2
    assert f"{plain} is not a git repository: opgate review compares two git revisions" in done.stderr
    assert list(plain.iterdir()) == []  # no reports/, no ledger
    assert len(done.stderr.strip().splitlines()) == 1
