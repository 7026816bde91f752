"""Render reports and prompts from the Jinja templates in templates/ (pure, StrictUndefined)."""

from __future__ import annotations

import re
from functools import cache
from typing import Any

import jinja2
from pydantic import BaseModel, ConfigDict

from bot.models.agent_report import AgentReport
from bot.models.finding import Outcome
from bot.models.report import AgentCaseRefusal, AgentCaseReport, Isolation, KernelReport, Occupancy, Report, Resource
from bot.present.arches import achieved, arch_blocks, peak_share, peaks
from bot.present.comment_md import (
    ICONS,
    VERDICT_WORDS,
    built,
    clip,
    counts,
    cpu,
    delta_cell,
    delta_chart,
    err_cell,
    evidence,
    names,
    num,
    pick,
    runner,
    spend_chart,
    stop,
    tally,
    verdict_label,
    verdict_words,
)
from bot.present.digest import Digest, digest, short_names
from bot.present.expectations import expected_line
from bot.templates import TEMPLATES, environment
from bot.text import i18n
from bot.text.i18n import N_
from bot.text.safe import Safe, code, comment_safe, fence, untrusted
from bot.verdict.agent_cases import stated_reasons
from bot.verdict.findings import stated
from bot.verdict.gate_resources import declared_moved, is_rename, match_base, removed_in_head
from bot.wording import spoken

# The top-level templates/ folder, shipped inside the package as bot.templates (pyproject.toml's package-dir).
REVIEW_MARKER = Safe("<!-- opgate:review -->")  # Safe: printed as is, the bot finds its comment by it
ACCEPT_MARKER = Safe("<!-- opgate:accept -->")


def ms(x: float | None) -> str:
    return "—" if x is None else f"{x:.4g} ms"


def pct(x: float | None) -> str:
    return "—" if x is None else f"{x:+.2f}%"


def said(text: str) -> str:
    """Text report.json keeps in English (a constant of bot/ marked `N_`, e.g. bot/verdict/agent_cases.NO_TABLE), in
    the current locale when the catalog has it, else as written: plain text, escaped like any other value."""
    return i18n.translated(text) if text else text  # "" would be the catalog's header


def agent_reasons(c: AgentCaseReport) -> str:
    """An agent case's reasons in the current locale: its findings through the catalog; a reason made beside them
    (base fails too) through the catalog too (`said`), or as written."""
    return "; ".join(said(str(f.params["text"])) if f.key == "text" else spoken.render(f, case=False)
                     for f in stated_reasons(c))  # fmt: skip


def first_reason(k: KernelReport) -> str:
    """The first reason the kernel fails or could not be judged, in the current locale ("" where none)."""
    failing = (f for f in stated(k) if f.outcome in (Outcome.fail, Outcome.error))
    return next((spoken.render(f) for f in failing), "")


def agent_reason(a: AgentReport) -> str:
    """Why an agent was not asked or gave no reply, in the current locale ("" where it has no reason)."""
    return spoken.phrase(a.reason) if a.reason is not None else ""


# An agent's status (AgentReport.status), as the comment's agent section shows it (in English: the word itself).
AGENT_STATUS = {"ok": N_("ok"), "offline": N_("offline"), "skipped": N_("skipped"), "over_budget": N_("over_budget"),
                "error": N_("error")}  # fmt: skip


def agent_status(a: AgentReport) -> str:
    return i18n.gettext(AGENT_STATUS[a.status]) if a.status in AGENT_STATUS else a.status


def refused_why(x: AgentCaseRefusal) -> str:
    """Why an agent case was refused, in the current locale."""
    return spoken.phrase(x.reason)


def inputs_missing(a: AgentReport) -> list[str]:
    """What the agent's prompt lacked, in the current locale."""
    return [spoken.phrase(p) for p in a.inputs_missing]


def inputs_seen(a: AgentReport) -> list[str]:
    """What the agent's prompt carried besides the task and the diff, in the current locale."""
    return [spoken.phrase(p) for p in a.inputs]


def isolation_why(x: Isolation) -> str:
    """Why the review ran without a sandbox, in the current locale ("" where it has no reason)."""
    return spoken.phrase(x.reason) if x.reason is not None else ""


def tokens(x: int | None) -> str:
    """A token count with thousands separators; "—" for unknown (e.g. a budget not configured)."""
    return "—" if x is None else f"{x:,}"


def size(n: int) -> str:
    """Bytes as a person reads them: "1 MiB", "512 KiB", "900 B"."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= scale:
            return f"{n / scale:.3g} {unit}"
    return f"{n} B"


def us(x: float | None) -> str:
    return "—" if x is None else f"{x:.4g} µs"


def percent(x: float | None) -> str:
    """A measured percentage (occupancy, throughput), unsigned."""
    return "—" if x is None else f"{x:.1f}%"


def nbytes(x: float | None) -> str:
    return "—" if x is None else size(int(x))


def share(used: int, budget: int | None) -> str:
    """`used` as a percentage of `budget`; "—" without a budget."""
    return "—" if not budget else f"{100.0 * used / budget:.1f}%"


def abbreviated(short: dict[str, str]) -> list[tuple[str, str]]:
    """(full, shown) of every function whose shown name left template arguments out (the comment lists them)."""
    return sorted((full, name) for full, name in short.items() if "…" in name and "…" not in full)


def base_for(head: list[Resource], base: list[Resource]) -> dict[str, Resource]:
    """Head function name -> its base counterpart (to put base beside head in the table)."""
    return match_base(head, base)


def renamed(head: Resource, base: Resource | None) -> bool:
    """The table names base's function beside head's when it had another name (not merely other numbers)."""
    return base is not None and is_rename(head.function, base.function)


def removed(head: list[Resource], base: list[Resource]) -> list[Resource]:
    """Base's functions no head function stands beside: the table lists them as removed."""
    return removed_in_head(head, base) if head else []


def smem(r: Resource) -> str:
    """Shared memory per block as `static + dynamic` bytes ("?" for dynamic memory nobody sized)."""
    if r.dynamic_smem_bytes is None:
        return f"{r.smem_bytes:,} + ?" if r.extern_smem else f"{r.smem_bytes:,}"
    return f"{r.smem_bytes:,} + {r.dynamic_smem_bytes:,}"


def declared(head: Resource, beside: Resource | None, base: list[Resource]) -> bool:
    """Head's dynamic shared memory is kernel.toml's figure for an instantiation whose template arguments the change
    moves (`beside`: base's function in its row, `base`: all of base's): the table marks it "(declared)" (the gate
    leaves its shared memory and occupancy undecided)."""
    return declared_moved(head, beside, base) is not None


def blocks(o: Occupancy | None) -> str:
    return "—" if o is None else str(o.blocks_per_sm)


def occupancy(o: Occupancy | None) -> str:
    """Resident warps per SM in % of the 64 an SM holds."""
    return "—" if o is None else f"{o.occupancy_pct:g}%"


# What limits occupancy (bot/verdict/occupancy.py's names), as the table shows it.
LIMITS = {"registers": N_("registers"), "shared memory": N_("shared memory"), "threads": N_("threads"),
          "blocks": N_("blocks"), "barriers": N_("barriers")}  # fmt: skip


def limited(o: Occupancy | None) -> str:
    return (
        "—"
        if o is None
        else i18n.gettext(", ").join(i18n.gettext(LIMITS[f]) if f in LIMITS else f for f in o.limited_by)
    )


_GITHUB_URL = re.compile(r"https://[A-Za-z0-9.-]+(?::[0-9]+)?/[A-Za-z0-9._~/#?=&%-]*")
_SHA = re.compile(r"[0-9a-f]{7,64}")


def pr_ref(number: Any) -> Safe:
    """A pull request number opgate read (an int): a live #N reference; anything else is shown inert."""
    return Safe(f"#{number}") if isinstance(number, int) and not isinstance(number, bool) else untrusted(number)


def github_url(url: Any) -> Safe:
    """A URL the GitHub API returned (an issue's html_url): a live link when it is a plain https URL."""
    return Safe(url) if isinstance(url, str) and _GITHUB_URL.fullmatch(url) else untrusted(url)


def sha(value: Any, length: int = 12) -> Safe:
    """A commit SHA (hex only), shortened; anything else is shown inert."""
    text = str(value)
    return Safe(text[:length]) if _SHA.fullmatch(text) else untrusted(text[:length])


_FULL_SHA = re.compile(r"[0-9a-f]{40}")
_SERVER = re.compile(r"https://[A-Za-z0-9.-]+(?::[0-9]+)?")
_REPOSITORY = re.compile(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+")


def span(value: Any) -> Safe:
    """Untrusted text as an inline code span, for a message's parameter (`{{ _("for %(sha)s", sha=x | span) }}`)."""
    return Safe(f"`{code(value)}`")


def commit_url(server: str | None, repository: str | None) -> Safe:
    """The prefix of a commit's page (`https://github.com/OWNER/NAME/commit/`); empty when either is unusable."""
    server = (server or "").rstrip("/")
    if _SERVER.fullmatch(server) and repository and _REPOSITORY.fullmatch(repository):
        return Safe(f"{server}/{repository}/commit/")
    return Safe("")


def commit_link(value: Any, base: str = "") -> Safe:
    """A commit as `abcdef123456`, linked to its page when `base` came from commit_url and it is a full SHA."""
    text = str(value)
    if isinstance(base, Safe) and base and _FULL_SHA.fullmatch(text):
        return Safe(f"[`{text[:12]}`]({base}{text})")
    return Safe(f"`{code(text[:12])}`")


class Message(Safe):
    """A catalog's message (trusted Markdown): `%` fills its parameters in, each through comment_safe, so a value a
    `{% trans %}` block or a `_()` call names is escaped exactly like a `{{ … }}` of its own."""

    def __mod__(self, params: Any) -> Safe:
        return Safe(str.__mod__(self, {name: comment_safe(value) for name, value in params.items()}))


def _gettext(message: str) -> Message:
    return Message(i18n.catalog().gettext(message))


def _ngettext(one: str, many: str, n: int) -> Message:
    return Message(i18n.catalog().ngettext(one, many, n))


# How templates and `pybabel extract` (tests/test_i18n.py) read `{% trans %}` blocks: whitespace collapsed.
I18N_POLICIES = {"ext.i18n.trimmed": True}


@cache
def jinja_env() -> jinja2.Environment:
    """The Jinja environment of everything opgate posts or writes for people (the agent's prompts have their own,
    bot.agent.prompt). Every `{{ … }}` passes through bot.text.safe.comment_safe: a value no filter made Safe (code,
    fence, untrusted) is rendered through `untrusted`, so no field can be forgotten. Words come from the catalog of
    the locale the command speaks (jinja2.ext.i18n, new-style gettext: `{% trans %}` and `_()` take named
    parameters), looked up as each template renders."""
    env = environment(TEMPLATES, extensions=["jinja2.ext.i18n"], finalize=comment_safe)
    env.policies.update(I18N_POLICIES)
    env.install_gettext_callables(_gettext, _ngettext, newstyle=True)  # type: ignore[attr-defined]
    env.filters.update(
        untrusted=untrusted,
        fence=fence,
        code=code,
        num=num,
        ms=ms,
        pct=pct,
        us=us,
        percent=percent,
        nbytes=nbytes,
        tokens=tokens,
        share=share,
        size=size,
        base_for=base_for,
        removed=removed,
        renamed=renamed,
        smem=smem,
        declared=declared,
        blocks=blocks,
        occupancy=occupancy,
        limited=limited,
        evidence=evidence,
        counts=counts,
        built=built,
        err_cell=err_cell,
        pick=pick,
        delta_cell=delta_cell,
        stop=stop,
        tally=tally,
        verdict_words=verdict_words,
        verdict_label=verdict_label,
        span=span,
        cpu=cpu,
        runner=runner,
        short_names=short_names,
        abbreviated=abbreviated,
        names=names,
        clip=clip,
        delta_chart=delta_chart,
        spend_chart=spend_chart,
        pr_ref=pr_ref,
        github_url=github_url,
        sha=sha,
        commit_link=commit_link,
        arch_blocks=arch_blocks,
        achieved=achieved,
        peak_share=peak_share,
        peaks=peaks,
        expected_line=expected_line,
        said=said,
        agent_reasons=agent_reasons,
        first_reason=first_reason,
        agent_reason=agent_reason,
        agent_status=agent_status,
        refused_why=refused_why,
        isolation_why=isolation_why,
        inputs_missing=inputs_missing,
        inputs_seen=inputs_seen,
    )
    return env


def render(template: str, **context: Any) -> str:
    """`template` in the locale the command speaks (bot.text.i18n.speaking), its filters' own words too."""
    return jinja_env().get_template(template).render(**context)


COMMENT_LIMIT = 65_536  # characters GitHub accepts in a comment body
COMMENT_TARGET = COMMENT_LIMIT - 1_536  # what the renderer aims under (GitHub counts some characters twice)


class Room(BaseModel):
    """How much detail a comment has room for: logs and patches (characters each), statistics, resources, rows."""

    model_config = ConfigDict(frozen=True)

    log_chars: int
    patch_chars: int
    stats: bool = True
    resources: bool = True
    charts: bool = True
    headline_lines: int = 10
    case_rows: int = 10_000  # rows of a kernel's case table (failing and changed ones first)
    items: int = 10_000  # items of a kernel's lists (inconclusive cases, notes)
    left_out: str = ""  # what the comment says it left out to fit


ROOMS = (
    Room(log_chars=6_000, patch_chars=12_000),
    Room(log_chars=1_500, patch_chars=3_000, left_out=N_("most of the build logs and patches")),
    Room(log_chars=0, patch_chars=0, stats=False, left_out=N_("build logs, patches and statistics")),
    Room(
        log_chars=0,
        patch_chars=0,
        stats=False,
        resources=False,
        charts=False,
        left_out=N_("build logs, patches, statistics, resources and charts"),
    ),
    Room(
        log_chars=0,
        patch_chars=0,
        stats=False,
        resources=False,
        charts=False,
        headline_lines=5,
        case_rows=8,
        items=3,
        left_out=N_("build logs, patches, statistics, resources, charts and most passing cases"),
    ),
)
CUT = N_("[… cut here to fit GitHub's 65,536 characters; `report.json` has everything]")


def render_comment(report: Report, *, unseen_files: list[str] | None = None, pr: Any = None) -> str:
    """The review comment (what `--post` would post, and `comment.md`), under GitHub's 65,536 characters.

    `pr` (a bot.spend.pull_request.PrContext) adds what the pull request's history says: "updated for <head>",
    acceptances still valid or voided by a push, and the token spend of the whole pull request. A report
    too big for one comment loses detail in steps (logs and patches, statistics, resources and charts, then
    rows); the comment says so and report.json keeps everything. Whatever is still too long is cut.
    """
    text = ""
    for room in ROOMS:
        text = _comment(report, unseen_files or [], pr, room)
        if len(text) <= COMMENT_TARGET:
            return text
    cut = f"\n\n{i18n.gettext(CUT)}\n"
    return text[: text.rfind("\n", 0, COMMENT_TARGET - len(cut))] + cut


def _comment(report: Report, unseen_files: list[str], pr: Any, room: Room) -> str:
    d: Digest = digest(report, headline_lines=room.headline_lines)
    return render(
        "comment.md.j2",
        marker=REVIEW_MARKER,
        r=report,
        d=d,
        icons=ICONS,
        words=VERDICT_WORDS,
        unseen_files=unseen_files,
        pr=pr,
        room=room,
    )


def render_accept_reply(decision: Any, command_line: str) -> str:
    """The reply to an `/accept` (a bot.accept.Decision): why it was refused, or what an override recorded."""
    return render("accept_reply.md.j2", marker=ACCEPT_MARKER, d=decision, command=command_line)
