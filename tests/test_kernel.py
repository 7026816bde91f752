"""The gate's one decision per kernel (bot/verdict/kernel.py): `judge_kernel` over the evidence the review gathered —
cases not run and why, a crash, a build failure, a resource-only kernel — and `second_looks`, what the review measures
again before it asks."""

from __future__ import annotations

import ast

import numpy as np

from bot.config.manifest import Kernel, load_kernel
from bot.config.manifest_tables import Case
from bot.config.settings import load_settings
from bot.models.agent_report import ProposedCase
from bot.models.evidence import AdmittedCase, AgentAdmission, CaseEvidence, KernelEvidence, Lineage, NotRun, Peak
from bot.models.finding import Gate, Outcome, Phrase
from bot.models.judging import CaseRun, Check, Timing
from bot.models.report import (
    AgentCaseRefusal,
    Build,
    CaseStatus,
    CompileError,
    DiffStat,
    KernelReport,
    Resource,
    ResourceCheckReport,
)
from bot.verdict.findings import verbatim
from bot.verdict.gate import Policy
from bot.verdict.kernel import judge_kernel, second_looks
from bot.verdict.written import written_kernel
from bot.wording.messages import phrase
from tests.conftest import ROOT

CPU = Case(name="square", device="cpu", dtype="bfloat16", shape={"m": 64, "n": 64, "k": 64}, flops="2*m*n*k")
GPU = Case(name="big", device="cuda", dtype="bfloat16", shape={"m": 4096, "n": 4096, "k": 4096})
ERROR = CompileError(kind="compiler", path="kernels/k/body.cpp", line=3, message="expected ';' before '}' token")


def rules(*cases: Case) -> Kernel:
    """deepgemm_tile's manifest with only `cases` (its limits: 3% latency, no spills)."""
    k = load_kernel(ROOT / "kernels" / "deepgemm_tile", path="kernels/deepgemm_tile")
    return k.model_copy(update={"manifest": k.manifest.model_copy(update={"cases": list(cases)})})


def build(ok: bool = True, device: str = "cpu", key: str = "k1", errors: list[CompileError] | None = None) -> Build:
    return Build(ok=ok, seconds=1.0, cached=False, device=device, key=key, errors=errors or [])  # type: ignore[arg-type]


def evidence(*cases: CaseEvidence, head: Build | None = None, base: Build | None = None, **kw) -> KernelEvidence:
    builds = {"head": {"cpu": head or build()}, "base": {"cpu": base or build(key="k0")}}
    return KernelEvidence(name="deepgemm_tile", domain="deepgemm", changed=True, gathered=True, builds=builds,
                          cases=list(cases), **kw)  # fmt: skip


def judged(ev: KernelEvidence, kernel: Kernel | None, policy: Policy) -> KernelReport:
    """The kernel's verdict as report.json states it (its findings' lines written)."""
    return written_kernel(judge_kernel(ev, kernel, policy))


def samples(center: float, n: int, seed: int, noise: float = 0.01) -> list[float]:
    return list(center * (1 + noise * np.random.default_rng(seed).standard_normal(n)))


def timed(head_ms: float, base_ms: float = 1.0, noise: float = 0.002) -> CaseRun:
    return CaseRun(
        status=CaseStatus.ok,
        checks={"head": Check(label="head", max_abs_err=1e-4), "base": Check(label="base", max_abs_err=1e-4)},
        probe_count=0,
        timings={
            "head": Timing(label="head", samples_ms=samples(head_ms, 30, 1, noise)),
            "base": Timing(label="base", samples_ms=samples(base_ms, 30, 2, noise)),
        },
    )


def test_cases_not_run_are_skipped_with_their_reason_and_leave_the_kernel_undecided():
    other = Case(name="other", device="cuda", dtype="bfloat16", shape={"m": 8}, arch="sm_100a")
    held = Case(name="held", device="cpu", dtype="bfloat16", shape={"m": 8})
    nobuild = Case(name="nobuild", device="cuda", dtype="bfloat16", shape={"m": 8})
    ev = evidence(
        CaseEvidence(name="big", not_run=NotRun.no_gpu),
        CaseEvidence(name="other", not_run=NotRun.other_job, detail="sm_100"),
        CaseEvidence(name="held", not_run=NotRun.held_out),
        CaseEvidence(name="nobuild", not_run=NotRun.no_build),
    )
    report = judged(ev, rules(GPU, other, held, nobuild), Policy())
    assert [(c.name, c.verdict, c.status, c.reasons) for c in report.cases] == [
        ("big", "skipped", CaseStatus.skipped, ["needs a CUDA GPU; this machine has none"]),
        ("other", "skipped", CaseStatus.skipped, ["runs in the sm_100 job of this review"]),
        ("held", "skipped", CaseStatus.skipped, ["held out of the tuning search (its re-verification runs it)"]),
        ("nobuild", "skipped", CaseStatus.skipped, ["kernel.toml has no cuda build"]),
    ]
    assert report.verdict == "undecided" and report.reasons == []
    assert report.undecided[0].startswith("no case ran: 1 cuda case (needs a CUDA GPU; this machine has none)")
    assert report.build == build() and report.base_build == build(key="k0")


def test_a_case_on_another_gpu_names_both_architectures():
    case = Case(name="b", device="cuda", dtype="bfloat16", shape={"m": 8}, arch="sm_100a")
    ev = evidence(CaseEvidence(name="b", not_run=NotRun.wrong_gpu), device="cuda", arch="sm_90", gpu="NVIDIA H200")
    [c] = judged(ev, rules(case), Policy()).cases
    assert c.reasons == ["runs on sm_100a; this runner's GPU is sm_90 (NVIDIA H200)"] and c.arch is None


def test_a_crash_is_an_error_naming_the_side_and_keeping_its_output():
    crash = CaseRun(
        status=CaseStatus.crashed, detail=Phrase.as_written("killed by signal 11 (SIGSEGV)"), failed_label="head"
    )
    ev = evidence(CaseEvidence(name="square", run=crash, log_tail="Segmentation fault at 0x0"))
    report = judged(ev, rules(CPU), Policy())
    [case] = report.cases
    assert (case.verdict, case.status, case.log_tail) == ("error", CaseStatus.crashed, "Segmentation fault at 0x0")
    assert report.verdict == "error"
    assert report.reasons == ["square: head crashed: killed by signal 11 (SIGSEGV)"]


def test_a_head_that_does_not_build_fails_and_one_that_fails_as_base_does_is_undecided():
    failed = CaseEvidence(name="square", not_run=NotRun.head_build_failed)
    broken = build(ok=False, errors=[ERROR])
    report = judged(evidence(failed, head=broken), rules(CPU), Policy())
    [case] = report.cases
    assert (case.verdict, case.status, case.reasons) == ("fail", CaseStatus.compile_fail, ["head does not build"])
    assert report.verdict == "fail" and report.reasons[0].startswith("build (cpu): ")
    assert "kernels/k/body.cpp:3" in report.reasons[0]
    alike = judged(evidence(failed, head=broken, base=build(ok=False, key="k0", errors=[ERROR])), rules(CPU), Policy())
    [case] = alike.cases
    assert (case.verdict, case.reasons) == ("skipped", ["base and head fail to build alike"])
    assert alike.verdict == "undecided" and alike.reasons == []
    assert alike.undecided[0].startswith("build (cpu): not decided, base fails alike")


def test_a_refused_artifact_is_an_error():
    refused = CaseEvidence(name="square", not_run=NotRun.artifact_refused, detail="sha256 mismatch")
    report = judged(evidence(refused), rules(CPU), Policy())
    assert report.cases[0].reasons == ["artifact refused: sha256 mismatch"] and report.verdict == "error"


def test_a_kernel_judged_by_its_resources_alone_is_undecided_and_a_spill_fails_it():
    ok = ResourceCheckReport(status="ok", head=[Resource(function="k", registers=64)], base=[])
    report = judged(evidence(resource_checks=[ok]), rules(), Policy())
    assert report.verdict == "undecided" and report.undecided == ["resources checked; no case ran (needs a CUDA GPU)"]
    assert report.resource_check == ok and report.build is not None and report.build.resources == ok.head
    spill = ResourceCheckReport(status="ok", head=[Resource(function="k", registers=255, spill_bytes=64)])
    failed = judged(evidence(resource_checks=[ok, spill.model_copy(update={"arch": "sm_100a"})]), rules(), Policy())
    assert failed.verdict == "fail"
    assert failed.reasons == ["resource: k spills 64 bytes (stores 0 B, loads 0 B) on sm_100a"]
    assert failed.arch_checks[0].arch == "sm_100a"


def test_a_measured_case_passes_and_a_slower_head_fails_on_latency():
    fast = judged(evidence(CaseEvidence(name="square", run=timed(1.0))), rules(CPU), Policy())
    assert fast.verdict == "pass" and fast.cases[0].verdict == "pass"
    slow = judged(evidence(CaseEvidence(name="square", run=timed(1.2))), rules(CPU), Policy())
    assert slow.verdict == "fail" and slow.reasons[0].startswith("performance: square p50 +2")


def test_what_the_review_found_before_building_decides_first():
    invalid = judged(KernelEvidence(name="k", domain="d", changed=True, invalid="bad toml"), None, Policy())
    assert (invalid.verdict, invalid.reasons) == ("fail", ["invalid kernel definition: bad toml"])
    assert [(f.gate, f.outcome, f.key, f.params) for f in invalid.findings] == [
        (Gate.manifest, Outcome.fail, "manifest.invalid", {"error": "bad toml"})
    ]
    removed = judged(KernelEvidence(name="k", domain="d", changed=True, removed=True), rules(CPU), Policy())
    assert (removed.verdict, removed.notes) == ("skipped", ["kernel removed in head"])
    renamed = KernelEvidence(name="k", domain="d", changed=True, removed=True, renamed_to="k2")
    assert judged(renamed, rules(CPU), Policy()).notes == [
        "renamed to k2 in head: judged there, by this kernel's manifest and reference"
    ]
    static = evidence(static=["tile_config.json: tile_m=96 not in {64,128,256}"])
    flagged = judged(static, rules(CPU), Policy())
    assert (flagged.verdict, flagged.cases, flagged.build) == ("fail", [], None)
    new = evidence(
        CaseEvidence(name="square", run=timed(1.0)),
        new_kernel=True,
        unread=[verbatim("kernels/x.cu: not compiled", Gate.coverage, Outcome.undecided)],
    )
    asked = judged(new, rules(CPU), Policy())
    assert asked.verdict == "needs_accept"
    assert asked.accept_needed == ["new kernel: judged by its own manifest and reference, which this change wrote"]
    assert [f.gate for f in asked.findings if f.outcome == Outcome.accept] == [Gate.acceptance]
    assert asked.undecided == ["kernels/x.cu: not compiled"]


def test_the_change_the_review_found_is_stated_as_notes_in_order_each_a_finding():
    ev = evidence(
        CaseEvidence(name="square", run=timed(1.0)),
        diff=DiffStat(files=2, added=5, removed=1),
        origin=Lineage(base="old_gemm", how="renamed", share=0.87),
        rules_changed=["kernels/deepgemm_tile/kernel.toml"],
    )
    report = judged(ev, rules(CPU), Policy())
    assert report.notes[:3] == [
        "change size: 2 file(s) of this kernel changed, +5/-1 lines (what reverting this pull request undoes)",
        "renamed from old_gemm (87% of its bytes, git's rename/copy detection): judged by old_gemm's manifest, "
        "reference and build from base",
        "kernels/deepgemm_tile/kernel.toml changed: cases, limits and reference come from base",
    ]
    notes = [f for f in report.findings if f.outcome == Outcome.note]
    assert [f.key for f in notes][:3] == ["review.change_size", "review.renamed_from", "review.rules_changed"]
    assert notes[2].file == "kernels/deepgemm_tile/kernel.toml" and {f.gate for f in notes[:3]} == {Gate.review}
    copied = ev.model_copy(update={"origin": Lineage(base="old_gemm", how="copied", share=0.6), "rules_changed": []})
    assert judged(copied, rules(CPU), Policy()).notes[1].startswith("copied from old_gemm (60% of its bytes")
    elsewhere = KernelEvidence(name="k", domain="d", changed=True, gated_elsewhere=True)
    assert judged(elsewhere, rules(CPU), Policy()).notes == ["agent only: built, run and gated in another job"]


def test_an_identical_build_is_not_compared_and_a_drifting_base_is_noted():
    same = CaseEvidence(name="square", run=timed(1.0), identical_build=True, prior_base_p50_ms=0.5)
    [case] = judged(evidence(same), rules(CPU), Policy()).cases
    assert case.stop_reason == "identical_build" and case.base_drift_pct is None
    drifted = CaseEvidence(name="square", run=timed(1.0), prior_base_p50_ms=0.9)
    report = judged(evidence(drifted), rules(CPU), Policy())
    assert report.cases[0].base_drift_pct is not None and report.cases[0].base_drift_pct > 5
    assert any(n.startswith("square: base measured +") for n in report.notes) and report.verdict == "pass"


def test_a_rate_above_the_measured_cpu_peak_asks_for_it_again_and_fails_as_implausible():
    run = CaseEvidence(name="square", run=timed(1.0))
    low = Peak(tflops=1e-6, gbps=1e-3, of=Phrase.as_written("this runner, measured"))
    assert second_looks(evidence(run, cpu_peak=low), rules(CPU), "off").refresh_cpu_peak
    high = Peak(tflops=100.0, gbps=100.0, of=Phrase.as_written("this runner, measured"))
    assert not second_looks(evidence(run, cpu_peak=high), rules(CPU), "off").refresh_cpu_peak
    failed = judged(evidence(run, cpu_peak=low), rules(CPU), Policy())
    assert failed.verdict == "fail" and failed.cases[0].reasons[0].startswith("implausible: above the hardware limit")
    assert judged(evidence(run, cpu_peak=high), rules(CPU), Policy()).verdict == "pass"


def test_an_undecided_cpu_latency_is_counted_under_callgrind_only_where_asked():
    """Issue 40, 2: the count decides nothing, so a review runs no valgrind unless OPGATE_SIMULATE asks for it."""
    straddling = CaseEvidence(name="square", run=timed(1.03, noise=0.03))
    ev = evidence(straddling)
    assert judged(ev, rules(CPU), Policy()).cases[0].verdict == "inconclusive"
    assert second_looks(ev, rules(CPU), load_settings({}).simulate).simulate == []  # the default: not counted
    assert second_looks(ev, rules(CPU), load_settings({"OPGATE_SIMULATE": "undecided"}).simulate).simulate == ["square"]
    assert second_looks(ev, rules(CPU), "off").simulate == []
    decided = evidence(CaseEvidence(name="square", run=timed(1.0)))
    assert second_looks(decided, rules(CPU), "undecided").simulate == []
    assert second_looks(decided, rules(CPU), "always").simulate == ["square"]
    assert (
        second_looks(evidence(CaseEvidence(name="square", not_run=NotRun.held_out)), rules(CPU), "always").simulate
        == []
    )


def test_the_review_gathers_evidence_and_leaves_every_verdict_to_bot_verdict():
    """No module of bot/review imports one of the gate's deciding functions or makes a verdict itself: it assigns
    no `.verdict`, passes no literal `verdict="…"`, and the review's own Report takes its verdict from a call (the
    folds of bot/verdict/folds.py). A new kind of evidence (an agent case, a new check) goes into KernelEvidence
    and is decided in bot/verdict/; flow.py asks judge_kernel once per kernel, nothing else of review/ does."""
    deciding = {
        *("case_verdict", "kernel_verdict", "simulated_note", "judge_throughput", "compile_phrases"),
        *("resource_findings", "overall", "with_agent_cases", "not_run_report", "judge_case"),
    }
    modules = sorted((ROOT / "bot" / "review").glob("*.py"))
    assert {"flow.py", "cases.py", "fanout.py", "arch_jobs.py", "coverage.py", "check.py"} <= {m.name for m in modules}
    for path in modules:
        rel = path.relative_to(ROOT)
        tree = ast.parse(path.read_text())
        imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names}
        assert not imported & deciding, f"{rel} imports {imported & deciding}"
        defined = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
        assert not defined & {"combine", "with_coverage"}, f"{rel} folds verdicts itself"
        for node in ast.walk(tree):
            targets = node.targets if isinstance(node, ast.Assign) else []
            flat = [e for t in targets for e in (t.elts if isinstance(t, ast.Tuple) else [t])]
            assert not any(isinstance(t, ast.Attribute) and t.attr == "verdict" for t in flat), f"{rel}:{node.lineno}"
            if isinstance(node, ast.Call):
                for k in node.keywords:
                    assert not (k.arg == "verdict" and isinstance(k.value, ast.Constant)), f"{rel}:{node.lineno}"
                    if k.arg == "verdict" and getattr(node.func, "id", "") in ("Report", "KernelReport"):
                        assert isinstance(k.value, ast.Call), f"{rel}:{node.lineno} sets a verdict"
            if isinstance(node, ast.Dict):  # a model_copy(update={"verdict": …}) decides too
                keys = [k.value for k in node.keys if isinstance(k, ast.Constant)]
                assert "verdict" not in keys, f"{rel}:{node.lineno} sets a verdict"
        calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", "") == "judge_kernel"]
        assert len(calls) == (1 if path.name == "flow.py" else 0), f"{rel} calls judge_kernel {len(calls)} times"


def test_the_agent_cases_are_judged_from_the_reviews_one_admission():
    """The review admits the matrix once (base's [agent_cases]) and carries the admission in KernelEvidence; the gate
    judges from it and admits nothing again: deepgemm_tile's manifest has no [agent_cases], yet the admission's case
    and refusal are what the report shows (admitting again would have said "no [agent_cases]")."""
    tail = AdmittedCase(name="tail_15", device="cpu", dtype="bfloat16", shape={"m": 47, "n": 64, "k": 64})
    outside = Phrase(key="bound.outside", params={"value": 5000, "lo": 1, "hi": 256})
    bound = Phrase(key="agent.bound", params={"part": "shape", "key": "m"}, phrases={"why": [outside]})
    admission = AgentAdmission(proposed=2, cases=[tail], refused=[AgentCaseRefusal(name="huge", reason=bound)])
    matrix = [ProposedCase(name="tail_15", shape=tail.shape), ProposedCase(name="huge", shape={"m": 5000})]
    ev = evidence(
        CaseEvidence(name="square", run=timed(1.0)),
        agent_matrix=matrix,
        agent_proposer="deepseek-v4",
        agent_admission=admission,
        agent_runs=[CaseEvidence(name="tail_15", run=timed(1.0))],
    )
    block = judged(ev, rules(CPU), Policy()).agent_cases
    assert block is not None and (block.agent, block.proposed, block.note) == ("deepseek-v4", 2, "")
    assert [(c.name, c.verdict) for c in block.cases] == [("tail_15", "pass")]
    assert [(r.name, phrase(r.reason)) for r in block.refused] == [("huge", "shape.m = 5000 is outside [1, 256]")]
    # nothing proposed: no block at all, whatever the manifest declares
    assert judged(evidence(CaseEvidence(name="square", run=timed(1.0))), rules(CPU), Policy()).agent_cases is None


def test_the_matrix_is_admitted_in_one_place():
    """`agent_cases.admit` is called by the review only (bot/review/flow.py, once); the gate reads the admission."""
    calls = {
        rel: sum(
            1
            for n in ast.walk(ast.parse((ROOT / rel).read_text()))
            if isinstance(n, ast.Call) and getattr(n.func, "attr", getattr(n.func, "id", "")) == "admit"
        )
        for rel in (str(p.relative_to(ROOT)) for p in (ROOT / "bot").rglob("*.py"))
    }
    assert {rel: n for rel, n in calls.items() if n} == {"bot/review/flow.py": 1}
