"""The build gate: each architecture's compile-only check (a failed compile, launch errors and notes, then its
resource findings), and a failed compile as a finding."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bot.config.manifest_tables import Constraints
from bot.models.finding import Finding, Gate, Outcome, Phrase
from bot.models.report import (
    CompileError,
    KernelReport,
    Resource,
    ResourceCheckReport,
)
from bot.verdict.compile_errors import compile_phrases, described
from bot.verdict.findings import _finding, add_kernel
from bot.verdict.gate_resources import launch_in_base, resource_findings
from bot.verdict.names import base_name


def _judge_resources(kernel: KernelReport, constraints: Constraints) -> None:
    """Every architecture's resource check; with more than one, each failure and finding names its architecture."""
    checks = kernel.resource_checks()
    for check in checks:
        _judge_arch(kernel, check, constraints, named=len(checks) > 1)


def _compile_findings(
    step: Phrase, key: str, errors: list[CompileError], base_failed: bool, base_errors: list[CompileError], **where: str
) -> list[Finding]:
    """A failed compile as a failure (head's fault) or as undecided (base fails alike), at the first error's place;
    its `detail` a phrase (bot/verdict/compile_errors.py compile_phrases)."""
    failure, undecided = compile_phrases(step, errors, base_failed, base_errors)
    place: dict[str, str | int | None] = {"file": errors[0].path or None, "line": errors[0].line} if errors else {}
    found = [(failure, Outcome.fail), (undecided, Outcome.undecided)]
    return [
        Finding(gate=Gate.build, outcome=outcome, key=key, phrases={"detail": [detail]}, **place, **where)  # type: ignore[arg-type]
        for detail, outcome in found
        if detail
    ]


def _judge_arch(kernel: KernelReport, check: ResourceCheckReport, constraints: Constraints, *, named: bool) -> None:
    on = [Phrase(key="tail.arch", params={"arch": check.arch})] if named else []
    arch = check.arch
    if check.status == "no_nvcc":
        add_kernel(kernel, _finding(Gate.resources, "resources.no_nvcc", Outcome.note), once=True)
        return
    if check.status == "unsupported_arch":  # the toolchain's limit, not the change's: not decided, never a pass
        found = _finding(Gate.resources, "resources.unsupported_arch", Outcome.undecided, detail=check.log_tail)
        add_kernel(kernel, found.model_copy(update={"arch": arch}))
        return
    if check.status == "compile_fail":  # base failing alike leaves it undecided: the runner's or the manifest's
        step = Phrase(key="compile.step_cuda", params={"arch": check.arch})
        for f in _compile_findings(step, "resources.compile_failed", check.errors, check.base_status == "compile_fail",
                                   check.base_errors, arch=arch):  # fmt: skip
            add_kernel(kernel, f)
        return
    if check.base_status == "compile_fail":
        if check.base_errors:
            found = Finding(
                gate=Gate.build,
                outcome=Outcome.note,
                key="resources.base_compile_fail",
                params={"arch": check.arch},
                phrases={"error": [described(check.base_errors[0])]},
            )
        else:
            found = _finding(Gate.build, "resources.base_compile_fail_log", Outcome.note, arch=check.arch)
        add_kernel(kernel, found.model_copy(update={"arch": arch}))
    for e in check.launch_errors:
        add_kernel(kernel, _launch_error(e, check).model_copy(update={"tail": on, "arch": arch}))
    for e in check.base_launch_errors:
        if e not in check.launch_errors:  # base's own, which head mends or lacks: reported, never head's fault
            own = Phrase(key="launch.base", phrases={"detail": [e]})
            base_own = _launch(own, Outcome.note, "resources.launch_note")
            add_kernel(kernel, base_own.model_copy(update={"arch": arch}), once=True)
    for u in check.launch_undecided:
        add_kernel(kernel, _launch(u, Outcome.undecided).model_copy(update={"tail": on, "arch": arch}))
    for note in check.launch_notes:
        add_kernel(kernel, _launch(note, Outcome.note, "resources.launch_note").model_copy(update={"arch": arch}),
                   once=True)  # fmt: skip
    if check.unchanged is not None:
        key = "resources.unchanged" if check.unchanged == "same" else "resources.unchanged_unread"
        add_kernel(kernel, _finding(Gate.resources, key, Outcome.note, functions=len(check.head)).model_copy(
            update={"arch": arch}), once=True)  # fmt: skip
    failures, notes = resource_findings(check.head, check.base, constraints, check.threads, check.arch)
    for f in (*failures, *notes):
        add_kernel(kernel, f.model_copy(update={"tail": [*f.tail, *on], "arch": arch}))


def _launch_error(line: Phrase, check: ResourceCheckReport) -> Finding:
    """Head's launch error: a failure, unless base's kernel.toml has it alike (`launch_in_base`)."""
    moved = launch_in_base(line, check.head, check.base, check.base_launch_errors)
    if moved is None:
        return _launch(line, Outcome.fail, head=check.head)
    if moved:
        detail: dict[str, Any] = {"params": {"functions": "; ".join(moved)}, "phrases": {"detail": [line]}}
        return Finding(gate=Gate.resources, outcome=Outcome.undecided, key="resources.launch_in_base_moved", **detail)
    shared = {"detail": [line]}
    return Finding(gate=Gate.resources, outcome=Outcome.note, key="resources.launch_in_base", phrases=shared)


def _launch(detail: Phrase, outcome: Outcome, key: str = "resources.launch", head: Sequence[Resource] = ()) -> Finding:
    """One launch error, undecided launch or launch note as a resources finding (its phrase the detail). One about
    a template's instantiations (`launch.unsized`) names them as data: `family`, `functions` (`head`'s unsized
    ones) and the first as its `function` (where annotations place it)."""
    found = Finding(gate=Gate.resources, outcome=outcome, key=key, phrases={"detail": [detail]})
    if detail.key == "launch.unsized" and isinstance(family := detail.params.get("name"), str):
        unsized = [r.function for r in head if r.extern_smem and r.dynamic_smem_bytes is None]
        functions = [f for f in unsized if base_name(f) == family]
        first = functions[0] if functions else None
        found = found.model_copy(update={"family": family, "functions": functions, "function": first})
    return found
