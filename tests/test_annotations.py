"""bot/present/annotations.py: the locators over head's text, changed lines from a diff, the review's annotations."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.config.manifest_tables import Constraints
from bot.models.agent_report import AgentReport
from bot.models.diff import FileChange
from bot.models.finding import Finding, Gate, Outcome
from bot.models.github import Annotation
from bot.models.report import (
    CaseReport,
    CaseStatus,
    Coverage,
    KernelReport,
    Listed,
    Machine,
    Occupancy,
    Report,
    Resource,
    ResourceCheckReport,
)
from bot.present.annotations import (
    EntryPlace,
    KernelSources,
    LintPlace,
    Sources,
    changed_lines,
    define_line,
    entry_line,
    for_review,
    function_name,
)
from bot.review.changes import parse_diff
from bot.text.i18n import english_runs, speaking
from bot.verdict.findings import add_case, add_kernel, verbatim
from bot.verdict.gate_resources import resource_findings

ROOT = Path(__file__).resolve().parents[1]
KERNELS = {
    "deepgemm_tile": ["gemm_bf16_kernel"],
    "flashmla_decode": ["mla_decode_kernel"],
    "v41_attention_splitk": ["splitk_partial_kernel", "splitk_merge_kernel"],
}
SUFFIXES = (".cu", ".cuh", ".cpp", ".h")
FN = "void deepgemm_tile::gemm_bf16_kernel<128, {n}, 64, false>(unsigned short const*, unsigned short const*, float*, int)"  # noqa: E501


def texts_of(kernel: str) -> dict[str, str]:
    folder = ROOT / "kernels" / kernel
    return {f"kernels/{kernel}/{p.name}": p.read_text() for p in sorted(folder.iterdir()) if p.suffix in SUFFIXES}


def line(texts: dict[str, str], place: tuple[str, int] | None) -> str:
    assert place is not None
    return texts[place[0]].splitlines()[place[1] - 1]


def test_a_function_is_named_as_its_source_names_it_demangled_or_not() -> None:
    assert function_name(FN.format(n=256)) == "gemm_bf16_kernel"
    assert function_name("void (anonymous namespace)::k<2>(float*)") == "k"
    assert function_name("splitk_merge_kernel(float const*, float*)") == "splitk_merge_kernel"
    assert function_name("_ZN13deepgemm_tile16gemm_bf16_kernelILi128ELi256EEEvPKtS2_Pfi") == "gemm_bf16_kernel"
    assert function_name("_Z19splitk_merge_kernelPKfPf") == "splitk_merge_kernel"
    assert function_name("_Z") == "" and function_name("") == ""


@pytest.mark.parametrize("kernel", sorted(KERNELS))
def test_every_kernel_function_of_this_repository_is_found_at_its_global_definition(kernel: str) -> None:
    texts = texts_of(kernel)
    for name in KERNELS[kernel]:
        place = define_line(name, texts, texts, kernel=True)
        assert place is not None and place[0].endswith(".cu")
        here, before = line(texts, place), texts[place[0]].splitlines()[place[1] - 2]
        assert f"{name}(" in here and "__global__" in here + before


@pytest.mark.parametrize("kernel", sorted(KERNELS))
@pytest.mark.parametrize("device", ["cpu", "cuda"])
def test_every_entry_of_this_repository_is_found_at_the_function_its_binding_binds(kernel: str, device: str) -> None:
    import tomllib

    manifest = tomllib.loads((ROOT / "kernels" / kernel / "kernel.toml").read_text())
    spec = manifest["build"][device]
    texts = texts_of(kernel)
    build = EntryPlace(entry=spec["entry"], sources=[f"kernels/{kernel}/{s}" for s in spec["sources"]])
    place = entry_line(spec["entry"], build, texts, texts)
    assert place is not None and place[0] in build.sources  # the build's own binding, not the other device's
    assert f"{spec['entry']}(" in line(texts, place) and "torch::Tensor" in line(texts, place)


def test_a_definition_wins_over_a_declaration_and_calls_and_macros_are_neither() -> None:
    texts = {
        "a.h": "#pragma once\ntorch::Tensor run(torch::Tensor x);\n#define run(x) run_impl(x)\n",
        "a.cpp": (
            '#include "a.h"\nstatic int helper() { return run(1); }\nvoid other() {\n  auto y = run(x);\n  run(x);\n}\n'
            "torch::Tensor\nrun(torch::Tensor x) {\n  return x;\n}\n"
        ),
    }
    assert define_line("run", ["a.h", "a.cpp"], texts, kernel=False) == ("a.cpp", 8)
    assert define_line("run", ["a.h"], texts, kernel=False) == ("a.h", 2)  # only declared: the declaration
    code = {"k.cu": "// __global__ void k(int)\nvoid host() { k<<<1, 32>>>(3); }\n__global__ void\nk(int n) {}\n"}
    assert define_line("k", ["k.cu"], code, kernel=True) == ("k.cu", 4)  # not the comment, not the launch


def test_a_torch_library_entry_is_found_at_its_impl_else_at_its_schema() -> None:
    binding = (
        "#include <torch/library.h>\n"
        "at::Tensor muladd_cpu(const at::Tensor& a, double c) {\n  return a * c;\n}\n"
        'TORCH_LIBRARY(ext, m) {\n  m.def("muladd(Tensor a, float c) -> Tensor");\n'
        '  m.def("scale(Tensor a) -> Tensor");\n}\n'
        'TORCH_LIBRARY_IMPL(ext, CPU, m) {\n  m.impl("muladd", &muladd_cpu);\n'
        '  m.impl("scale", [](const at::Tensor& a) { return a; });\n}\n'
    )
    texts, build = {"b.cpp": binding}, EntryPlace(entry="torch.ops.ext.muladd", sources=["b.cpp"])
    assert entry_line("torch.ops.ext.muladd", build, [], texts) == ("b.cpp", 2)
    assert entry_line("torch.ops.ext.scale.default", build, [], texts) == ("b.cpp", 7)  # a lambda: its schema
    assert entry_line("torch.ops.ext.missing", build, [], texts) is None


DIFF = """\
diff --git a/k.cu b/k.cu
index 1111111..2222222 100644
--- a/k.cu
+++ b/k.cu
@@ -3,3 +3,4 @@ int a;
 keep
-old
+new one
+new two
 keep
@@ -20,3 +21,2 @@ int b;
 keep
-gone
 keep
diff --git a/gone.txt b/gone.txt
deleted file mode 100644
index 3333333..0000000
--- a/gone.txt
+++ /dev/null
@@ -1,2 +0,0 @@
-x
-y
"""


def test_changed_lines_are_heads_added_lines_and_where_a_removal_was() -> None:
    k, gone = parse_diff(DIFF)
    assert changed_lines(k) == [4, 5, 21]  # two added; a hunk that only removes: its first line in head
    assert changed_lines(gone) == [] and changed_lines(FileChange(path="b.bin", binary=True)) == []


def resource(n: int, registers: int, spill: int = 0, warps: int = 8) -> Resource:
    occ = Occupancy(arch="sm_90a", blocks_per_sm=1, warps_per_sm=warps, occupancy_pct=warps / 64 * 100,
                    limited_by=["registers"])  # fmt: skip
    return Resource(function=FN.format(n=n), registers=registers, spill_bytes=spill, spill_store_bytes=spill,
                    spill_load_bytes=spill, occupancy=occ)  # fmt: skip


def report(kernel: KernelReport, coverage: Coverage | None = None) -> Report:
    verdict = "pass" if kernel.verdict == "skipped" else kernel.verdict
    return Report(
        base_sha="b" * 40,
        head_sha="h" * 40,
        verdict=verdict,  # type: ignore[arg-type]
        kernels=[kernel],
        agent=AgentReport(status="skipped"),
        environment=Machine(device="cpu", python="3.12"),
        created_at="2026-12-02T00:00:00+00:00",
        opgate_version="0.2.0",
        coverage=coverage,
    )


def deepgemm_sources() -> Sources:
    texts = texts_of("deepgemm_tile")
    folder = "kernels/deepgemm_tile"
    builds = {
        "cpu": EntryPlace(entry="gemm", sources=[f"{folder}/gemm_cpu.cpp", f"{folder}/binding_cpu.cpp"]),
        "cuda": EntryPlace(entry="gemm", sources=[f"{folder}/gemm_cuda.cu", f"{folder}/binding_cuda.cpp"]),
    }
    return Sources(texts=texts, kernels={"deepgemm_tile": KernelSources(files=sorted(texts), builds=builds)})


def judged(kernel: KernelReport) -> KernelReport:
    """The kernel with the resource findings the gate makes from its checks (bot/verdict/gate_build.py)."""
    for check in kernel.resource_checks():
        failures, notes = resource_findings(check.head, check.base, Constraints(), arch=check.arch)
        for f in [*failures, *notes]:
            add_kernel(kernel, f.model_copy(update={"arch": check.arch}))
    return kernel


def test_a_spill_and_a_failed_case_are_annotated_where_their_code_is() -> None:
    head = [resource(256, 255, spill=96, warps=4), resource(128, 128)]
    check = ResourceCheckReport(status="ok", arch="sm_90a", head=head, base=[resource(256, 168), resource(128, 128)])
    failed = CaseReport(name="square_512", tolerance=0.01, status=CaseStatus.incorrect, verdict="fail")
    add_case(failed, Finding(gate=Gate.correctness, outcome=Outcome.fail, key="correctness.max_abs_err_total",
                             params={"value": "0.5", "limit": "0.01"}))  # fmt: skip
    passed = CaseReport(name="ragged_200x328x264", tolerance=0.01, verdict="pass")
    kernel = judged(KernelReport(name="deepgemm_tile", domain="deepgemm", changed=True, verdict="fail",
                                 resource_check=check, cases=[failed, passed]))  # fmt: skip
    sources = deepgemm_sources()
    case, spill = for_review(report(kernel), [], sources)  # failures by file and line
    assert (spill.path, spill.annotation_level) == ("kernels/deepgemm_tile/gemm_cuda.cu", "failure")
    assert "gemm_bf16_kernel(" in sources.texts[spill.path].splitlines()[spill.start_line - 1]
    assert spill.title == "deepgemm_tile: gemm_bf16_kernel resources (spills)"
    lines = spill.message.splitlines()  # the gate's findings about the function, the same as the comment's lines
    assert lines == list(dict.fromkeys(lines)) and len(lines) >= 3
    assert lines[0].startswith(f"resource: {FN.format(n=256)} spills 96 bytes (stores 96 B, loads 96 B)")
    assert any("registers 168 -> 255" in x for x in lines) and any("occupancy 12.5% -> 6.25%" in x for x in lines)
    assert all(x in kernel.reasons + kernel.notes or x.endswith("(sm_90a)") for x in lines)
    assert (case.path, case.start_line, case.annotation_level) == (
        "kernels/deepgemm_tile/binding_cpu.cpp",
        6,
        "failure",
    )
    assert case.title == "deepgemm_tile: case square_512 failed"
    assert case.message == "square_512 (cpu) calls gemm: correctness: max_abs_err 0.5 > tolerance 0.01"


def test_a_finding_with_a_file_and_line_is_annotated_there() -> None:
    kernel = KernelReport(name="deepgemm_tile", domain="deepgemm", changed=True, verdict="fail")
    at = {"file": "kernels/deepgemm_tile/gemm_cuda.cu", "line": 12}
    add_kernel(kernel, verbatim("gemm_cuda.cu:12: error: expected ';'", Gate.build, Outcome.fail, **at))
    add_kernel(kernel, verbatim("elsewhere.cu:3: error", Gate.build, Outcome.fail, file="elsewhere.cu", line=3))
    (a,) = for_review(report(kernel), [], deepgemm_sources())  # a file head does not have: not annotated
    assert (a.path, a.start_line, a.annotation_level, a.title) == (at["file"], 12, "failure", "deepgemm_tile: build")
    assert a.message == "gemm_cuda.cu:12: error: expected ';'"
    with speaking("zh-CN"):
        (shown,) = for_review(report(kernel), [], deepgemm_sources())
    assert shown.title == "deepgemm_tile: 构建" and shown.message == a.message  # the compiler's line as it wrote it


def test_unchanged_resources_an_unchanged_kernel_and_an_unknown_build_give_nothing() -> None:
    same = ResourceCheckReport(status="ok", head=[resource(128, 128)], base=[resource(128, 128)])
    cuda_case = CaseReport(name="gemm_4096", device="cuda", tolerance=0.01, status=CaseStatus.crashed, verdict="error",
                           reasons=["worker crashed (exit 139)"])  # fmt: skip
    kernel = judged(KernelReport(name="deepgemm_tile", domain="deepgemm", changed=True, verdict="error",
                                 resource_check=same, cases=[cuda_case]))  # fmt: skip
    assert kernel.findings == []  # nothing changed: the gate found nothing, so nothing is placed
    sources = deepgemm_sources()
    only_cpu = sources.kernels["deepgemm_tile"].model_copy(
        update={"builds": {"cpu": sources.kernels["deepgemm_tile"].builds["cpu"]}}
    )
    assert for_review(report(kernel), [], sources.model_copy(update={"kernels": {"deepgemm_tile": only_cpu}})) == []
    (crash,) = for_review(report(kernel), [], sources)  # a line made outside the gates: its reason as it is
    assert (
        crash.path.endswith("binding_cuda.cpp") and crash.title == "deepgemm_tile: case gemm_4096 could not be judged"
    )
    assert crash.message == "gemm_4096 (cuda) calls gemm: worker crashed (exit 139)"
    untouched = kernel.model_copy(update={"changed": False})
    assert for_review(report(untouched), [], sources) == []


def test_a_file_no_gate_read_is_annotated_at_its_first_changed_line() -> None:
    changes = parse_diff(DIFF.replace("k.cu", "tools/k.cu"))
    cov = Coverage(files=2, size_limit_bytes=1 << 20, unmatched=Listed(total=2, names=["tools/k.cu", "gone.txt"]),
                   kernel_sources=Listed(total=1, names=["tools/k.cu"]))  # fmt: skip
    kernel = KernelReport(name="deepgemm_tile", domain="deepgemm", changed=False, verdict="skipped")
    (note,) = for_review(report(kernel, cov), changes, Sources())  # a deleted file has no line in head
    assert (note.path, note.start_line, note.annotation_level) == ("tools/k.cu", 4, "failure")
    assert note.message.startswith("tools/k.cu matches no kernel's globs: no gate read it: add a manifest")


def test_lint_findings_keep_their_line_and_a_line_past_the_end_is_dropped() -> None:
    sources = Sources(texts={"kernels/x/kernel.toml": "name = 'x'\ndomain = 'nope'\n"})
    lint = [
        LintPlace(path="kernels/x/kernel.toml", line=2, rule="KERN002", message="domain 'nope' is not configured",
                  severity="error"),
        LintPlace(path="kernels/x/kernel.toml", line=9, rule="KERN007", message="past the end", severity="warning"),
    ]  # fmt: skip
    kernel = KernelReport(name="x", domain="nope", changed=True, verdict="fail")
    (a,) = for_review(report(kernel), [], sources, lint)
    assert (a.start_line, a.annotation_level, a.title) == (2, "failure", "lint KERN002")


def test_the_annotations_speak_the_reviews_locale_like_the_comment() -> None:
    """Under zh-CN (the CLI's `speaking`) every annotation opgate words — the gates' findings, the titles, a failed
    case's entry line, the files no gate read — is Chinese; names, paths, numbers and units stay as they are."""
    head = [resource(256, 255, spill=96, warps=4), resource(128, 128)]
    check = ResourceCheckReport(status="ok", arch="sm_90a", head=head, base=[resource(256, 168), resource(128, 128)])
    failed = CaseReport(name="square_512", tolerance=0.01, status=CaseStatus.incorrect, verdict="fail")
    add_case(failed, Finding(gate=Gate.correctness, outcome=Outcome.fail, key="correctness.max_abs_err_total",
                             params={"value": "0.5", "limit": "0.01"}))  # fmt: skip
    crashed = CaseReport(name="gemm_4096", device="cuda", arch="sm_90a", tolerance=0.01, status=CaseStatus.crashed,
                         verdict="error")  # fmt: skip
    kernel = judged(KernelReport(name="deepgemm_tile", domain="deepgemm", changed=True, verdict="fail",
                                 resource_check=check, cases=[failed, crashed]))  # fmt: skip
    changes = parse_diff(DIFF.replace("k.cu", "tools/k.cu") + DIFF.replace("k.cu", "docs/big.md"))
    unmatched, large = Listed(total=1, names=["tools/k.cu"]), Listed(total=1, names=["docs/big.md"])
    cov = Coverage(files=2, size_limit_bytes=1 << 20, unmatched=unmatched, large=large, kernel_sources=unmatched)
    with speaking("zh-CN"):
        shown = for_review(report(kernel, cov), changes, deepgemm_sources())
    assert len(shown) == 5  # the spill, the two cases, the two files
    functions = frozenset(r.function for r in head)  # C++ names as ptxas wrote them
    english = [run for a in shown for text in (a.title, a.message) for run in english_runs(text, functions)]
    assert english == []
    titles = {a.title for a in shown}
    assert {"deepgemm_tile：gemm_bf16_kernel 的资源（寄存器溢出）", "deepgemm_tile：用例 square_512 未通过",
            "deepgemm_tile：用例 gemm_4096 无法评判", "没有门禁读过"} == titles  # fmt: skip
    assert "gemm_4096（cuda，sm_90a）调用 gemm：状态 crashed" in {a.message for a in shown}
    with speaking("en"):
        assert {a.title for a in for_review(report(kernel, cov), changes, deepgemm_sources())} == {
            "deepgemm_tile: gemm_bf16_kernel resources (spills)", "deepgemm_tile: case square_512 failed",
            "deepgemm_tile: case gemm_4096 could not be judged", "not read by any gate",
        }  # fmt: skip


def test_the_check_runs_title_and_summary_speak_the_locale_too() -> None:
    from bot.edges.publish import check_summary

    marks = [Annotation(path="a.cu", start_line=1, end_line=1, annotation_level=level, title="t", message="m")
             for level in ("failure", "warning", "warning")]  # fmt: skip
    url = "https://github.com/o/r/pull/7#issuecomment-1"
    assert check_summary("1 of 1 kernels fails a gate", marks, url) == (
        "3 finding(s) on head's lines",
        "opgate/acceptance: 1 of 1 kernels fails a gate\n\nAnnotations: 1 failure, 2 warning. This check only places "
        "the review's findings on the lines they are about; the status `opgate/acceptance` is what gates, and "
        f"[the comment]({url}) has the whole review.",
    )
    assert check_summary("ok", [], "") == ("no finding on a line of head", "opgate/acceptance: ok\n\nAnnotations: "
        "none. This check only places the review's findings on the lines they are about; the status "
        "`opgate/acceptance` is what gates.")  # fmt: skip
    with speaking("zh-CN"):
        title, summary = check_summary("1 个内核中 1 个未通过门禁", marks, url)
        empty = check_summary("全部通过", [], "")
    assert title == "head 的代码行上有 3 项发现" and "1 个失败，2 个警告" in summary
    assert [english_runs(text) for text in (title, summary, *empty)] == [[], [], [], []]
