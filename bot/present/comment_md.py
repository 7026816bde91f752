"""Markdown pieces of the PR comment (pure, each made comment-safe here): headline lines, table cells, charts."""

from __future__ import annotations

import json
import re
from typing import Any

from bot.models.cost import CpuUse
from bot.models.report import Build, CaseReport, CaseStatus, KernelReport, RunnerHealth
from bot.present.digest import STOP_REASONS, Counts, KernelView, Line, undecided_summary
from bot.text.i18n import N_
from bot.text.i18n import gettext as _
from bot.text.safe import Safe, code, untrusted

ICONS = {
    "pass": "✅",
    "fail": "❌",
    "error": "⚠️",
    "skipped": "⏭️",
    "inconclusive": "❔",
    "undecided": "❔",
    "needs_accept": "🔶",
}
# What a verdict says after the kernel's name in the headline and its section.
VERDICT_WORDS = {
    "pass": N_("passes every gate"),
    "fail": N_("fails a gate"),
    "error": N_("could not be judged"),
    "skipped": N_("had no case to run"),
    "undecided": N_("is undecided: not everything it changes was judged"),
    "needs_accept": N_("needs /accept: nothing failed, but only a person can accept it"),
}
# A verdict's own word (headings, tables); report.json keeps the enum's value.
VERDICT_LABELS = {
    "pass": N_("pass"),
    "fail": N_("fail"),
    "error": N_("error"),
    "skipped": N_("skipped"),
    "inconclusive": N_("inconclusive"),
    "undecided": N_("undecided"),
    "needs_accept": N_("needs accept"),
}


def verdict_label(verdict: str) -> Safe:
    return Safe(_(VERDICT_LABELS[verdict]) if verdict in VERDICT_LABELS else untrusted(verdict))


def verdict_words(k: KernelReport) -> Safe:
    """What a kernel's verdict says after its name: "is undecided: latency undecided on 2 cases" where counted."""
    summary = undecided_summary(k) if k.verdict == "undecided" else ""
    return Safe(_("is undecided: %(why)s", why=summary) if summary else _(VERDICT_WORDS[k.verdict]))


def num(x: float | None, digits: int = 3) -> str:
    return "—" if x is None else f"{x:.{digits}g}"


# -- the headline -------------------------------------------------------------------------------------------


def evidence(ln: Line, single: bool = False) -> Safe:
    """A headline line (failing, needs /accept, undecided): icon, kernel (when there are several), **gate**, `case`,
    the measured value and the limit."""
    kernel = "" if single else f"`{code(ln.kernel)}` · "
    gate = f"**{untrusted(ln.gate)}** " if ln.gate else ""
    case = (f"`{code(ln.case)}`" + ("" if ln.gate else ":") + " ") if ln.case else ""
    return Safe(f"{ICONS[ln.verdict]} {kernel}{gate}{case}{untrusted(ln.text)}")


_TALLY = (
    ("fail", N_("%(num)s of %(total)s kernels fails a gate"), N_("%(num)s of %(total)s kernels fail a gate"),
     N_("%(num)s fails a gate"), N_("%(num)s fail a gate")),
    ("error", N_("%(num)s of %(total)s kernels could not be judged"),
     N_("%(num)s of %(total)s kernels could not be judged"),
     N_("%(num)s could not be judged"), N_("%(num)s could not be judged")),
    ("needs_accept", N_("%(num)s of %(total)s kernels needs /accept"), N_("%(num)s of %(total)s kernels need /accept"),
     N_("%(num)s needs /accept"), N_("%(num)s need /accept")),
    ("undecided", N_("%(num)s of %(total)s kernels is undecided"), N_("%(num)s of %(total)s kernels are undecided"),
     N_("%(num)s is undecided"), N_("%(num)s are undecided")),
)  # fmt: skip


def tally(t: dict[str, int], total: int) -> Safe:
    """ "1 of 3 kernels fails a gate, 1 needs /accept, 1 is undecided" (the kernels that did not pass)."""
    parts: list[str] = []
    for verdict, first_one, first_many, one, many in _TALLY:
        if t.get(verdict):
            n = t[verdict]
            first = first_one if n == 1 else first_many  # each form its own message: the parts read as a list
            parts.append(_(first, num=n, total=total) if not parts else _(one if n == 1 else many, num=n))
    return Safe(_(", ").join(parts))


def counts(n: Counts) -> Safe:
    """ "2 ran · 🚀 1 faster · 🐢 1 slower · ➖ 0 unchanged · ❌ 1 failed · ⏭️ 7 not run" (zero failures left out)."""
    parts = [_("%(n)s ran", n=n.ran)]
    if n.ran:
        parts += [_("🚀 %(n)s faster", n=n.faster), _("🐢 %(n)s slower", n=n.slower),
                  _("➖ %(n)s unchanged", n=n.unchanged)]  # fmt: skip
    for value, label in ((n.failed, N_("❌ %(n)s failed")), (n.errors, N_("⚠️ %(n)s error")),
                         (n.inconclusive, N_("❔ %(n)s undecided")), (n.not_run, N_("⏭️ %(n)s not run"))):  # fmt: skip
        if value:
            parts.append(_(label, n=value))
    return Safe(" · ".join(parts))


def built(b: Build | None, label: str) -> Safe:
    """ "head cpu ok 12.3 s", "base cpu ok (cached)", "head cuda **failed** 3.1 s"."""
    if b is None:
        return Safe("")
    took = _("(cached)") if b.cached else f"{b.seconds:.1f} s"
    outcome = _("ok") if b.ok else _("**failed**")
    return Safe(f"{label} {b.device} {outcome} {took}")


# -- the case table: one cell per gate, the failing one marked ---------------------------------------------


def err_cell(c: CaseReport) -> Safe:
    """Correctness and stability: `max_abs_err ≤ tolerance`, or what failed, in bold with ❌."""
    if c.status in (CaseStatus.crashed, CaseStatus.timeout, CaseStatus.tampered):
        return Safe(f"⚠️ {c.status.value}")
    if c.nan_inf:
        return Safe("**NaN/Inf** ❌")
    if c.max_abs_err is not None and c.max_abs_err > c.tolerance:
        return Safe(f"**{num(c.max_abs_err)}** > {num(c.tolerance)} ❌")
    if c.status == CaseStatus.incorrect:
        return Safe(_("**wrong output** ❌ (%(err)s ≤ %(tol)s)", err=num(c.max_abs_err), tol=num(c.tolerance)))
    return Safe("—" if c.max_abs_err is None else f"{num(c.max_abs_err)} ≤ {num(c.tolerance)}")


def _ci(c: CaseReport) -> str:
    low, high = c.ci95_pct or (0.0, 0.0)
    return f"({low:+.2f}..{high:+.2f})"


def delta_cell(c: CaseReport) -> Safe:
    """Δp50 with its 95% CI; the regression that failed in bold with ❌ and the limit; ❔ when it straddles."""
    if c.regression_pct is None or not c.ci95_pct:
        if c.stop_reason in ("identical_build", "no_base"):
            return Safe(_(STOP_REASONS[c.stop_reason]))
        if c.p50_ms is not None:
            return Safe(_("no base to compare"))
        return Safe(_("not timed") if c.status == CaseStatus.ok else _("not timed: %(why)s", why=c.status.value))
    limit = f" > {c.max_regression_pct:g}%" if c.max_regression_pct is not None else ""
    cpu = cpu_part(c)
    ratio = c.simulated.ratio if c.simulated is not None else None  # reported beside p50, never decides
    beside = cpu + (" · " + _("simulated x%(ratio)s", ratio=format(ratio, ".3f")) if ratio is not None else "")
    wall_failed = c.max_regression_pct is not None and c.ci95_pct[0] > c.max_regression_pct
    if (
        c.verdict == "fail"
        and c.status == CaseStatus.ok
        and wall_failed
        and any(f.key == "performance.regression" for f in c.findings)
    ):
        return Safe(f"**{c.regression_pct:+.2f}%** {_ci(c)} ❌{limit}{beside}")
    mark = " ❔" if c.verdict == "inconclusive" else ""
    return Safe(f"{c.regression_pct:+.2f}% {_ci(c)}{mark}{beside}")


def cpu_part(c: CaseReport) -> str:
    """ " · CPU +12.10% (+10.90..+13.30)": a CPU case's Δ CPU time per call beside Δ p50, in bold with ❌ and the
    limit where it failed the case (every thread of the sandbox counted, bot/verdict/gate_latency.py)."""
    if c.cpu_regression_pct is None or not c.cpu_ci95_pct:
        return ""
    low, high = c.cpu_ci95_pct
    limit, wall = c.max_regression_pct, c.ci95_pct
    if c.verdict == "pass" and limit is not None and wall is not None and wall[0] <= limit < wall[1] and high <= limit:
        shown = f"{limit:g}"
        decided = _("decided: p50 straddled %(limit)s%%", limit=shown)
        return f" · **CPU {c.cpu_regression_pct:+.2f}%** ({low:+.2f}..{high:+.2f}) ✅ {decided}"
    if c.verdict == "fail" and c.max_regression_pct is not None and low > c.max_regression_pct:
        return f" · **CPU {c.cpu_regression_pct:+.2f}%** ({low:+.2f}..{high:+.2f}) ❌ > {c.max_regression_pct:g}%"
    return f" · CPU {c.cpu_regression_pct:+.2f}% ({low:+.2f}..{high:+.2f})"


def stop(c: CaseReport) -> str:
    words = _(STOP_REASONS[c.stop_reason]) if c.stop_reason in STOP_REASONS else (c.stop_reason or "—")
    return words + (_(", re-measured in fresh processes") if c.attempts > 1 else "")


def cpu(use: CpuUse | None) -> str:
    """CPU seconds a side's sandbox used in its timed calls, the wall time of those calls, and CPU outside them."""
    if use is None or not (use.timed_wall_s or use.timed_cpu_s or use.untimed_cpu_s):
        return "—"
    return f"{use.timed_cpu_s:.2f} / {use.timed_wall_s:.2f} / {use.untimed_cpu_s:.2f}"


def runner(h: RunnerHealth | None) -> str:
    """The machine while it measured, in one line."""
    if h is None:
        return _("not recorded")
    parts = [_("%(n)s cores", n=h.cores)]
    parts += [_("load %(load)s", load=format(h.load1, "g"))] if h.load1 is not None else []
    parts += [_("governor %(governor)s", governor=h.governor)] if h.governor else []
    parts += [f"{h.cpu_mhz:g} MHz"] if h.cpu_mhz else []
    if h.gpu_sm_mhz is not None:
        parts.append(_("GPU SM %(sm)s MHz, memory %(mem)s MHz, %(temp)s °C", sm=h.gpu_sm_mhz, mem=h.gpu_mem_mhz,
                       temp=h.gpu_temp_c))  # fmt: skip
        throttle = ", ".join(h.gpu_throttle)
        parts.append(_("throttled: %(why)s", why=throttle) if h.gpu_throttle else _("not throttled"))
        parts += [_("%(n)s other GPU process(es)", n=h.gpu_other_processes)] if h.gpu_other_processes else []
    return _(", ").join(parts)


def names(items: list[str], limit: int = 10) -> Safe:
    """Names as code spans, the first `limit` of them, the rest counted."""
    shown = ", ".join(f"`{code(n)}`" for n in items[:limit])
    return Safe(shown + (_(" and %(n)s more", n=len(items) - limit) if len(items) > limit else ""))


def clip(text: str, chars: int, keep: str = "tail") -> str:
    """At most `chars` characters of a log (its end) or a patch (its start), whole lines, the cut said."""
    if len(text) <= chars:
        return text
    lines = text.splitlines()
    kept: list[str] = []
    used = 0
    for line in reversed(lines) if keep == "tail" else lines:
        if used + len(line) + 1 > chars:
            break
        kept.append(line)
        used += len(line) + 1
    cut = _("[… %(n)s more line(s) in report.json]", n=len(lines) - len(kept))
    return "\n".join([cut, *reversed(kept)]) if keep == "tail" else "\n".join([*kept, cut])


# -- mermaid charts (GitHub renders ```mermaid blocks in comments and job summaries) ------------------------

_LABEL = re.compile(r"[A-Za-z0-9_.+-]{1,28}")
# The chart draws its own light background, so the bar that masks each interval's lower part (and the text) reads
# the same in GitHub's light and dark modes. Bars rise from the axis floor, overlapping in the order given.
_LIGHT = {
    "backgroundColor": "#ffffff",
    "titleColor": "#1f2328",
    "xAxisLabelColor": "#1f2328",
    "xAxisTitleColor": "#1f2328",
    "xAxisTickColor": "#59636e",
    "xAxisLineColor": "#59636e",
    "yAxisLabelColor": "#1f2328",
    "yAxisTitleColor": "#1f2328",
    "yAxisTickColor": "#59636e",
    "yAxisLineColor": "#59636e",
}


def _init(palette: list[str], height: int) -> str:
    config = {
        "xyChart": {"height": height},
        "themeVariables": {"xyChart": {**_LIGHT, "plotColorPalette": ", ".join(palette)}},
    }
    return "%%{init: " + json.dumps(config) + "}%%"


def _label(name: str, i: int) -> str:
    """A mermaid axis label: the case name when it is plain and short, else its position (never untrusted syntax)."""
    return name if _LABEL.fullmatch(name) else _("case %(n)s", n=i + 1)


def _axis(values: list[float]) -> tuple[float, float]:
    low, high = min(values), max(values)
    pad = max(0.5, (high - low) * 0.1)
    return float(f"{low - pad:.2f}"), float(f"{high + pad:.2f}")


def delta_chart(view: KernelView) -> Safe:
    """Δp50 per case as a floating bar over its 95% CI (dark up to the measured Δp50, light above it) against the
    ±limit band (red lines), as mermaid: the gate fails a case whose whole bar lies above the upper line."""
    bars, limit = view.bars, view.limit_pct
    values = [v for b in bars for v in (b.low, b.high, b.delta)] + ([limit, -limit] if limit is not None else [])
    low, high = _axis(values)
    labels = ", ".join(f'"{_label(b.label, i)}"' for i, b in enumerate(bars))
    series = [("bar", [b.high for b in bars]), ("bar", [b.delta for b in bars]), ("bar", [b.low for b in bars])]
    palette = ["#9ec5fe", "#0969da", "#ffffff"]  # CI above Δp50, CI below it, the mask under the CI
    if limit is not None:
        series += [("line", [limit] * len(bars)), ("line", [-limit] * len(bars))]
        palette += ["#cf222e", "#cf222e"]
    lines = [
        _init(palette, 320),
        "xychart-beta",
        '    title "' + _("Δ p50 vs base (%%): 95%% CI, shade changes at the measured value") + '"',
        f"    x-axis [{labels}]",
        f'    y-axis "Δ p50 (%)" {low:g} --> {high:g}',
    ]
    lines += [f"    {kind} [" + ", ".join(f"{v:.2f}" for v in values) + "]" for kind, values in series]
    return Safe("\n".join(lines))


def spend_chart(spend: list[Any]) -> Safe:
    """This week's spend of each budgeted domain in % of its budget (bars) against 100 % (a line), as mermaid."""
    rows = [d for d in spend if d.week_budget]
    used = [100.0 * (d.week_used or 0) / d.week_budget for d in rows]
    labels = ", ".join(f'"{_label(d.domain, i)}"' for i, d in enumerate(rows))
    return Safe(
        "\n".join(
            [
                _init(["#0969da", "#cf222e"], 120 + 50 * len(rows)),
                "xychart-beta horizontal",
                '    title "' + _("Tokens this week, all PRs, in %% of the weekly budget") + '"',
                f"    x-axis [{labels}]",
                '    y-axis "' + _("%% of the weekly budget") + f'" 0 --> {max(110.0, max(used) * 1.1):.0f}',
                "    bar [" + ", ".join(f"{u:.1f}" for u in used) + "]",
                "    line [" + ", ".join(["100"] * len(rows)) + "]",
            ]
        )
    )


def pick(cases: list[CaseReport], n: int) -> list[CaseReport]:
    """At most `n` cases in their order: those that did not pass first, then the largest latency changes."""
    if len(cases) <= n:
        return cases
    rank = sorted(range(len(cases)), key=lambda i: (cases[i].verdict == "pass", -abs(cases[i].regression_pct or 0)))
    keep = set(rank[:n])
    return [c for i, c in enumerate(cases) if i in keep]
