"""The agent's test matrix: which proposed cases base's `[agent_cases]` admits, and what each one ran to decides."""

from __future__ import annotations

import re

from bot.config.manifest import KernelManifest
from bot.config.manifest_tables import AgentCases, Case
from bot.models.agent_report import ProposedCase
from bot.models.evidence import AdmittedCase, AgentAdmission
from bot.models.finding import Finding, Gate, Outcome, Phrase
from bot.models.report import (
    AgentCaseRefusal,
    AgentCaseReport,
    AgentCasesReport,
    AgentCaseVerdict,
    CaseReport,
    CaseStatus,
    KernelReport,
)
from bot.text.i18n import N_
from bot.text.safe import one_line
from bot.verdict.findings import add_kernel, verbatim
from bot.wording.messages import MESSAGES, render

# report.json keeps these in English; the comment shows each through the catalog (bot/present/render.py `said`).
NO_TABLE = N_("base's kernel.toml declares no [agent_cases]: the agent's test matrix is not run")
NEW_KERNEL = N_("a new kernel has no base manifest to bound agent cases: the agent's test matrix is not run")
BASE_FAILS_WHY = {
    "same": N_("base fails too (the same build): not failed for it"),
    "unbuilt": N_("base fails too (base does not build): not failed for it"),
    "wrong": N_("base fails too (base is wrong on it): not failed for it"),
}
NOT_BUILT = N_("not run: the change fails its static checks before anything is built")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")  # an identifier: never a path part such as `..`
_KEYS = {"name", "shape", "params"}


def _shown(name: object) -> str:
    """Untrusted text of the reply as a refusal quotes it: one line, at most 64 characters."""
    return one_line(str(name), 64)


def entry_problem(entry: ProposedCase, bounds: AgentCases, taken: set[str]) -> Phrase | None:
    """Why one entry may not run (a key no manifest case has, a value outside its bound, a name in use), or None: a
    phrase of the findings' catalog (`agent.*`), the reply's own text in it quoted short."""
    if unknown := sorted(set(entry.model_extra or {}) - _KEYS):
        named = ", ".join(repr(_shown(k)) for k in unknown[:3]) + (" …" if len(unknown) > 3 else "")
        return Phrase(key="agent.unknown_key", params={"keys": named})
    if not _NAME.fullmatch(entry.name):
        return Phrase(key="agent.bad_name")
    if entry.name in taken:
        return Phrase(key="agent.name_taken", params={"name": entry.name})
    for part, given, allowed in (("shape", entry.shape, bounds.shape), ("params", entry.params, bounds.params)):
        if unknown := [k for k in given if k not in allowed]:
            where = {"part": part, "key": _shown(unknown[0])}
            if not allowed:
                return Phrase(key="agent.no_bound_none", params=where)
            return Phrase(key="agent.no_bound", params={**where, "known": ", ".join(allowed)})
        if missing := [k for k in allowed if k not in given]:
            return Phrase(key="agent.missing", params={"part": part, "key": missing[0]})
        for key, bound in allowed.items():
            if (why := bound.problem(given[key])) is not None:
                return Phrase(key="agent.bound", params={"part": part, "key": key}, phrases={"why": [why]})
    return None


def admit(proposed: list[ProposedCase], rules: KernelManifest | None) -> AgentAdmission:
    """Base's `[agent_cases]` applied to the matrix: at most `max_cases` admitted, every other entry refused with why.

    `rules` is base's manifest (None for a new kernel). An admitted case is judged by the manifest's constraints
    (no tolerance of its own) with the dtype [agent_cases] names, else that of the first case on its device."""
    if not proposed:
        return AgentAdmission()
    if rules is None:
        return AgentAdmission(proposed=len(proposed), note=NEW_KERNEL)
    bounds = rules.agent_cases
    if bounds is None:
        return AgentAdmission(proposed=len(proposed), note=NO_TABLE)
    out = AgentAdmission(proposed=len(proposed))
    taken = {c.name for c in rules.cases}
    dtype: str = bounds.dtype or next(c.dtype for c in rules.cases if c.device == bounds.device)
    for entry in proposed:
        why = entry_problem(entry, bounds, taken)
        if why is None and len(out.cases) >= bounds.max_cases:
            why = Phrase(key="agent.over_max", params={"max": bounds.max_cases})
        if why is None:
            why = _resolvable(rules, entry, dtype)
        if why is not None:
            out.refused.append(refusal(_shown(entry.name), why))
            continue
        taken.add(entry.name)
        out.cases.append(AdmittedCase.model_validate(agent_case(entry, bounds, dtype).model_dump(include=_RUN_KEYS)))
    return out


_RUN_KEYS = {"name", "device", "dtype", "shape", "params"}


def agent_case(entry: ProposedCase, bounds: AgentCases, dtype: str) -> Case:
    return Case.model_validate(
        {"name": entry.name, "device": bounds.device, "dtype": dtype, "shape": entry.shape, "params": entry.params}
    )


def as_case(admitted: AdmittedCase) -> Case:
    """An admitted case as the judge runs it (a manifest case without a tolerance, seed or work of its own)."""
    return Case.model_validate(admitted.model_dump())


def cases(admission: AgentAdmission) -> list[Case]:
    """The admitted cases, in the reply's order, as manifest cases (what the review runs and the gate judges)."""
    return [as_case(c) for c in admission.cases]


def refusal(name: str, why: Phrase) -> AgentCaseRefusal:
    """A refused entry and why, a message of the catalog (rendered in the reader's locale)."""
    return AgentCaseRefusal(name=name, reason=why)


def _resolvable(rules: KernelManifest, entry: ProposedCase, dtype: str) -> Phrase | None:
    """Why the judge could not allocate the entry's output arguments over its shape, or None."""
    assert rules.agent_cases is not None
    try:
        rules.written(agent_case(entry, rules.agent_cases, dtype))
    except ValueError as exc:
        return Phrase(key="agent.unresolved", params={"error": one_line(exc, 200)})
    return None


# The labels of latency's and plausibility's messages: on an agent case they are reported, never among its reasons.
_REPORTED = frozenset({"performance", "performance_inconclusive", "performance_not_judged", "implausible",
                      "implausible_speedup"})  # fmt: skip


def _reported(finding: Finding) -> bool:
    """Whether the agent case's finding is latency or plausibility (shown beside it, deciding nothing)."""
    return MESSAGES.get(finding.key, (None, ""))[0] in _REPORTED


def stated_reasons(c: AgentCaseReport) -> list[Finding]:
    """The agent case's reasons as findings the outputs render: its case's findings that count (not latency or
    plausibility), then why base fails too, a `verbatim` finding of its English (the comment looks it up in the
    catalog), then each line of a report before these fields that none of them was rendered to, as written."""
    found = [f for f in c.case.findings if not _reported(f)]
    if c.base_fails is not None:
        found.append(verbatim(BASE_FAILS_WHY[c.base_fails], Gate.correctness, Outcome.note, case=c.name))
    rendered = {render(f, case=False) for f in found}
    made = [verbatim(r, Gate.correctness, Outcome.note, case=c.name) for r in c.reasons if r not in rendered]
    return [*found, *made]


def judged(case: Case, report: CaseReport, *, base_built: bool) -> AgentCaseReport:
    """One agent case's verdict from the judge's report: head wrong where base is right fails the change; where base is
    wrong too (or is the same build, or does not build) it is "base fails too"; latency is reported, never gated."""
    head_wrong = report.status == CaseStatus.incorrect
    head_broke = report.status in (CaseStatus.crashed, CaseStatus.timeout, CaseStatus.tampered)
    same_build = report.stop_reason == "identical_build"
    base_fails = report.base_correct is False or same_build or not base_built
    verdict: AgentCaseVerdict
    if report.status in (CaseStatus.skipped, CaseStatus.compile_fail):
        verdict = "not_judged"
    elif head_wrong or (head_broke and report.base_correct is not None):
        verdict = "base_fails" if base_fails else "fail"
    elif head_broke:  # the reference (or the runner) failed before either side was checked
        verdict = "base_fails" if same_build else "not_judged"
    else:
        verdict = "pass"
    why = ("same" if same_build else "unbuilt" if not base_built else "wrong") if verdict == "base_fails" else None
    return AgentCaseReport(
        name=case.name, shape=dict(case.shape), params=dict(case.params), verdict=verdict, base_fails=why,
        case=report.model_copy(update={"base_drift_pct": None}),
    )  # fmt: skip


def report(agent: str, admission: AgentAdmission, judged: list[AgentCaseReport]) -> AgentCasesReport:
    return AgentCasesReport(
        agent=agent, proposed=admission.proposed, cases=judged, refused=admission.refused, note=admission.note
    )  # fmt: skip


def fold(kernel: KernelReport) -> KernelReport:
    """An agent case that head fails where base passes fails the kernel (one reason each); nothing else changes: an
    agent case never passes, excuses or loosens what the manifest's cases decided."""
    block = kernel.agent_cases
    failed = [c for c in block.cases if c.verdict == "fail"] if block is not None else []
    if block is None or not failed:
        return kernel
    for c in failed:
        named = f"agent case {c.name} (proposed by {block.agent})"
        # the case's own failing findings, named as the agent's case: "correctness: agent case tail_15 (…) …"
        found = [f for f in c.case.findings if f.outcome in (Outcome.fail, Outcome.error)]
        if not found:
            found = [f.model_copy(update={"outcome": Outcome.fail}) for f in stated_reasons(c)]
        if not found:
            found = [verbatim(f"fail: {c.case.status.value}", Gate.correctness, Outcome.fail)]
        for f in found:
            add_kernel(kernel, f.model_copy(update={"case": named}))
    if kernel.verdict != "error":
        kernel.verdict = "fail"
    return kernel
