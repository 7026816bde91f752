"""The comment's resource section for CUTLASS-sized kernels: template names abbreviated (the full name in the
details), `<…>` shown as written, the side that failed to compile named and the other side still shown."""

from __future__ import annotations

import re

from bot.config.manifest_tables import Constraints
from bot.models.agent_report import AgentReport
from bot.models.report import KernelReport, Machine, Occupancy, Report, Resource, ResourceCheckReport
from bot.present.render import render_comment
from bot.text.safe import untrusted
from bot.verdict.findings import add_kernel
from bot.verdict.gate_resources import resource_findings
from bot.verdict.names import abbreviate, short_names
from bot.verdict.written import written_kernel
from tests.comment_checks import structure_problems, text_of
from tests.hostile import html

LAYOUTS = ", ".join(
    f"cute::Layout<cute::tuple<cute::C<{i}>, cute::C<64>>, cute::tuple<cute::C<1>, cute::C<{i}>>>" for i in range(60)
)
FN = f"void sm90::flash_fwd_splitkv_mla_kernel<Traits<cutlass::bfloat16_t>, {LAYOUTS}>(DenseAttnDecodeParams)"
OCC = Occupancy(blocks_per_sm=1, warps_per_sm=8, occupancy_pct=12.5, limited_by=["registers"])


def _row(**update: object) -> Resource:
    row = Resource(function=FN, registers=240, smem_bytes=0, dynamic_smem_bytes=230_816, threads=256, occupancy=OCC)
    return row.model_copy(update=update)


def _report(kernel: KernelReport) -> Report:
    return Report(
        base_sha="a" * 40,
        head_sha="b" * 40,
        verdict=kernel.verdict,  # type: ignore[arg-type]
        kernels=[kernel],
        agent=AgentReport(status="offline"),
        environment=Machine(device="cpu", python="3.11"),
        created_at="2026-01-01T00:00:00+00:00",
        opgate_version="0",
    )


def test_a_cxx_template_name_keeps_its_angle_brackets():
    assert text_of(html(untrusted("Traits<cutlass::bfloat16_t> spills"))) == "Traits<cutlass::bfloat16_t> spills"
    assert "://" not in untrusted("<https://example.com/x>")  # an autolink stays inert all the same


def test_a_cutlass_sized_name_is_abbreviated_in_the_reason_and_table_and_given_whole_in_the_details():
    assert len(FN) > 5000
    check = ResourceCheckReport(
        status="ok",
        head=[_row(spill_bytes=14150, spill_store_bytes=7000, spill_load_bytes=7150)],
        base=[_row()],
        base_status="ok",
    )
    kernel = KernelReport(name="dense", domain="flashmla", changed=True, verdict="fail", resource_check=check)
    [spill], _ = resource_findings(check.head, check.base, Constraints())  # as the gate finds it
    add_kernel(kernel, spill)
    short = "sm90::flash_fwd_splitkv_mla_kernel<Traits<cutlass::bfloat16_t>, …>"
    assert written_kernel(kernel).reasons == [f"resource: {short} spills 14150 bytes (stores 7000 B, loads 7150 B)"]
    assert (spill.gate, spill.function, spill.value, spill.unit) == ("resources", FN, 14150, "B")  # whole, as data
    report = _report(kernel)
    md = render_comment(report)
    assert structure_problems(md, report) == []
    [line] = [x for x in md.splitlines() if x.startswith("- ❌ **resource**")]
    assert text_of(html(line)) == f"❌ resource {short} spills 14150 bytes (stores 7000 B, loads 7150 B)"
    page = html(md)
    assert f"<code>{short.replace('<', '&lt;').replace('>', '&gt;')}</code>" in page  # the table's name
    [full] = [x for x in md.splitlines() if x.startswith(f"- `{short}`: `")]
    assert FN in full  # the whole name once, in the resources' details
    assert len(md) < 20_000


def test_abbreviated_names_stay_apart():
    other = FN.replace("bfloat16_t", "half_t")
    names = short_names([FN, other, "void k<128, 64>(int)"])
    assert len(set(names.values())) == 3 and names["void k<128, 64>(int)"] == "k<128, 64>"
    assert all(len(n) < 120 for n in names.values())
    assert abbreviate("k<1, 2>") == "k<1, 2>"  # short names stay whole


def test_head_not_compiling_names_head_and_still_shows_base():
    check = ResourceCheckReport(
        status="compile_fail",
        base=[_row()],
        base_status="ok",
        log_tail="== instantiations/bf16.cu (failed, 3.1 s)\nkernel.cuh(12): error: identifier is undefined",
    )
    kernel = KernelReport(
        name="dense",
        domain="flashmla",
        changed=True,
        verdict="fail",
        reasons=["resource: head's CUDA sources do not compile for sm_90a (see the head log)"],
        resource_check=check,
    )
    report = _report(kernel)
    md = render_comment(report)
    assert structure_problems(md, report) == []
    assert "ptxas log (head, compile_fail)" in md and "ptxas log (base" not in md
    assert "Resource check (ptxas, sm_90a): head **compile_fail**, base ok" in md
    base_rows = [r for r in re.findall(r"^\| `sm90::.*$", md, re.MULTILINE)]
    assert len(base_rows) == 1 and "| 240 | 0 | 0 + 230,816 | 256 | 1 | 12.5% | registers | 0 |" in base_rows[0]


def test_renamed_kernel_functions_show_base_beside_head_and_a_base_function_gone_is_listed_as_removed():
    def row(function: str, registers: int) -> Resource:
        return Resource(function=function, registers=registers, threads=128)

    base = [row("void forward_kernel(float const*, float*, int)", 40), row("void stats_kernel(double*)", 12)]
    head = [
        row("void forward_kernel_naive(float const*, float*, int)", 40),
        row("void forward_kernel_wmma(float const*, float*, int)", 72),
    ]
    check = ResourceCheckReport(status="ok", head=head, base=base, base_status="ok")
    kernel = KernelReport(name="attn", domain="flashmla", changed=True, verdict="undecided", resource_check=check)
    kernel.undecided.append("resources checked; no case ran (needs a CUDA GPU)")
    report = _report(kernel)
    md = render_comment(report)
    assert structure_problems(md, report) == []
    rows = {r.split(" | ")[0]: r for r in re.findall(r"^\| `.*$", md, re.MULTILINE)}
    assert rows["| `forward_kernel_naive` (base: `forward_kernel`)"].split(" | ")[1] == "40 → 40"
    assert rows["| `forward_kernel_wmma` (base: `forward_kernel`)"].split(" | ")[1] == "40 → 72"
    assert "In base, not in head (removed, or renamed past matching by name or signature):" in md
    assert rows["| `stats_kernel`"].split(" | ")[1] == "12"
