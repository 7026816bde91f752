"""The comment's per-architecture resource blocks and its throughput cells (pure)."""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict

from bot.models.finding import Gate, Outcome
from bot.models.report import CaseReport, KernelReport, Resource, ResourceCheckReport
from bot.text import i18n
from bot.verdict.gate_resources import match_base
from bot.verdict.throughput import peak_pct
from bot.wording import spoken

_COMPARED = ("registers", "spill_bytes", "smem_bytes", "dynamic_smem_bytes", "stack_bytes")


class ArchBlock(BaseModel):
    """One architecture's resource table: head's functions, base's, and whether the block opens."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    arch: str
    check: ResourceCheckReport | None
    head: list[Resource]
    base: list[Resource]
    notes: list[str]
    failed: bool  # a failing (or undecided) line of the kernel is about this architecture
    changed: bool  # head's resources differ from base's here, or the check did not run normally
    named: bool  # the kernel ships for several architectures: say which this is, changed or not


def _changed(head: list[Resource], base: list[Resource], check: ResourceCheckReport | None) -> bool:
    """Anything a reviewer should look at: the check did not run normally, base has nothing to compare (a new
    kernel, base does not compile), a function came or went, or a figure of one differs from base's."""
    if check is not None and (check.status != "ok" or check.base_status != "ok"):
        return True
    matched = match_base(head, base)
    if len(matched) != len(head) or len(head) != len(base):
        return True
    for r in head:
        b = matched[r.function]
        if any(getattr(r, f) != getattr(b, f) for f in _COMPARED):
            return True
        if (r.occupancy.warps_per_sm if r.occupancy else None) != (b.occupancy.warps_per_sm if b.occupancy else None):
            return True
    return False


def _about(text: str, arch: str) -> bool:
    return re.search(rf"(?<![\w]){re.escape(arch)}(?![\w])", text) is not None


def arch_blocks(k: KernelReport, resource_notes: list[str]) -> list[ArchBlock]:
    """One block per architecture the resource check ran for (the first architecture's functions from the
    build where the review kept them there). With one architecture its block holds every resource note and
    every resource reason opens it; with several each note and reason goes to the architecture it names."""
    checks = k.resource_checks()
    named = len(checks) > 1
    opens = (Outcome.fail, Outcome.error, Outcome.undecided)
    failing = [  # "resources checked; no case ran" is about the cases (coverage), not a figure of this table
        f for f in k.findings if f.key.startswith("resources.") and f.outcome in opens and f.gate != Gate.coverage
    ]
    blocks = []
    for i, check in enumerate(checks or [None]):
        if i == 0:  # the first architecture's functions, where the review kept them in the builds
            head = (k.build.resources if k.build else []) or (check.head if check else [])
            base = (k.base_build.resources if k.base_build else []) or (check.base if check else [])
        else:
            assert check is not None  # checks[i] for i > 0
            head, base = check.head, check.base
        arch = check.arch if check else "sm_90a"
        mine = [f for f in failing if not named or f.arch == arch]
        notes = [n for n in resource_notes if not named or _about(n, arch) or (i == 0 and not _any(n, checks))]
        blocks.append(
            ArchBlock(
                arch=arch,
                check=check,
                head=head,
                base=base,
                notes=notes,
                failed=bool(mine),
                changed=_changed(head, base, check),
                named=named,
            )
        )
    return blocks


def _any(text: str, checks: list[ResourceCheckReport]) -> bool:
    return any(_about(text, c.arch) for c in checks)


# -- throughput cells --------------------------------------------------------------------------------------


def _rate(value: float | None, unit: str) -> str:
    """412 TFLOP/s, 0.85 TFLOP/s as 850 GFLOP/s (a CPU case reads in G), 3,120 GB/s as 3.12 TB/s."""
    if value is None:
        return "—"
    if unit == "FLOP/s":
        tera = value
        return f"{tera:.3g} TFLOP/s" if tera >= 1 else f"{tera * 1e3:.3g} GFLOP/s"
    return f"{value / 1e3:.3g} TB/s" if value >= 1e3 else f"{value:.3g} GB/s"


def achieved(c: CaseReport) -> str:
    """Head's and base's achieved rates ("412 TFLOP/s / 398 TFLOP/s"), compute and memory where both are declared."""
    t = c.throughput
    if t is None:
        return i18n.gettext("not timed") if c.p50_ms is None else "—"
    parts = []
    if t.flops is not None:
        head, base = _rate(t.head_tflops, "FLOP/s"), _rate(t.base_tflops, "FLOP/s")
        parts.append(head if t.base_tflops is None else f"{head} / {base}")
    if t.bytes is not None:
        head, base = _rate(t.head_gbps, "B/s"), _rate(t.base_gbps, "B/s")
        parts.append(head if t.base_gbps is None else f"{head} / {base}")
    return " · ".join(parts)


def peak_share(c: CaseReport) -> str:
    """Head's share of the device's peak, the larger of compute and memory ("61% compute"); bold above 100 %."""
    t = c.throughput
    if t is None:
        return i18n.gettext("not timed") if c.p50_ms is None else "—"
    pct = peak_pct(t)
    if pct is None:
        return i18n.gettext("no peak known")
    share = f"{pct:.3g}"
    text = (
        i18n.gettext("%(pct)s%% compute", pct=share)
        if pct == t.head_flops_pct
        else i18n.gettext("%(pct)s%% memory", pct=share)
    )
    return f"**{text}** ❌" if pct > 100.0 else text


def peaks(cases: list[CaseReport]) -> list[str]:
    """The peaks the shares are taken of, each once (a data-sheet row, or this CPU runner's measurement)."""
    shown = (spoken.phrase(t.peak_of) for t in (c.throughput for c in cases) if t is not None and t.peak_of)
    return list(dict.fromkeys(shown))
