"""What base already has is not the change's (docs/review.md, "What base already has"): an absolute rule's breach —
a spill, registers or shared memory over a limit, too few resident warps, a launch kernel.toml does not size — that
base's same function has alike or worse is a note "in base too" with both figures; one the change makes or worsens
fails as before. Pure: resources and resource checks in, findings out."""

from __future__ import annotations

import json
import shutil
from typing import Any

import pytest

from bot.config.manifest_tables import Constraints, Launch
from bot.models.evidence import CaseEvidence
from bot.models.finding import Outcome
from bot.models.report import KernelReport, Resource, ResourceCheckReport
from bot.text.i18n import speaking
from bot.verdict.gate import Policy
from bot.verdict.gate_resources import launch_in_base, resource_findings
from bot.verdict.kernel import judge_kernel
from bot.verdict.launch import describe
from bot.verdict.written import written_kernel
from bot.wording import spoken
from bot.wording.messages import render
from tests.compile_repo import BASE_SPILL, make_compile_repo, prepend, review
from tests.test_kernel import CPU, evidence, rules, timed

RESOURCES_ONLY = "resources checked; no case ran (needs a CUDA GPU)"  # a manifest without cases, resources passed

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on the PATH")
ZH = "zh-CN"

BWD = "void causal_conv1d_channellast_bwd_kernel<128, 4, true>(ConvParamsBwd)"
FWD = "void causal_conv1d_fwd_kernel<128, 4>(ConvParamsBase)"


def judged(*args: Any, **kw: Any) -> KernelReport:
    """`judge_kernel`'s report as report.json states it (its findings' lines written)."""
    return written_kernel(judge_kernel(*args, **kw))


def spilling(function: str = BWD, stores: int = 8, loads: int = 8, registers: int = 255) -> Resource:
    return Resource(function=function, registers=registers, spill_bytes=stores + loads, spill_store_bytes=stores,
                    spill_load_bytes=loads, threads=128)  # fmt: skip


def test_a_spill_base_has_alike_is_noted_in_base_too_with_both_figures_never_a_failure():
    head = [spilling(), Resource(function=FWD, registers=40, threads=128)]
    failures, notes = resource_findings(head, [spilling(), Resource(function=FWD, registers=40, threads=128)],
                                        Constraints(), arch="sm_80")  # fmt: skip
    assert failures == []
    (note,) = notes
    assert (note.outcome, note.key, note.function, note.value, note.limit, note.unit) == (
        Outcome.note, "resources.in_base", BWD, 16, 0, "B"
    )  # fmt: skip
    assert render(note) == (
        f"in base too: {BWD} spills 16 bytes (stores 8 B, loads 8 B) (head 16 B, base 16 B): base has it alike, so "
        "it fails no pull request until a change makes it worse"
    )
    with speaking(ZH):
        zh = spoken.render(note)
    assert zh.startswith("base 中同样存在：") and "（head 16 B，base 16 B）" in zh and BWD in zh


def test_a_spill_base_has_worse_is_noted_and_one_the_change_makes_or_worsens_fails():
    worse_in_base = resource_findings([spilling(stores=8, loads=0)], [spilling()], Constraints(), arch="sm_80")
    assert worse_in_base[0] == [] and "(head 8 B, base 16 B)" in render(worse_in_base[1][0])
    worsened, _ = resource_findings([spilling(stores=16, loads=16)], [spilling()], Constraints(), arch="sm_80")
    assert [(f.outcome, f.key, f.value) for f in worsened] == [(Outcome.fail, "resources.spill", 32)]
    new, _ = resource_findings([spilling()], [Resource(function=BWD, registers=128, threads=128)], Constraints())
    assert [(f.outcome, f.key) for f in new] == [(Outcome.fail, "resources.spill")]
    alone, _ = resource_findings([spilling()], [], Constraints())  # no base function beside it: the change's
    assert [(f.outcome, f.key) for f in alone] == [(Outcome.fail, "resources.spill")]
    within = Constraints(max_spill_bytes=8)  # base breaks a looser limit than head's figure: still the change's
    assert resource_findings([spilling()], [spilling(stores=8, loads=0)], within)[0][0].key == "resources.spill"


def test_a_renamed_function_is_held_to_the_base_function_it_stands_beside():
    renamed = spilling(function="void causal_conv1d_channellast_bwd_kernel_v2<128, 4, true>(ConvParamsBwd)")
    failures, notes = resource_findings([renamed], [spilling()], Constraints(), arch="sm_80")
    assert failures == [] and [n.key for n in notes] == ["resources.in_base_renamed"]
    assert f"base 16 B as {BWD}" in render(notes[0])


def test_registers_and_resident_warps_base_has_alike_are_noted_fewer_warps_than_base_fail():
    limits = Constraints(max_registers=128, min_warps_per_sm=16)
    base = [Resource(function=BWD, registers=168, threads=128)]  # 12 warps per SM on sm_80
    same, notes = resource_findings([Resource(function=BWD, registers=168, threads=128)], base, limits, arch="sm_80")
    assert same == []
    assert sorted(n.phrases["violation"][0].key for n in notes if n.key == "resources.in_base") == [
        "resources.min_warps", "resources.registers"
    ]  # fmt: skip
    worse, _ = resource_findings([Resource(function=BWD, registers=200, threads=128)], base, limits, arch="sm_80")
    assert sorted((f.key, f.value) for f in worse if f.outcome == Outcome.fail) == [
        ("resources.min_warps", 8), ("resources.registers", 200)
    ]  # fmt: skip


def test_a_kernel_whose_only_breach_is_bases_passes_on_its_cases_with_the_note_and_is_undecided_without_them():
    check = ResourceCheckReport(status="ok", arch="sm_80", head=[spilling()], base=[spilling()])
    passed = judged(evidence(CaseEvidence(name="square", run=timed(1.0)), resource_checks=[check]),
                          rules(CPU), Policy())  # fmt: skip
    assert passed.verdict == "pass" and passed.reasons == []
    assert [f.key for f in passed.findings if f.key.startswith("resources.")] == ["resources.in_base"]
    alone = judged(evidence(resource_checks=[check]), rules(), Policy())
    assert alone.verdict == "undecided" and alone.reasons == []  # resources judged, no case ran: never a plain pass
    worse = check.model_copy(update={"head": [spilling(stores=24)]})
    assert judged(evidence(resource_checks=[worse]), rules(), Policy()).verdict == "fail"


MANIFEST = "csrc/kernel.toml"
SPARSE = "void flash::sparse_decode_kernel<{}>(Params)"


def _unsized(n: int, registers: int = 96) -> Resource:
    return Resource(function=SPARSE.format(n), registers=registers, extern_smem=True)


def _check(head: list[Resource], base: list[Resource]) -> ResourceCheckReport:
    bounds = {r.function: 128 for r in (*head, *base)}
    h = describe(head, bounds, Launch(), {}, MANIFEST, arch="sm_90a")
    b = describe(base, bounds, Launch(), {}, MANIFEST, arch="sm_90a")
    return ResourceCheckReport(status="ok", head=h.resources, base=b.resources, threads=bounds,
                               launch_errors=h.errors, base_launch_errors=b.errors)  # fmt: skip


def test_a_launch_kernel_toml_does_not_size_in_base_alike_is_noted_a_new_or_moved_one_is_not_passed():
    shared = _check([_unsized(64)], [_unsized(64)])
    assert launch_in_base(shared.launch_errors[0], shared.head, shared.base, shared.base_launch_errors) == []
    k = judged(evidence(CaseEvidence(name="square", run=timed(1.0)), resource_checks=[shared]), rules(CPU),
                     Policy())  # fmt: skip
    assert k.verdict == "pass" and k.reasons == []
    assert [n for n in k.notes if n.startswith("in base too: ")] == [
        f"in base too: {SPARSE.format(64)} uses dynamic shared memory (extern __shared__) that {MANIFEST} does not "
        "size: add [launch.functions.sparse_decode_kernel] dynamic_smem: base's kernel.toml leaves it alike, so it "
        "fails no pull request until a change makes it worse"
    ]
    fewer = _check([_unsized(64)], [_unsized(64), _unsized(128)])  # head drops an instantiation: still base's gap
    assert launch_in_base(fewer.launch_errors[0], fewer.head, fewer.base, fewer.base_launch_errors) == []
    more = _check([_unsized(64), _unsized(128)], [_unsized(64)])  # a new instantiation nobody sizes: the change's
    assert judged(evidence(resource_checks=[more]), rules(), Policy()).verdict == "fail"
    fresh = _check([_unsized(64)], [Resource(function=SPARSE.format(64), registers=96)])
    assert judged(evidence(resource_checks=[fresh]), rules(), Policy()).verdict == "fail"
    moved = _check([_unsized(64, registers=128)], [_unsized(64)])  # blind on both sides, but its registers moved
    k = judged(evidence(CaseEvidence(name="square", run=timed(1.0)), resource_checks=[moved]), rules(CPU),
                     Policy())  # fmt: skip
    assert k.verdict == "undecided" and k.reasons == []
    assert [f.key for f in k.findings if f.outcome == Outcome.undecided] == ["resources.launch_in_base_moved"]
    (moved_finding,) = [f for f in k.findings if f.key == "resources.launch_in_base_moved"]
    with speaking(ZH):
        assert spoken.render(moved_finding).startswith("base 中同样存在：")
        assert SPARSE.format(64) in spoken.render(moved_finding)


def test_a_launch_error_only_base_has_stays_a_note_about_base():
    mended = _check([Resource(function=SPARSE.format(64), registers=96)], [_unsized(64)])
    k = judged(evidence(resource_checks=[mended]), rules(), Policy())
    assert k.reasons == [] and any(n.startswith(f"base: {SPARSE.format(64)} uses dynamic shared") for n in k.notes)


@pytest.mark.slow
@pytest.mark.untimed  # compile-only: a resource-only kernel, nothing timed
@needs_nvcc
def test_a_comment_beside_an_untouched_unit_that_spills_in_base_does_not_fail_and_shows_the_spill_as_bases(
    opgate, tmp_path
):
    repo = make_compile_repo(tmp_path / "repo", BASE_SPILL)
    prepend(repo, "ops/conv1d/fwd.cu", "// Reworded: y = x * w0 + x[-1] * w1.\n")
    run = review(opgate, repo, repo.commit("a comment"))
    assert run.code == 0, run.stdout + run.stderr
    kernel = run.kernel("conv1d")
    check = kernel["resource_check"]
    [head] = [r for r in check["head"] if r["spill_bytes"] > 0]
    [base] = [r for r in check["base"] if r["spill_bytes"] > 0]
    assert head["function"] == base["function"] and "conv_bwd" in head["function"]
    assert kernel["reasons"] == []  # resources checked, no case ran: undecided, never a plain pass
    assert kernel["verdict"] == "undecided" and kernel["undecided"] == [RESOURCES_ONLY]
    [note] = [n for n in kernel["notes"] if n.startswith("in base too: ")]
    figure = f"{head['spill_bytes']:,} B"
    assert f"{head['function']} spills {head['spill_bytes']} bytes" in note
    assert f"(head {figure}, base {figure})" in note
    assert "in base too" in run.comment and "fails no pull request" in run.comment
    [summary] = [x for x in run.comment.splitlines() if "Resources: registers, spills" in x]
    assert "❌" not in summary  # base's spill and "no case ran" mark no failure on the resource table
    # issue 54's fixture: the untouched spilling unit and the commented one, each compiled once for both sides
    resources = sorted((u["source"], sorted(u["sides"])) for u in check["units"] if u["step"] == "resources")
    assert resources == [("ops/conv1d/bwd.cu", ["base", "head"]), ("ops/conv1d/fwd.cu", ["base", "head"])], resources


def test_mains_record_keeps_what_base_already_had_visible(opgate, tmp_path):
    """`opgate history record` of a main commit whose review noted base's spill: the figure is recorded and the line
    says main carries it (and --json lists it), so nothing base had goes out of sight once no pull request fails on
    it."""
    from tests.conftest import make_repo
    from tests.mainline_world import _report

    repo = make_repo(tmp_path / "repo", ["deepgemm_tile"])
    repo.write("kernels/deepgemm_tile/notes.txt", "a comment\n")
    head = repo.commit("a comment (#7)")
    check = ResourceCheckReport(status="ok", arch="sm_80", head=[spilling()], base=[spilling()])
    checked = judged(evidence(resource_checks=[check]), rules(), Policy())
    report = _report().model_copy(update={"base_sha": repo.base, "head_sha": head, "kernels": [checked]})
    path = tmp_path / "report.json"
    path.write_text(report.to_json())
    args = ("history", "record", "--report", str(path), "--repo", str(repo.path))
    rec = opgate(*args)
    assert rec.code == 0, rec.stderr
    assert "1 function(s) [deepgemm_tile]" in rec.stdout
    [line] = [x for x in rec.stdout.splitlines() if "main carries" in x]
    assert line.startswith(f"  main carries, noted and not failed: deepgemm_tile: in base too: {BWD} spills 16 bytes")
    as_json = opgate(*args, "--json")
    assert json.loads(as_json.stdout)["carried"] == [line.split("not failed: ", 1)[1]]
