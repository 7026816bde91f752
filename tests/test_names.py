"""A long name does not bury the reason (bot/verdict/names.py): a template family with multi-kilobyte demangled names
is named by its template and its count of instantiations (the one that differs named by its differing arguments);
every reason line keeps its reason and fix within ~200 characters in the comment (both locales), the annotations and
`opgate check`, while report.json keeps every full name as data and the comment lists them in a collapsed block."""

from __future__ import annotations

from bot.config.manifest import load_kernel
from bot.config.manifest_tables import Constraints, Launch
from bot.models.agent_report import AgentReport
from bot.models.report import KernelReport, Machine, Report, Resource, ResourceCheckReport
from bot.present.annotations import EntryPlace, KernelSources, Sources, for_review
from bot.present.render import render_comment
from bot.review.check import KernelCheck, resource_step
from bot.text.i18n import speaking
from bot.verdict.gate import Policy, kernel_verdict
from bot.verdict.launch import describe
from bot.verdict.names import short_names
from bot.verdict.written import written_kernel
from tests.comment_checks import structure_problems, text_of
from tests.conftest import CHECK_REPO
from tests.hostile import html

LAYOUTS = ", ".join(
    f"cute::Layout<cute::tuple<cute::C<{i}>, cute::C<64>>, cute::tuple<cute::C<1>, cute::C<{i}>>>" for i in range(60)
)
WIDTHS = (2, 3, 4, 8, 16)  # the instantiations differ in one argument; the last spills less than the others


def fn(width: int) -> str:
    return f"void causal_conv1d_bwd_kernel<Traits<cutlass::bfloat16_t, {LAYOUTS}>, 128, {width}, true>(ConvParamsBwd)"


NAME = "causal_conv1d_bwd_kernel"
ODD = f"{NAME}<Traits<…>, 128, 16, true>"
MANIFEST = "csrc/conv/kernel.toml"
SOURCE = "csrc/conv/conv1d_bwd.cu"
LIMIT = 220  # "~200 characters": a reason line with its label and architecture (" (sm_80)")


def _row(width: int) -> Resource:
    spill = 8 if width == 16 else 16
    return Resource(function=fn(width), registers=255, spill_bytes=spill, spill_store_bytes=8,
                    spill_load_bytes=spill - 8, extern_smem=True)  # fmt: skip


def judged() -> KernelReport:
    """The family's resource check as the review gets it: the launch described from a kernel.toml that sizes none
    of the instantiations' dynamic shared memory, then the gate's verdict."""
    bounds = {fn(w): 128 for w in WIDTHS}  # __launch_bounds__(128)
    described = describe([_row(w) for w in WIDTHS], bounds, Launch(), {}, MANIFEST, arch="sm_80")
    check = ResourceCheckReport(
        status="ok",
        arch="sm_80",
        head=described.resources,
        launch_errors=described.errors,
    )
    kernel = KernelReport(name="conv1d", domain="conv", changed=True, verdict="pass", resource_check=check)
    return written_kernel(kernel_verdict(kernel, [], [], Constraints(), Policy()))


def _report(kernel: KernelReport) -> Report:
    return Report(base_sha="a" * 40, head_sha="b" * 40, verdict=kernel.verdict, kernels=[kernel],  # type: ignore[arg-type]
                  agent=AgentReport(status="offline"), environment=Machine(device="cpu", python="3.11"),
                  created_at="2026-01-01T00:00:00+00:00", opgate_version="0")  # fmt: skip


def test_a_family_is_named_by_its_template_and_count_and_the_one_that_differs_by_its_arguments():
    assert len(fn(2)) > 5000
    kernel = judged()
    assert kernel.verdict == "fail"
    unsized = f"{NAME} (5 instantiations) uses dynamic shared memory (extern __shared__) that {MANIFEST} does not size"
    fix = f"add [launch.functions.{NAME}] dynamic_smem"
    assert kernel.reasons == [
        f"resource: {unsized}: {fix}",
        f"resource: {NAME} (4 of 5 instantiations, all but {ODD}) spills 16 bytes (stores 8 B, loads 8 B)",
        f"resource: {ODD} spills 8 bytes (stores 8 B, loads 0 B)",
    ]
    assert all(len(r) <= LIMIT for r in kernel.reasons)
    # the full names stay in report.json, as data of the findings
    family, single = [f for f in kernel.findings if f.key == "resources.spill"]
    assert (family.family, family.functions, family.function) == (NAME, [fn(w) for w in WIDTHS[:4]], fn(2))
    assert (single.family, single.function, single.params["function"]) == (NAME, fn(16), fn(16))
    [launch] = [f for f in kernel.findings if f.key == "resources.launch"]
    assert (launch.family, launch.functions, launch.function) == (NAME, [fn(w) for w in WIDTHS], fn(2))
    assert fn(3) in _report(kernel).model_dump_json()


def test_the_comment_in_either_language_keeps_each_reason_short_and_the_full_names_collapsed():
    report = _report(judged())
    for locale in ("en", "zh-CN"):
        with speaking(locale):
            md = render_comment(report)
        assert locale != "en" or structure_problems(md, report) == []  # (it reads the English lines)
        reasons = [text_of(html(x)) for x in md.splitlines() if x.startswith("- ❌")]
        assert len(reasons) == 3 and all(len(x) <= LIMIT for x in reasons), reasons
        assert reasons[0].endswith(f"[launch.functions.{NAME}] dynamic_smem")  # the reason and its fix
        assert f"{NAME} (4 of 5" in reasons[1] or f"{NAME}（5 个实例中的 4 个" in reasons[1]
        assert reasons[2].startswith(f"❌ {'resource' if locale == 'en' else '资源'} {ODD} ")
        details = md[md.index("<details><summary>" + ("Full names (5):" if locale == "en" else "全名（5 个）：")) :]
        details = details[: details.index("</details>")]
        assert all(f in details for f in map(fn, WIDTHS))  # each whole name once, collapsed
        assert md.count(fn(16)) == 1


def test_the_annotation_at_the_kernels_definition_keeps_each_line_short():
    code = f"template <typename T, int N, int W, bool C>\n__global__ void {NAME}(ConvParamsBwd params) {{}}\n"
    sources = Sources(
        texts={SOURCE: code},
        kernels={"conv1d": KernelSources(files=[SOURCE], builds={"cuda": EntryPlace(entry="bwd", sources=[SOURCE])})},
    )
    [note] = for_review(_report(judged()), [], sources)
    assert (note.path, note.start_line, note.annotation_level) == (SOURCE, 2, "failure")
    lines = note.message.splitlines()
    assert len(lines) == 3 and all(len(x) <= LIMIT for x in lines), lines
    assert any(x.endswith(f"add [launch.functions.{NAME}] dynamic_smem (sm_80)") for x in lines)


def test_opgate_check_says_each_reason_and_fix_within_a_line():
    kernel = judged()
    check = kernel.resource_checks()[0]
    result = KernelCheck(name="conv1d", folder="csrc/conv")
    resource_step(load_kernel(CHECK_REPO / "ops/vec_scale", path="ops/vec_scale"), check, result)
    failed = [s.detail for s in result.steps if s.status == "failed"]
    assert len(failed) == 3 and all(len(x) <= LIMIT for x in failed), failed
    assert failed[0].endswith(f"add [launch.functions.{NAME}] dynamic_smem")
    assert f"{NAME} (4 of 5 instantiations, all but {ODD}) spills 16 bytes" in failed[1]


def test_short_names_tell_apart_instantiations_an_abbreviation_would_merge():
    late = [f"void k<{LAYOUTS}, {n}>(int)" for n in (1, 2)]  # they differ only after 5 kB of arguments
    shown = short_names(late)
    assert shown == {late[0]: "k<…, 1>", late[1]: "k<…, 2>"}
