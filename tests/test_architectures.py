"""Every architecture a kernel ships for, and how close to the hardware each case runs: the resource gate per
architecture, the per-architecture fan-out and its keys, declared work, achieved rates and the peak."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from bot.config.manifest import Kernel, load_kernel
from bot.config.manifest_tables import Case, Constraints
from bot.edges.peak import cpu_peak
from bot.errors import InputError
from bot.ledger import MIGRATIONS, open_ledger
from bot.ledger.db import Database
from bot.mainline.drift import Reference, drift
from bot.mainline.record import MainCommit, figures
from bot.mainline.store import History
from bot.models.finding import Phrase
from bot.models.report import CaseReport, KernelReport, Machine
from bot.present.render import render_comment
from bot.review import fanout
from bot.review.arch_jobs import job_arches, other_job
from bot.review.resource_check import resource_checks
from bot.tune.analysis import per_shape
from bot.tune.trial import trial_from
from bot.untrusted.sandbox import Sandbox
from bot.verdict import change
from bot.verdict.findings import case_lines
from bot.verdict.gate import Policy, case_verdict, kernel_verdict
from bot.verdict.throughput import device_peak, judge_throughput
from bot.verdict.written import written, written_kernel
from bot.wording.messages import phrase as render_phrase
from bot.wording.messages import render
from tests import comment_reports as cr
from tests.comment_checks import rows, structure_problems, text_of
from tests.conftest import KERNELS, REPO_CONFIG, make_repo
from tests.hostile import html

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on the PATH")
SPLITK = "v41_attention_splitk"
PARTIAL = "__global__ void __launch_bounds__(kThreads) splitk_partial_kernel("
# Tuned for Blackwell only: 12 resident blocks of 128 threads cap the partial kernel at 40 registers on sm_100a,
# far below the 176 it uses; sm_90a compiles the bounds it always had.
BLACKWELL_BOUNDS = """#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1000
#define OPG_PARTIAL_BOUNDS __launch_bounds__(kThreads, 12)
#else
#define OPG_PARTIAL_BOUNDS __launch_bounds__(kThreads)
#endif
__global__ void OPG_PARTIAL_BOUNDS splitk_partial_kernel("""


def _copy(tmp: Path, side: str, name: str = SPLITK) -> Path:
    folder = tmp / side / "kernels" / name
    shutil.copytree(KERNELS / name, folder, ignore=shutil.ignore_patterns("__pycache__"))
    return folder


def _load(folder: Path) -> Kernel:
    return load_kernel(folder, config=REPO_CONFIG, path=f"kernels/{folder.name}")


def _gate(head: Kernel, base: Kernel, build_dir: Path) -> KernelReport:
    """The review's compile-only half: every architecture's ptxas check, folded by the gate (no case runs)."""
    rules = base.manifest.constraints
    checks = resource_checks(head, base, rules.architectures, build_dir / "resources", Sandbox.detect())
    report = KernelReport(name=head.name, domain=head.manifest.domain, changed=True, verdict="skipped")
    report.resource_check, report.arch_checks = checks[0], checks[1:]
    passing = CaseReport(name="cpu_causal_512", tolerance=0.01, verdict="pass", p50_ms=1.0, base_p50_ms=1.0)
    return written_kernel(kernel_verdict(report, [], [passing], rules, Policy()))


# -- the resource gate per architecture ----------------------------------------------------------------------


@pytest.mark.untimed  # compile-only
@pytest.mark.slow
@needs_nvcc
def test_a_cu_change_that_spills_only_on_sm_100a_fails_and_names_the_architecture(tmp_path, build_dir):
    base, head = _copy(tmp_path, "base"), _copy(tmp_path, "head")
    source = head / "attention_cuda.cu"
    source.write_text(source.read_text().replace(PARTIAL, BLACKWELL_BOUNDS, 1))
    k = _gate(_load(head), _load(base), build_dir)
    assert [c.arch for c in k.resource_checks()] == ["sm_90a", "sm_100a"]
    sm90, sm100 = k.resource_checks()
    assert all(r.spill_bytes == 0 for r in sm90.head) and any(r.spill_bytes > 0 for r in sm100.head)
    [spill] = [r for r in k.reasons if "spills" in r]
    assert k.verdict == "fail" and spill.startswith("resource: ") and spill.endswith(" on sm_100a")
    assert "splitk_partial_kernel" in spill and not any(r.endswith(" on sm_90a") for r in k.reasons)
    # one block per architecture: sm_100a's open with the spill in bold, sm_90a's collapsed and unchanged
    report = cr.report([k])
    out = render_comment(report)
    assert structure_problems(out, report) == []
    assert "<details><summary>Resources: registers, spills, shared memory, occupancy (ptxas, sm_90a) — unchanged" in out
    assert "<details open><summary>Resources: registers, spills, shared memory, occupancy (ptxas, sm_100a) ❌" in out
    sm100_block = html(out.split("(ptxas, sm_100a)")[1].split("</details>")[0])
    partial = next(cells for cells in rows(sm100_block) if "splitk_partial_kernel" in cells[0])
    assert partial[2].startswith("0 → ") and partial[2] != "0 → 0"  # base → head spill bytes


@pytest.mark.untimed  # compile-only
@pytest.mark.slow
@needs_nvcc
def test_a_toolchain_that_cannot_compile_an_architecture_says_so_for_that_architecture(tmp_path, build_dir):
    base, head = _copy(tmp_path, "base"), _copy(tmp_path, "head")
    for folder in (base, head):  # nvcc 13 dropped Volta: sm_70 is one it cannot compile
        manifest = folder / "kernel.toml"
        text = manifest.read_text().replace('["sm_90a", "sm_100a"]', '["sm_90a", "sm_70"]')
        manifest.write_text(text)
    k = _gate(_load(head), _load(base), build_dir)
    sm90, sm70 = k.resource_checks()
    assert (sm90.status, sm70.status) == ("ok", "unsupported_arch")
    assert k.verdict == "undecided" and not k.reasons  # sm_90a passed; sm_70 was not judged, which is said
    [line] = k.undecided
    assert line.startswith("resource: this runner's nvcc cannot compile for sm_70 (`nvcc --list-gpu-code`: sm_75")
    out = render_comment(cr.report([k]))
    assert "Resource check (ptxas, sm_70): **unsupported_arch** — this runner's nvcc cannot compile for sm_70" in out


def test_each_kernel_of_this_repository_ships_for_sm_90a_and_sm_100a_and_declares_its_work():
    for name in ("deepgemm_tile", "flashmla_decode", SPLITK):
        manifest = _load(KERNELS / name).manifest
        assert manifest.constraints.architectures == ["sm_90a", "sm_100a"]
        assert all(None not in c.work() for c in manifest.cases), name
    gemm = {c.name: c for c in _load(KERNELS / "deepgemm_tile").manifest.cases}
    assert gemm["gemm_4096"].work() == (2 * 4096**3, 2 * (2 * 4096 * 4096) + 4 * 4096 * 4096)


# -- declared work ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("flops", "error"),
    [
        ("2*m*n*q", "flops = '2*m*n*q': unknown name 'q' (known: k, m, n)"),
        ("2*m*n*k // (n - 512)", "flops = '2*m*n*k // (n - 512)': division by zero"),
        ("m*n*k / 3", "is not a whole number"),
        ("m - n", "flops = 'm - n' is 0: the work of one call must be positive"),
    ],
)
def test_flops_and_bytes_expressions_are_bad_input_naming_the_case_and_expression(tmp_path, flops, error):
    folder = _copy(tmp_path, "repo", "deepgemm_tile")
    manifest = folder / "kernel.toml"
    manifest.write_text(manifest.read_text().replace('flops = "2*m*n*k"', f'flops = "{flops}"'))
    with pytest.raises(InputError) as caught:
        _load(folder)
    message = str(caught.value)
    assert "\n" not in message and message.startswith(f"{manifest}: ") and error in message
    assert "work.flops over case square_512's shape" in message  # [work] applies to every case: the first named


def test_lint_names_the_case_whose_own_work_reads_an_unknown_name(opgate, tmp_path):
    folder = _copy(tmp_path, "repo", "deepgemm_tile")
    manifest = folder / "kernel.toml"
    text = manifest.read_text().replace(
        "shape = { m = 200, n = 328, k = 264 }", 'shape = { m = 200, n = 328, k = 264 }\nbytes = "2*m*n*z"', 1
    )
    manifest.write_text(text)
    run = opgate("lint", str(manifest))
    assert run.code == 1
    assert "KERN001 cases[1].bytes: bytes = '2*m*n*z': unknown name 'z' (known: k, m, n)" in run.stdout


def test_a_manifest_with_bad_work_stops_a_command_with_exit_2_and_one_line(opgate, tmp_path):
    repo = make_repo(tmp_path / "repo", ["deepgemm_tile"])
    repo.edit("kernels/deepgemm_tile/kernel.toml", 'flops = "2*m*n*k"', 'flops = "2*m*n*k // (n - 512)"')
    repo.commit("declare the work wrong")
    run = opgate("tune", "deepgemm_tile", "--repo", str(repo.path), "--strategy", "exhaustive")
    assert run.code == 2
    [line] = [ln for ln in run.stderr.splitlines() if ln.startswith("opgate: error: ")]
    assert line.endswith("work.flops over case square_512's shape: flops = '2*m*n*k // (n - 512)': division by zero")


def test_a_case_names_only_an_architecture_its_kernel_ships_for_and_only_on_a_gpu(tmp_path):
    folder = _copy(tmp_path, "repo", "deepgemm_tile")
    manifest = folder / "kernel.toml"
    base_text = manifest.read_text()
    manifest.write_text(base_text.replace('name = "gemm_4096"\n', 'name = "gemm_4096"\narch = "sm_120a"\n'))
    with pytest.raises(InputError, match=r"case gemm_4096: arch = 'sm_120a' is not one the kernel ships for"):
        _load(folder)
    manifest.write_text(base_text.replace('name = "square_512"\n', 'name = "square_512"\narch = "sm_100a"\n'))
    with pytest.raises(InputError, match=r"case square_512: arch = 'sm_100a' names a GPU, but it runs on cpu"):
        _load(folder)


# -- achieved rates and the peak -------------------------------------------------------------------------------


def _timed(p50: float, base: float) -> CaseReport:
    return CaseReport(name="gemm_4096", device="cuda", tolerance=0.01, verdict="pass", p50_ms=p50, base_p50_ms=base)


def test_gpu_peaks_are_the_data_sheets_dense_bf16_and_hbm_figures():
    assert (device_peak("NVIDIA H100 80GB HBM3").tflops, device_peak("NVIDIA H100 80GB HBM3").gbps) == (989.5, 3350)
    assert device_peak("NVIDIA H100 NVL").tflops == 835.5 and device_peak("NVIDIA H100 PCIe").gbps == 2000
    assert (device_peak("NVIDIA H200").tflops, device_peak("NVIDIA H200").gbps) == (989.5, 4800)
    assert (device_peak("NVIDIA B200").tflops, device_peak("NVIDIA B200").gbps) == (2250, 8000)
    assert device_peak("NVIDIA Quadro K6000") is None and device_peak(None) is None


@pytest.mark.parametrize(
    ("name", "label", "tflops", "gbps"),
    [  # the names nvidia-smi (or torch, on a Jetson) reports for the parts of each architecture opgate has a table of
        ("Tesla T4", "NVIDIA T4", 65, 320),
        ("NVIDIA A100-SXM4-80GB", "NVIDIA A100 80GB SXM", 312, 2039),
        ("NVIDIA A100-SXM4-40GB", "NVIDIA A100 40GB SXM", 312, 1555),
        ("NVIDIA A100 80GB PCIe", "NVIDIA A100 80GB PCIe", 312, 1935),
        ("NVIDIA A10", "NVIDIA A10", 125, 600),
        ("NVIDIA GeForce RTX 3090", "NVIDIA GeForce RTX 3090", 142, 936),
        ("Orin", "NVIDIA Jetson AGX Orin", 42.5, 204.8),
        ("NVIDIA L4", "NVIDIA L4", 121, 300),
        ("NVIDIA L40", "NVIDIA L40", 181.05, 864),
        ("NVIDIA L40S", "NVIDIA L40S", 366.5, 864),
        ("NVIDIA GeForce RTX 4090", "NVIDIA GeForce RTX 4090", 330.3, 1008),
        ("NVIDIA H100 80GB HBM3", "NVIDIA H100 SXM", 989.5, 3350),
        ("NVIDIA GH200 480GB", "NVIDIA GH200", 989.5, 4900),
        ("NVIDIA B200", "NVIDIA B200", 2250, 8000),
        ("NVIDIA GB200", "NVIDIA GB200", 2500, 8000),
        ("NVIDIA B300 SXM6 AC", "NVIDIA B300", 2250, 8000),
        ("NVIDIA GB300", "NVIDIA GB300", 2500, 8000),
        ("NVIDIA GeForce RTX 5090", "NVIDIA GeForce RTX 5090", 419, 1792),
    ],
)
def test_each_part_finds_its_own_data_sheet_row(name: str, label: str, tflops: float, gbps: float) -> None:
    from bot.wording.messages import phrase

    peak = device_peak(name)
    assert peak is not None and phrase(peak.of).startswith(f"{label} (") and (peak.tflops, peak.gbps) == (tflops, gbps)


def test_a_measured_rate_is_judged_against_its_own_parts_peak() -> None:
    flops = 2 * 4096**3
    case = _timed(0.2, 0.21)  # 687 TFLOP/s: 69 % of an H100's dense bf16
    judge_throughput(case, flops, None, device_peak("NVIDIA H100 80GB HBM3"))
    assert case.throughput is not None and case.verdict == "pass" and case.throughput.head_flops_pct == 69.45
    impossible = _timed(0.1, 0.21)  # 1,374 TFLOP/s on an H100: no such H100
    judge_throughput(impossible, flops, None, device_peak("NVIDIA H100 80GB HBM3"))
    assert impossible.verdict == "fail" and case_lines(impossible)[0].startswith(
        "implausible: above the hardware limit — verify: head 1,374 TFLOP/s is 139% of the peak 989.5 TFLOP/s "
        "(NVIDIA H100 SXM"
    )
    on_b200 = _timed(0.1, 0.21)  # the same figure is 61 % of a B200
    judge_throughput(on_b200, flops, None, device_peak("NVIDIA B200"))
    assert on_b200.verdict == "pass" and on_b200.throughput is not None and on_b200.throughput.head_flops_pct == 61.08


def test_the_comment_gives_achieved_rates_and_the_share_of_the_peak():
    rendered = html(render_comment(cr.sm100_spill()))
    table = {cells[0]: cells for cells in rows(rendered) if len(cells) == 8}
    assert table["square_512"][5] == "8.6 GFLOP/s / 8.62 GFLOP/s · 0.0672 GB/s / 0.0673 GB/s"
    assert table["square_512"][6] == "4.23% compute"
    shown = "this runner's AMD EPYC, one thread as measured by opgate (best matmul and copy; docs/review.md)."
    assert f"% of peak: head's larger share of {shown}" in text_of(rendered)


def test_a_cpu_case_above_the_measured_peak_fails_as_implausible_and_not_as_a_latency_change():
    report = cr.implausible()
    out = render_comment(report)
    assert structure_problems(out, report) == []
    headline = text_of(html(out.split("### ")[0]))
    assert "❌ implausible square_512 above the hardware limit — verify: head 8.618 TFLOP/s is" in headline
    table = {cells[0]: cells for cells in rows(html(out)) if len(cells) == 8}
    assert table["square_512"][6].endswith("% compute ❌") and table["square_512"][7] == "❌ fail"
    assert "❌" not in table["square_512"][4]  # -99.9% is not a regression: the peak failed it


@pytest.mark.untimed  # 1e5x above the peak: any load
@pytest.mark.slow
def test_a_cpu_case_whose_head_beats_the_runners_measured_peak_fails_the_review(opgate, tmp_path, build_dir):
    """The work deepgemm_tile's base declares is 100,000 times the truth: head's rate exceeds what this core
    measured itself doing, so the case cannot be believed (the tuning loop reads the same verdict)."""
    repo = make_repo(tmp_path / "repo", ["deepgemm_tile"])
    repo.edit("kernels/deepgemm_tile/kernel.toml", 'flops = "2*m*n*k"', 'flops = "200000*m*n*k"')
    repo.base = repo.commit("base declares its work")
    # an unused function: other bytes, so head is timed (a comment alone compiles to base's very ext.so: not timed)
    repo.edit(
        "kernels/deepgemm_tile/gemm_cpu.cpp",
        "#include",
        'extern "C" int opgate_no_op_marker() { return 40; }\n#include',
    )
    head = repo.commit()
    run = opgate("review", "--repo", str(repo.path), "--base", repo.base, "--head", head, "--offline")
    assert run.code == 1, run.stdout + run.stderr
    cases = {c["name"]: c for c in run.kernel("deepgemm_tile")["cases"]}
    [measured] = (build_dir / "peak").glob("cpu-peak-*.json")  # what this runner measured itself doing
    peak = json.loads(measured.read_text())
    for name in ("square_512", "ragged_200x328x264"):
        t = cases[name]["throughput"]
        assert cases[name]["verdict"] == "fail" and t["head_tflops"] * 1e3 > peak["gflops"]
        assert render_phrase(Phrase.model_validate(t["peak_of"])).startswith("this runner's ")
        assert t["head_flops_pct"] > 100
        assert cases[name]["reasons"][0].startswith("implausible: above the hardware limit — verify: head ")
    assert "**implausible** `square_512` above the hardware limit — verify" in run.comment


# -- the fan-out per architecture, and its keys ----------------------------------------------------------------


def _with_b200_case(tmp_path: Path) -> Kernel:
    folder = _copy(tmp_path, "repo", "deepgemm_tile")
    manifest = folder / "kernel.toml"
    manifest.write_text(manifest.read_text().replace('name = "gemm_4096"\n', 'name = "gemm_4096"\narch = "sm_100a"\n'))
    return _load(folder)


def test_a_case_naming_sm_100a_gets_its_own_gpu_job_and_the_rest_run_in_the_first(tmp_path):
    k = _with_b200_case(tmp_path)
    assert job_arches(k) == ["sm_90", "sm_100"]
    cases = {c.name: c for c in k.manifest.cases}
    shipped = k.manifest.constraints.architectures
    assert other_job(cases["gemm_4096"], shipped, "sm_90") == "sm_100"
    assert other_job(cases["square_512"], shipped, "sm_100") == "sm_90"
    assert render(change.other_job("sm_100")) == "runs in the sm_100 job of this review"
    assert other_job(cases["m128_n2112_k7168"], shipped, "sm_90") is None
    assert other_job(cases["gemm_4096"], shipped, None) is None  # a local review runs what its machine can
    assert json.loads(fanout.matrix([fanout.PlannedKernel(kernel="k", domain="d")]))["gpu"] == [
        {"kernel": "k", "domain": "d", "arch": "", "part": "k"}
    ]


def _part(tmp_path: Path, name: str, cases: list[CaseReport]) -> fanout.Part:
    folder = tmp_path / f"part-{name}"
    folder.mkdir()
    kernel = KernelReport(name="deepgemm_tile", domain="deepgemm", changed=True, verdict="skipped")
    report = cr.report([kernel_verdict(kernel, [], cases, Constraints(), Policy())])
    report.kernels = report.kernels[:1]
    (folder / "report.json").write_text(report.to_json())
    return fanout.read_part(folder)


def _skipped(name: str, device: str, job: str) -> CaseReport:
    """A case the gate skipped because the architecture job `job` runs it."""
    return case_verdict(Case(name=name, device=device, shape={"m": 1}), Constraints(), None, change.other_job(job))


def test_merging_the_architecture_jobs_takes_each_case_from_the_job_that_ran_it(tmp_path):
    slower = cr.timed("gemm_4096", 9.1, 8.2, 10.3).model_copy(update={"device": "cuda", "arch": "sm_100"})
    sm90 = _part(
        tmp_path,
        "deepgemm_tile",
        [cr.timed("square_512", 0.1, -1.0, 1.2), _skipped("gemm_4096", "cuda", "sm_100")],
    )
    sm100 = _part(
        tmp_path,
        "deepgemm_tile@sm_100",
        [_skipped("square_512", "cpu", "sm_90"), slower],
    )
    assert (sm90.report.kernels[0].verdict, sm100.report.kernels[0].verdict) == ("pass", "fail")
    assert (sm100.kernel, sm100.arch) == ("deepgemm_tile", "sm_100")
    merged, _ = fanout.merge([sm100, sm90], cr.BASE, cr.HEAD, cr.PR)
    [k] = written(merged).kernels
    assert [(c.name, c.verdict) for c in k.cases] == [("square_512", "pass"), ("gemm_4096", "fail")]
    assert k.verdict == "fail"
    assert k.reasons == ["performance: gemm_4096 p50 +9.10% (95% CI +8.20%..+10.30%) > 3% limit"]
    assert not any(u.startswith("no case ran") for u in k.undecided)
    with pytest.raises(InputError, match="is in two parts"):
        fanout.merge([sm90, sm90], cr.BASE, cr.HEAD, cr.PR)


def _ran_on(gpu: str, arch: str, delta: float) -> CaseReport:
    case = cr.timed("gemm_4096", delta, delta - 0.5, delta + 0.5)
    return case.model_copy(update={"device": "cuda", "gpu": gpu, "arch": arch})


def test_history_and_drift_keep_each_gpu_model_and_architecture_apart(tmp_path):
    kernel = KernelReport(
        name="deepgemm_tile",
        domain="deepgemm",
        changed=True,
        verdict="pass",
        cases=[_ran_on("NVIDIA H100 80GB HBM3", "sm_90", 1.0), _ran_on("NVIDIA B200", "sm_100", 4.0)],
    )
    cr.builds(kernel)
    assert kernel.resource_check is not None
    kernel.arch_checks = [kernel.resource_check.model_copy(update={"arch": "sm_100a"})]
    report = cr.report([kernel]).model_copy(update={"environment": Machine(device="cuda", python="3.11")})
    commit = MainCommit(sha="b" * 40, base_sha="a" * 40, committed_at="2026-12-01T00:00:00Z")
    found, resources = figures(report, commit)
    assert sorted(f.device_name for f in found) == ["NVIDIA B200 · sm_100", "NVIDIA H100 80GB HBM3 · sm_90"]
    assert sorted({(r.function[:40], r.arch) for r in resources})[0][1] == "sm_100a" and len(resources) == 4
    ledger = open_ledger(str(tmp_path / "ledger.sqlite"), create=True)
    history = History(ledger)
    history.record(commit, found, resources)
    assert sorted(r.arch for r in history.resources()) == ["sm_100a", "sm_100a", "sm_90a", "sm_90a"]
    reference = Reference(label="main 30 days ago", sha="a" * 40)
    [k] = drift(reference, ["b" * 40], history.figures(), {commit.sha: commit})
    drifts = {c.device_name: c.drift_pct for c in k.cases}  # one line per model and architecture, never one mean
    assert drifts == {"NVIDIA B200 · sm_100": 4.0, "NVIDIA H100 80GB HBM3 · sm_90": 1.0}
    ledger.close()


def test_main_resources_recorded_before_architectures_are_kept_as_sm_90a(tmp_path):
    path = tmp_path / "old.sqlite"
    old = Database.open(str(path), create=True)
    old.migrate(MIGRATIONS[:6])  # a ledger as main left it: resources of sm_90a only, without the column
    old.execute(
        "INSERT INTO main_resources (sha, kernel, function, registers, spill_bytes, smem_bytes, stack_bytes, threads,"
        " committed_at) VALUES ('s', 'deepgemm_tile', 'k', 217, 0, 0, 0, 128, '2026-11-01')"
    )
    old.close()
    ledger = open_ledger(str(path))
    [row] = History(ledger).resources()
    assert (row.function, row.arch, row.registers) == ("k", "sm_90a", 217)
    ledger.close()


def test_the_reviewers_figures_name_the_architecture_only_where_there_are_several():
    one = render_comment(cr.passing())
    summary = r"<summary>Resources: registers, spills, shared memory, occupancy \(ptxas, sm_90a\)</summary>"
    assert re.search(summary, one)


def test_the_plan_lists_a_gpu_job_per_architecture_the_cases_run_on(opgate, tmp_path):
    repo = make_repo(tmp_path / "repo", ["deepgemm_tile"])
    repo.edit("kernels/deepgemm_tile/kernel.toml", 'name = "gemm_4096"\n', 'name = "gemm_4096"\narch = "sm_100a"\n')
    repo.base = repo.commit("gemm_4096 runs on a B200")
    repo.edit("kernels/deepgemm_tile/tile_config.json", '"tile_m": 128', '"tile_m": 64')
    head = repo.commit()
    run = opgate("review", "--plan", "--repo", str(repo.path), "--base", repo.base, "--head", head)
    assert run.code == 0, run.stderr
    plan = json.loads(run.stdout)
    assert plan["include"] == [{"kernel": "deepgemm_tile", "domain": "deepgemm"}]  # one agent job
    assert plan["gpu"] == [
        {"kernel": "deepgemm_tile", "domain": "deepgemm", "arch": "sm_90", "part": "deepgemm_tile"},
        {"kernel": "deepgemm_tile", "domain": "deepgemm", "arch": "sm_100", "part": "deepgemm_tile@sm_100"},
    ]


def test_an_implausible_candidate_is_never_the_tuning_loops_best():
    kernel = cr.implausible().kernels[0]
    trial = trial_from(kernel, key="k", config={"tile_m": 64}, source="exhaustive", patch="", run_id="r", seconds=1.0)
    square = next(c for c in trial.cases if c.name == "square_512")
    assert square.status == "implausible" and not square.correct and (square.speedup or 0) > 100
    assert trial.verdict == "fail" and not trial.correct and not trial.qualifies
    honest = trial_from(cr.passing().kernels[0], key="h", config={"tile_m": 256}, source="exhaustive", patch="",
                        run_id="r", seconds=1.0)  # fmt: skip
    best = {b.case: b for b in per_shape([trial, honest], "tile_m=128", None)}
    assert best["square_512"].key == "h"  # 7 % faster wins; a 1000x "speedup" above the hardware limit wins nothing


@pytest.mark.untimed  # the cache's rules, any peak > 0
@pytest.mark.slow
def test_a_cpu_peak_measured_on_a_busy_machine_is_measured_again_and_only_rises(tmp_path):
    first = cpu_peak(tmp_path)
    assert first is not None and first.tflops > 0 and first.gbps > 0
    [cache] = tmp_path.glob("cpu-peak-*.json")
    measured = json.loads(cache.read_text())
    cache.write_text(json.dumps({**measured, "gflops": 0.001, "gbps": 0.001}))  # as if measured under load
    assert cpu_peak(tmp_path).tflops == 1e-6  # read from the cache: one measurement per runner
    again = cpu_peak(tmp_path, refresh=True)  # what a case above it triggers before it may fail
    assert again is not None and again.tflops > 1e-6 and again.gbps > 0.001
    cache.write_text(json.dumps({**measured, "gflops": 1e9}))
    assert cpu_peak(tmp_path, refresh=True).tflops == 1e6  # a slower second look never lowers the peak


def test_the_declared_work_matches_the_gpu_benchmarks_model():
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_throughput", KERNELS.parent / "benchmarks" / "throughput.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    for name, flops in (("deepgemm_tile", bench.gemm_flops), (SPLITK, bench.attention_flops)):
        for case in _load(KERNELS / name).manifest.cases:
            assert case.work()[0] == flops(case.shape), case.name
