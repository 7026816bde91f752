"""The reviewer's digest of a report (pure): the failing lines, the counts, what did not run, chart data, plain text."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from bot.models.finding import Finding, Gate, Outcome
from bot.models.report import VERDICT_ORDER, CaseReport, CaseStatus, KernelReport, Report
from bot.text.i18n import N_, ngettext
from bot.text.i18n import gettext as _
from bot.verdict.findings import case_stated, stated
from bot.verdict.names import short_names
from bot.wording import messages, spoken

HEADLINE_LINES = 10  # failing lines in the headline; the rest are listed under their kernel
NOT_RUN_STATUSES = (CaseStatus.skipped, CaseStatus.compile_fail)
STOP_REASONS = {  # report.json stop_reason -> what a reviewer reads (message ids: translated where shown)
    "decided": N_("decided early: the 99.9%% interval cleared the limit"),
    "decided_cpu": N_("decided early: the CPU time's 99.9%% interval cleared the limit"),
    "precision": N_("precise: the 95%% interval is narrow enough"),
    "max_processes": N_("cap: processes"),
    "max_samples": N_("cap: samples"),
    "max_seconds": N_("cap: time"),
    "no_base": N_("no base to compare"),
    "identical_build": N_("identical build: not timed"),
}


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True)


LineVerdict = Literal["fail", "error", "needs_accept", "undecided"]


class Line(_Model):
    """One reason a kernel fails, needs a person's /accept or is undecided: its gate, kernel, case and the text."""

    kernel: str
    case: str | None = None
    gate: str | None = None
    text: str
    verdict: LineVerdict


class NotRun(_Model):
    """Cases that did not run for one reason ("needs a CUDA GPU; this machine has none")."""

    reason: str
    devices: list[str]
    names: list[str]


class Counts(_Model):
    """Cases of the changed kernels: how many ran and what latency did (CI against 0), failed, or did not run."""

    cases: int = 0
    ran: int = 0
    failed: int = 0
    errors: int = 0
    faster: int = Field(0, description="the whole 95% CI of Δp50 below 0")
    slower: int = Field(0, description="the whole 95% CI of Δp50 above 0")
    unchanged: int = Field(0, description="the 95% CI of Δp50 holds 0 and the case was decided")
    inconclusive: int = 0
    not_run: int = 0


class Bar(_Model):
    """One case in the Δp50 chart."""

    label: str
    delta: float
    low: float
    high: float


class KernelView(_Model):
    kernel: KernelReport
    ran: list[CaseReport]
    not_run: list[NotRun]
    lines: list[Line] = Field(description="the kernel's lines (failing, needs /accept, undecided) not in the headline")
    case_notes: list[Line] = Field(description="reasons of cases that passed (base incorrect: latency not compared)")
    notes: list[str]
    stats_notes: list[str]
    resource_notes: list[str]
    counts: Counts
    mixed_devices: bool
    mixed_arches: bool = Field(False, description="cases ran on more than one GPU architecture (a merged fan-out)")
    stats_open: bool
    resources_open: bool
    bars: list[Bar]
    bars_of: int = Field(description="cases with a CI; bars holds at most MAX_BARS of them")
    limit_pct: float | None


class Digest(_Model):
    lines: list[Line]
    more: int = Field(description="failing lines left out of the headline")
    counts: Counts
    not_run: list[NotRun]
    kernels: list[KernelView]
    unchanged: list[str]
    single: bool = Field(description="one kernel section: lines need not name the kernel")
    tally: dict[str, int] = Field(description="kernel sections per verdict")


MAX_BARS = 30


NOT_RUN = Finding(gate=Gate.run, outcome=Outcome.undecided, key="run.not_run")


def not_run_groups(cases: Iterable[CaseReport]) -> list[NotRun]:
    """Cases that did not run, one group per reason (the same findings), in order of first appearance; the reason
    in the reader's locale."""
    groups: dict[tuple[str, ...], tuple[list[str], list[str]]] = {}
    shown: dict[tuple[str, ...], str] = {}
    for c in cases:
        if c.status in NOT_RUN_STATUSES:
            found = [f.model_copy(update={"case": None}) for f in case_stated(c)]
            reason = tuple(repr(f.model_dump()) for f in found)  # a key (JSON refuses a lone surrogate)
            devices, names = groups.setdefault(reason, ([], []))
            shown.setdefault(reason, "; ".join(spoken.render(f) for f in found) or spoken.text(NOT_RUN))
            names.append(c.name)
            if c.device not in devices:
                devices.append(c.device)
    return [NotRun(reason=shown[r], devices=d, names=n) for r, (d, n) in groups.items()]


def count(cases: Iterable[CaseReport]) -> Counts:
    n = dict.fromkeys(Counts.model_fields, 0)
    for c in cases:
        n["cases"] += 1
        if c.status in NOT_RUN_STATUSES:
            n["not_run"] += 1
            continue
        n["ran"] += 1
        n["failed"] += c.verdict == "fail"
        n["errors"] += c.verdict == "error"
        n["inconclusive"] += c.verdict == "inconclusive"
        if c.verdict == "inconclusive":
            continue  # undecided: neither faster, slower nor unchanged
        if c.ci95_pct and len(c.ci95_pct) == 2:
            low, high = c.ci95_pct
            key = "faster" if high < 0 else "slower" if low > 0 else "unchanged"
            n[key] += 1
    return Counts(**n)


_KIND = {Outcome.error: "error", Outcome.accept: "needs_accept", Outcome.undecided: "undecided"}
_FAILING = (Outcome.fail, Outcome.error)


def kernel_lines(k: KernelReport) -> list[Line]:
    """The kernel's findings as lines in the reader's locale, the worst first: why it fails (or could not be judged),
    why it needs a person's /accept, what was not decided. Gate, case and kind are the finding's."""
    said = stated(k)
    short = short_names(sorted(_functions(k)))
    failing = [f for f in said if f.outcome in _FAILING] if k.verdict in ("fail", "error") else []
    accept = [f for f in said if f.outcome == Outcome.accept]
    undecided = [f for f in said if f.outcome == Outcome.undecided]
    lines = []
    for verdict, found in ((k.verdict, failing), ("needs_accept", accept), ("undecided", undecided)):
        for f in found:
            kind = verdict if f.case is None else _KIND.get(f.outcome, "fail")
            body = spoken.text(f) if f.case else shorten(spoken.text(f), short)
            lines.append(Line(kernel=k.name, case=f.case, gate=spoken.label(f), text=body, verdict=kind))  # type: ignore[arg-type]
    return lines


def undecided_summary(k: KernelReport) -> str:
    """What was left undecided: "latency undecided on 2 cases; not everything it changes was run" ("" for nothing)."""
    latency = [c for c in k.cases if c.verdict == "inconclusive"]
    names = {c.name for c in latency}
    parts = [ngettext("latency undecided on %(num)s case", "latency undecided on %(num)s cases", len(latency))]
    parts = parts if latency else []
    if launches := list(dict.fromkeys(s for c in k.resource_checks() for s in c.launch_unmeasured)):
        more = _(" and %(n)s more", n=len(launches) - 1) if len(launches) > 1 else ""  # the status keeps 140 chars
        parts.insert(0, _("launch figures declared, not measured: %(first)s%(more)s", first=launches[0], more=more))
    if any(f.case not in names for f in stated(k) if f.outcome == Outcome.undecided):
        parts.append(_("not everything it changes was run"))
    return _("; ").join(parts)


def _unplaced(f: Finding) -> str:
    """A finding without its kernel and outcome: a case's finding as its kernel states it, whatever it did there (a
    key: its fields' repr, not JSON, which refuses a lone surrogate in hostile text)."""
    return repr(f.model_copy(update={"kernel": None, "outcome": Outcome.note}).model_dump())


def _case_notes(k: KernelReport, taken: set[str]) -> list[Line]:
    """Findings of cases that passed and that the kernel does not state (base incorrect: latency not compared)."""
    lines = []
    for c in k.cases:
        if c.verdict != "pass" or c.status in NOT_RUN_STATUSES:
            continue
        for f in case_stated(c):
            if _unplaced(f) in taken:
                continue
            lines.append(
                Line(kernel=k.name, case=c.name, gate=spoken.label(f), text=spoken.text(f), verdict="undecided")
            )
    return lines


def shorten(text: str, short: dict[str, str]) -> str:
    """`text` with every long function name it mentions in its short form (longest names first)."""
    for name in sorted(short, key=len, reverse=True):
        if short[name] != name and name in text:
            text = text.replace(name, short[name])
    return text


def _functions(k: KernelReport) -> set[str]:
    names = {r.function for b in (k.build, k.base_build) if b for r in b.resources}
    for check in k.resource_checks():
        names |= {r.function for r in (*check.head, *check.base)}
    return names


def _sort_notes(k: KernelReport) -> tuple[list[str], list[str], list[str]]:
    """(notes, statistics notes, resource notes): each note shown once, beside what it is about."""
    functions = _functions(k)
    short = short_names(sorted(functions))
    launch = {messages.phrase(n) for check in k.resource_checks() for n in check.launch_notes}
    drift = tuple(f"{c.name}: base measured " for c in k.cases)
    notes: list[str] = []
    stats: list[str] = []
    resources: list[str] = []
    for f in stated(k):
        if f.outcome != Outcome.note:
            continue
        shown = spoken.render(f)  # in the reader's locale (a line made elsewhere: as written)
        if f.key == "text":  # a line made outside the gates sits where what it says puts it (the drift, a function)
            line = str(f.params["text"])
            drifted, about_resources = line.startswith(drift), line in launch or line.split(": ", 1)[0] in functions
        else:
            drifted, about_resources = f.key == "performance.base_drift", f.key.startswith("resources.")
        if drifted and drift:
            stats.append(shown)
        elif about_resources:
            resources.append(shorten(shown, short))
        else:
            notes.append(shown)
    return notes, stats, resources


def _bars(ran: list[CaseReport]) -> tuple[list[Bar], int]:
    timed = [c for c in ran if c.regression_pct is not None and c.ci95_pct and len(c.ci95_pct) == 2]
    shown = sorted(timed, key=lambda c: -abs(c.regression_pct or 0.0))[:MAX_BARS]
    keep = {id(c) for c in shown}
    bars = [
        Bar(label=c.name, delta=c.regression_pct or 0.0, low=c.ci95_pct[0], high=c.ci95_pct[1])  # type: ignore[index]
        for c in timed
        if id(c) in keep
    ]
    return bars, len(timed)


def kernel_view(k: KernelReport, headline: set[tuple[str, str | None, str]]) -> KernelView:
    ran = [c for c in k.cases if c.status not in NOT_RUN_STATUSES]
    lines = [ln for ln in kernel_lines(k) if (ln.kernel, ln.case, ln.text) not in headline]
    taken = {_unplaced(f) for f in stated(k) if f.outcome != Outcome.note}
    notes, stats, resources = _sort_notes(k)
    resource_failed = any(f.key.startswith("resources.") and f.outcome in (Outcome.fail, Outcome.error)
                          for f in k.findings)  # fmt: skip
    latency_decides = any(c.verdict in ("fail", "inconclusive") and c.status == CaseStatus.ok for c in ran)
    bars, timed = _bars(ran)
    limits = {c.max_regression_pct for c in ran if c.max_regression_pct is not None}
    return KernelView(
        kernel=k,
        ran=ran,
        not_run=not_run_groups(k.cases),
        lines=lines,
        case_notes=_case_notes(k, taken),
        notes=notes,
        stats_notes=stats,
        resource_notes=resources,
        counts=count(k.cases),
        mixed_devices=len({c.device for c in ran}) > 1,
        mixed_arches=len({c.arch for c in ran if c.arch}) > 1,
        stats_open=latency_decides or any(c.status == CaseStatus.tampered for c in ran),
        resources_open=resource_failed,
        bars=bars if timed >= 2 else [],
        bars_of=timed,
        limit_pct=limits.pop() if len(limits) == 1 else None,
    )


def shown(k: KernelReport) -> bool:
    """Whether the kernel gets its own section: it changed, or it failed anyway (a broken manifest, a lost part)."""
    return k.changed or k.verdict in ("fail", "error")


_SEVERITY = {"error": 0, "fail": 0, "needs_accept": 1, "undecided": 2}


def digest(report: Report, headline_lines: int = HEADLINE_LINES) -> Digest:
    kernels = [k for k in report.kernels if shown(k)]
    every = sorted((ln for k in kernels for ln in kernel_lines(k)), key=lambda ln: _SEVERITY[ln.verdict])
    top = every[:headline_lines]
    keys = {(ln.kernel, ln.case, ln.text) for ln in top}
    cases = [c for k in kernels for c in k.cases]
    return Digest(
        lines=top,
        more=len(every) - len(top),
        counts=count(cases),
        not_run=not_run_groups(cases),
        kernels=[kernel_view(k, keys) for k in kernels],
        unchanged=[k.name for k in report.kernels if not shown(k)],
        single=len(kernels) == 1,
        tally={v: sum(k.verdict == v for k in kernels) for v in VERDICT_ORDER},
    )


# -- plain text (terminals, logs) -------------------------------------------------------------------------


def line_text(line: Line, *, kernel: bool = True) -> str:
    """A failing line as plain text: "deepgemm_tile: performance: ragged_200x328x264 p50 +10.53% (…) > 3% limit"."""
    where = f"{line.kernel}: " if kernel else ""
    if line.case is None:
        return f"{where}{line.gate}: {line.text}" if line.gate else f"{where}{line.text}"
    return f"{where}{line.gate}: {line.case} {line.text}" if line.gate else f"{where}{line.case}: {line.text}"


def counts_text(n: Counts, not_run: list[NotRun]) -> str:
    """ "9 cases: 2 ran (1 faster, 1 slower, 0 unchanged), 1 failed, 7 not run (7 cuda: needs a CUDA GPU …)"."""
    if not n.cases:
        return "no case"
    parts = [f"{n.ran} ran" + (f" ({n.faster} faster, {n.slower} slower, {n.unchanged} unchanged)" if n.ran else "")]
    parts += [f"{v} {label}" for v, label in ((n.failed, "failed"), (n.errors, "error"), (n.inconclusive,
              "undecided")) if v]  # fmt: skip
    if n.not_run:
        why = "; ".join(f"{len(g.names)} {'/'.join(g.devices)}: {g.reason}" for g in not_run)
        parts.append(f"{n.not_run} not run ({why})")
    return f"{n.cases} case{'s' if n.cases != 1 else ''}: " + ", ".join(parts)


PLAIN = {"fail": "fail", "error": "error", "needs_accept": "needs /accept", "undecided": "undecided"}


def plain(report: Report) -> list[str]:
    """What `opgate review` prints after its verdict: warnings, failing lines, counts (one_line them to print)."""
    d = digest(report, headline_lines=len(report.kernels) * 1000)
    out = []
    if report.isolation is not None and report.isolation.mode == "none":
        why = report.isolation.reason
        out.append(f"warning: isolation none, PR code ran without a sandbox ({messages.phrase(why) if why else ''})")
    for ln in d.lines:
        out.append(f"{PLAIN[ln.verdict]}: {line_text(ln)}")
    if d.kernels:
        out.append(counts_text(d.counts, d.not_run))
    return out
