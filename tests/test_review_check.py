"""`opgate check` (bot/review/check.py, bot/commands/check.py): one line per step — the review's compile-only resource
step for every architecture the kernel ships, the builds, the dry run, the reference — and "not checked on this
runner" wherever this machine cannot, never "ready" over an unchecked step (tests/fixtures/check_repo)."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from bot.config.manifest import load_kernel
from bot.models.report import Resource, ResourceCheckReport
from bot.review.check import CheckReport, KernelCheck, build_failure, first_compile_error, resource_step
from bot.untrusted.build import Built
from bot.verdict.compile_errors import build_errors, manifest_error
from tests.conftest import CHECK_REPO, check_repo, git

KERNEL = "ops/vec_scale"
NVCC = shutil.which("nvcc") is not None


def _gpu() -> bool:
    import torch

    return torch.cuda.is_available()


def _edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"{old!r} not in {path}"
    path.write_text(text.replace(old, new, 1))


def _lines(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if line.startswith("  ")]


# -- the steps, each judged as the review judges it --------------------------------------------------------


ROOTS = [("/opgate/src", KERNEL)]  # what the build's error_roots gives for the kernel's folder


def test_a_compile_error_is_named_by_repository_path_and_line_in_either_compilers_format():
    gcc = "/opgate/src/vec_scale.cu:3:10: fatal error: cusparse.h: No such file or directory"
    edg = '/opgate/src/vec_scale.cu(12): error: identifier "foo" is undefined'
    assert first_compile_error(build_errors(gcc, ROOTS)) == (
        f"{KERNEL}/vec_scale.cu line 3: cusparse.h: No such file or directory"
    )
    assert (
        first_compile_error(build_errors(edg, ROOTS)) == f'{KERNEL}/vec_scale.cu line 12: identifier "foo" is undefined'
    )
    assert first_compile_error([manifest_error("[build.cpu]: ../x.cu: not a file inside")]) is None


def test_a_compile_error_followed_by_more_warnings_than_the_log_tail_keeps_is_still_the_one_named():
    """`opgate check` reads the build's structured errors (from the whole compiler output, as the review does),
    not the log tail: 60 warnings after the error push it out of the tail's 40 lines."""
    kernel = load_kernel(CHECK_REPO / KERNEL, path=KERNEL)
    error = "/opgate/src/vec_scale_cpu.cpp:7:3: error: 'scale_rows' was not declared in this scope"
    warnings = [f"/opgate/src/vec_scale_cpu.cpp:{20 + i}:9: warning: unused variable 'w{i}'" for i in range(60)]
    output = "\n".join(["FAILED: vec_scale_cpu.o", error, *warnings, "ninja: build stopped: subcommand failed."])
    tail = "\n".join(output.splitlines()[-40:])  # what bot/untrusted/build.py keeps as the log tail
    assert "error:" not in tail
    built = Built(ok=False, device="cpu", key="k", log_tail=tail, errors=build_errors(output, ROOTS))
    want = f"{KERNEL}/vec_scale_cpu.cpp line 7: 'scale_rows' was not declared in this scope"
    assert build_failure(built, kernel, "cpu") == want
    nothing = Built(ok=False, device="cpu", key="", log_tail="kernel.toml names ../x.cpp, outside the kernel")
    assert build_failure(nothing, kernel, "cpu") == (
        f"{KERNEL}/kernel.toml [build.cpu] does not build: kernel.toml names ../x.cpp, outside the kernel"
    )
    result = KernelCheck(name="vec_scale", folder=KERNEL)
    check = ResourceCheckReport(status="compile_fail", arch="sm_90a", log_tail=tail, errors=built.errors)
    resource_step(kernel, check, result)
    assert [s.detail for s in result.steps] == [f"resources on sm_90a: does not compile: {want}"]


def test_each_resource_status_is_one_line_passed_failed_or_not_checked_on_this_runner():
    kernel = load_kernel(CHECK_REPO / KERNEL, path=KERNEL)
    result = KernelCheck(name="vec_scale", folder=KERNEL)
    no_nvcc = ResourceCheckReport(status="no_nvcc", arch="sm_90a")
    old_nvcc = ResourceCheckReport(status="unsupported_arch", arch="sm_100a", log_tail="nvcc 11.8 has no sm_100a")
    refused = ResourceCheckReport(status="compile_fail", arch="sm_90a", log_tail="head: ../x.cu: not a file inside")
    ten = [Resource(function=f"void k<{n}u>(float*)", registers=16, dynamic_smem_bytes=0) for n in range(10)]
    unbounded = ResourceCheckReport(status="ok", arch="sm_90a", head=ten)
    spills = ResourceCheckReport(
        status="ok", arch="sm_90a", head=[Resource(function="void s(int)", registers=255, spill_bytes=64, threads=64)]
    )
    for check in (no_nvcc, old_nvcc, refused, unbounded, spills):
        resource_step(kernel, check, result)
    assert [(s.status, s.detail) for s in result.steps] == [
        ("not_checked", "resources on sm_90a: nvcc is not on the PATH (install the CUDA toolkit)"),
        ("not_checked", "resources on sm_100a: nvcc 11.8 has no sm_100a"),
        ("failed", f"resources on sm_90a: {KERNEL}/kernel.toml [build.cuda]: ../x.cu: not a file inside"),
        (
            "incomplete",
            "occupancy on sm_90a: k (10 instantiations): threads per block "
            "unknown, so the review computes no occupancy: give __launch_bounds__ in the code or "
            f"[launch.functions.k] threads in {KERNEL}/kernel.toml",
        ),
        ("failed", "resources on sm_90a: void s(int) spills 64 bytes (stores 0 B, loads 0 B)"),
        (
            "note",
            "resources on sm_90a: in a review, each line above is held against base: noted 'in base too' where base "
            "has it alike, failed only where a change makes or worsens it",
        ),
    ]
    report = CheckReport(kernels=[result], seconds=1.0)
    assert not result.ok and not report.ready and len(result.not_checked) == 3
    dumped = json.loads(report.model_dump_json())
    assert dumped["ready"] is False and dumped["kernels"][0]["problem"].endswith("not a file inside")


# -- the CLI on the fixture -----------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.untimed
def test_check_runs_every_step_this_runner_can_and_names_the_rest_never_ready_over_them(opgate, tmp_path):
    check_repo(tmp_path)
    run = opgate("check")
    assert run.code == 0, run.stdout + run.stderr
    lines = _lines(run.stdout)
    assert lines[0] == f"  ok  manifest {KERNEL}/kernel.toml: valid; tunables and flags allowed"
    for arch in ("sm_90a", "sm_100a"):
        if NVCC:
            assert any(
                re.fullmatch(
                    rf"  ok  resources on {arch}: 4 kernel function\(s\) \((cached|compiled in [\d.]+ s)\), each with "
                    r"its threads and dynamic shared memory",
                    line,
                )
                for line in lines
            ), lines
        else:
            assert f"  --  not checked on this runner: resources on {arch}: nvcc is not on the PATH" in run.stdout
    assert any(re.fullmatch(r"  ok  build cpu: (cached|compiled .*) \([\d.]+ s\)", line) for line in lines), lines
    assert "  ok  cpu_1000 (the smallest): entry and reference agree, max_abs_err 0 ≤ 1e-06" in lines
    if _gpu() and NVCC:
        assert run.stdout.splitlines()[-1].startswith("opgate check: 1 kernel(s) ready")
    else:
        assert "  --  not checked on this runner: build cuda: [build.cuda] (needs a CUDA GPU)" in lines
        assert (
            "  --  not checked on this runner: cases cuda_1m: the entry against the reference (needs a CUDA GPU)"
            in lines
        )
        assert "ready (" not in run.stdout
        assert re.search(r"opgate check: 1 kernel\(s\) without a problem in what was checked, \d step\(s\) not checked",
                         run.stdout)  # fmt: skip
    # the long steps as they run, on stderr (a cold build is the binding's compile: seconds with no other line)
    build_at = run.stderr.index("opgate: build ")
    assert re.search(r"opgate: build \S+ \(cpu\): done in [\d.]+ s", run.stderr), run.stderr
    assert re.search(r"opgate: dry run \S+: \d+ cpu case\(s\): done in [\d.]+ s", run.stderr[build_at:]), run.stderr
    as_json = opgate("check", "--json")
    assert "opgate: build " not in as_json.stderr  # --json (and -q): only warnings and results
    report = json.loads(as_json.stdout)
    [kernel] = report["kernels"]
    assert kernel["ok"] is True and report["ready"] is (_gpu() and NVCC)
    assert [s["step"] for s in kernel["steps"]][:3] == ["manifest", "resources sm_90a", "resources sm_100a"]


@pytest.mark.slow
@pytest.mark.untimed
def test_check_fails_what_the_review_fails_a_missing_launch_entry_a_raising_reference_a_missing_header(
    opgate, tmp_path
):
    repo = check_repo(tmp_path)
    manifest, folder = repo / KERNEL / "kernel.toml", repo / KERNEL
    text = manifest.read_text()
    text = re.sub(r"# Each instantiation.*?\n\n", "", text, flags=re.S)  # no [launch] entry
    text = re.sub(r'\[\[cases\]\]\nname = "cpu_1000".*?\n\n', "", text, flags=re.S)  # CUDA cases only
    manifest.write_text(text)
    _edit(folder / "reference.py", "    return (x.double() * s).float()", '    raise NotImplementedError("write it")')
    run = opgate("check")
    assert run.code == 1, run.stdout + run.stderr
    lines = _lines(run.stdout)
    reference = next(line for line in lines if "reference.py" in line)
    assert reference.startswith(
        f"  ✗   {KERNEL}/reference.py line 12, in reference (case cuda_1m): NotImplementedError"
    )
    if NVCC:
        for arch in ("sm_90a", "sm_100a"):
            [line] = [x for x in lines if x.startswith(f"  ✗   resources on {arch}: ")]
            assert line == (
                f"  ✗   resources on {arch}: vec_scale_kernel (4 instantiations) uses dynamic shared "
                f"memory (extern __shared__) that {KERNEL}/kernel.toml does not size: add "
                "[launch.functions.vec_scale_kernel] dynamic_smem"
            )
            assert any(x.startswith(f"  ·   resources on {arch}: in a review, each line above is held against base: ")
                       for x in lines)  # fmt: skip
        git(repo, "checkout", "-q", "--", f"{KERNEL}/kernel.toml", f"{KERNEL}/reference.py")
        _edit(
            folder / "vec_scale.cu", '#include "vec_scale.h"\n', '#include "vec_scale.h"\n#include <cusparse_gone.h>\n'
        )
        run = opgate("check")
        assert run.code == 1
        for arch in ("sm_90a", "sm_100a"):
            assert (
                f"  ✗   resources on {arch}: does not compile: {KERNEL}/vec_scale.cu line 3: cusparse_gone.h: No such "
                "file or directory"
            ) in _lines(run.stdout), run.stdout
    assert run.stdout.splitlines()[-1].startswith("opgate check: 1 of 1 kernel(s) with a problem")


def test_check_says_occupancy_is_not_computed_for_an_architecture_without_a_table(tmp_path: Path) -> None:
    from bot.config.settings import Settings
    from bot.review.check import Checker
    from tests.conftest import KERNELS

    kernel = load_kernel(KERNELS / "deepgemm_tile")
    manifest = kernel.manifest
    shipped = manifest.constraints.model_copy(update={"architectures": ["sm_86", "sm_110a"]})
    # a CUDA build without a .cu (no resource step to compile) on a runner that builds none: the check stops at the
    # first cpu case, before any build
    cuda = manifest.build["cuda"].model_copy(update={"sources": ["binding_cuda.cpp"]})
    cuda_only = manifest.model_copy(update={"constraints": shipped, "build": {"cuda": cuda}})
    checker = Checker(Settings(build_dir=tmp_path))
    checker.env = checker.env.model_copy(update={"device": "cpu"})
    result = checker.check(kernel.model_copy(update={"manifest": cuda_only}))
    assert result.steps[0].detail.endswith("kernel.toml: valid; tunables and flags allowed")
    occupancy = [s for s in result.steps if s.step.startswith("occupancy")]
    assert [(s.status, s.detail) for s in occupancy] == [  # sm_86 has a table
        (
            "incomplete",
            "occupancy not computed for sm_110a: no table "
            "(opgate has sm_75, sm_80, sm_86, sm_87, sm_89, sm_90, sm_100, sm_103, sm_120)",
        )
    ]
    assert not result.ok and not CheckReport(kernels=[result], seconds=0.0).ready
