"""A declared figure the change can move is said to be declared (docs/review.md, "Declared, not measured"): where an
instantiation's dynamic shared memory is kernel.toml's figure and the change moves its template arguments (or adds
it), its shared memory and occupancy are undecided, never passed or failed on that figure. Pure: resources in,
findings out; and the comment's resources table marks the figure "(declared)"."""

from __future__ import annotations

from bot.config.manifest_tables import Constraints
from bot.models.agent_report import AgentReport
from bot.models.evidence import CaseEvidence
from bot.models.finding import Outcome
from bot.models.report import Machine, Report, Resource, ResourceCheckReport
from bot.present.render import render_comment
from bot.text.i18n import speaking
from bot.verdict.gate import Policy
from bot.verdict.gate_resources import resource_findings
from bot.verdict.kernel import judge_kernel
from bot.verdict.written import written_kernel
from bot.wording import spoken
from bot.wording.messages import render
from tests.test_kernel import CPU, evidence, rules, timed

ZH = "zh-CN"

GEMM = "void deep_gemm::fp8_gemm_kernel<128u, 160u, {}u, 1u>(float*, int)"
OTHER = "void deep_gemm::fp8_gemm_kernel_small<64u, 64u, {}u>(float*, int)"
SMEM = 215_744  # kernel.toml's literal: the host sizes the launch, the fold reads nothing back


def _gemm(stages: int, dynamic: int = SMEM, function: str = GEMM, **update: object) -> Resource:
    r = Resource(function=function.format(stages), registers=168, threads=384, extern_smem=True,
                 dynamic_smem_bytes=dynamic)  # fmt: skip
    return r.model_copy(update=update)


def _keys(findings: list) -> list[tuple[Outcome, str, str | None]]:  # type: ignore[type-arg]
    return [(f.outcome, f.key, f.function) for f in findings]


def test_a_declared_figure_whose_template_arguments_the_change_moves_is_undecided_with_the_words():
    failures, notes = resource_findings([_gemm(6)], [_gemm(4)], Constraints(), arch="sm_90a")
    assert failures == []
    assert _keys(notes) == [(Outcome.undecided, "resources.declared_moved", GEMM.format(6))]
    assert render(notes[0]) == (
        f"{GEMM.format(6)}'s 215,744 B of dynamic shared memory is declared in kernel.toml, not measured: the change "
        f"moves {GEMM.format(6)}'s template arguments (4u → 6u), so its shared memory and occupancy are undecided"
    )
    with speaking(ZH):
        zh = spoken.render(notes[0])
    assert "kernel.toml 中的声明值，未实测" in zh and "（4u → 6u）" in zh and "未定" in zh


def test_a_declared_figure_over_the_limit_neither_fails_nor_passes_when_the_change_moves_the_instantiation():
    over = 240_000  # past sm_90's 232,448 B opt-in limit: judged on a figure nobody measured it would fail
    limits = Constraints(max_smem_bytes=220_000, min_warps_per_sm=16)
    failures, notes = resource_findings([_gemm(6, over)], [_gemm(4, 100_000)], limits, arch="sm_90a")
    assert failures == []
    assert _keys(notes) == [(Outcome.undecided, "resources.declared_moved", GEMM.format(6))]  # no grew, no occupancy
    assert "240,000 B" in render(notes[0])


def test_a_figure_read_back_from_the_code_is_judged_as_today():
    head = [_gemm(6, 240_000), _gemm(6, 240_000, OTHER, launch_from="read back", declared_dynamic_smem_bytes=SMEM)]
    failures, notes = resource_findings(head, [_gemm(4), _gemm(4, function=OTHER)], Constraints(), arch="sm_90a")
    assert _keys(failures) == [(Outcome.fail, "resources.smem_arch", OTHER.format(6))]
    assert _keys([n for n in notes if n.outcome == Outcome.undecided]) == [
        (Outcome.undecided, "resources.declared_moved", GEMM.format(6))
    ]


def test_a_declared_figure_of_an_instantiation_the_change_leaves_alone_is_judged_as_today():
    head = [_gemm(4, 240_000), _gemm(6, 240_000, OTHER)]  # GEMM<…, 4u, …> as base has it, its figure raised
    failures, notes = resource_findings(head, [_gemm(4), _gemm(4, function=OTHER)], Constraints(), arch="sm_90a")
    assert _keys(failures) == [(Outcome.fail, "resources.smem_arch", GEMM.format(4))]
    assert [n.key for n in notes if n.function == GEMM.format(4)] == ["resources.grew"]
    assert _keys([n for n in notes if n.outcome == Outcome.undecided]) == [
        (Outcome.undecided, "resources.declared_moved", OTHER.format(6))
    ]


def test_an_instantiation_base_lacks_is_undecided_and_a_plain_function_is_judged_as_today():
    plain = Resource(function="void reduce(float*)", registers=32, threads=256, extern_smem=True,
                     dynamic_smem_bytes=240_000)  # fmt: skip
    failures, notes = resource_findings([_gemm(4), _gemm(6, 240_000), plain], [_gemm(4)], Constraints())
    assert _keys(failures) == [(Outcome.fail, "resources.smem_arch", "void reduce(float*)")]
    assert _keys(notes) == [(Outcome.undecided, "resources.declared_new", GEMM.format(6))]
    with speaking(ZH):
        assert "the change adds" in render(notes[0]) and "base 中没有的实例化" in spoken.render(notes[0])
    renamed = GEMM.replace("fp8_gemm_kernel", "fp8_gemm_kernel_v0")  # beside it by signature, the same arguments
    for base in ([], [_gemm(6, function=renamed)]):  # no base at all (`opgate check`, a new kernel): as today too
        failures, notes = resource_findings([_gemm(6, 240_000)], base, Constraints())
        assert _keys(failures) == [(Outcome.fail, "resources.smem_arch", GEMM.format(6))]
        assert all(n.outcome == Outcome.note for n in notes)


def _report(check: ResourceCheckReport) -> tuple[Report, str]:
    kernel = judge_kernel(evidence(CaseEvidence(name="square", run=timed(1.0)), resource_checks=[check]), rules(CPU),
                          Policy())  # fmt: skip
    report = Report(base_sha="a" * 40, head_sha="b" * 40, verdict=kernel.verdict, kernels=[written_kernel(kernel)],
                    agent=AgentReport(status="offline"), environment=Machine(device="cpu", python="3.11"),
                    created_at="2026-01-01T00:00:00+00:00", opgate_version="0")  # fmt: skip
    return report, render_comment(report)


def test_the_kernel_is_undecided_and_the_table_marks_the_figure_declared():
    check = ResourceCheckReport(status="ok", head=[_gemm(6)], base=[_gemm(4)], base_status="ok")
    report, md = _report(check)
    assert report.kernels[0].verdict == "undecided" and report.kernels[0].reasons == []
    [row] = [line for line in md.splitlines() if line.startswith("| `deep_gemm::fp8_gemm_kernel<")]
    assert "0 + 215,744 → 0 + 215,744 (declared) |" in row
    with speaking(ZH):
        zh_md = render_comment(report)
    [zh_row] = [x for x in zh_md.splitlines() if x.startswith("| `deep_gemm::fp8_gemm")]
    assert "0 + 215,744 → 0 + 215,744（声明值） |" in zh_row
    unmoved = check.model_copy(update={"head": [_gemm(4)]})
    report, md = _report(unmoved)
    assert report.kernels[0].verdict == "pass"
    [row] = [line for line in md.splitlines() if line.startswith("| `deep_gemm::fp8_gemm_kernel<")]
    assert "(declared)" not in row and "0 + 215,744 → 0 + 215,744 |" in row
