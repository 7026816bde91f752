"""A review's findings on head's lines: check-run annotations from a report, its diff and head's sources (pure).

What is annotated (docs/review.md, "Annotations"): a spill or a register, shared-memory or occupancy change at the
definition of the kernel function ptxas named; a failed case at the definition of the entry its build calls; a
changed file no gate read at its first changed line; a lint finding at its line. The places come from small
locators over head's text (no compiler, no preprocessor): a function's definition is the `__global__` declaration
that names it, an entry's the function its binding (`m.def`, `m.impl`) binds.

The gates' findings (bot/models/finding.py) say what and about which function or case; the locators say where.
Every annotation speaks the review's locale, like the comment (its findings through the catalog, its own words
through `_()`); a lint finding's message and a case's reason made outside the gates are shown as written.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence

from pydantic import BaseModel, ConfigDict, Field

from bot.config.launch_sites import blank
from bot.models.diff import FileChange
from bot.models.finding import Finding, Gate, Outcome
from bot.models.github import Annotation, AnnotationLevel
from bot.models.report import CaseReport, KernelReport, Report
from bot.text.i18n import N_, ngettext
from bot.text.i18n import gettext as _
from bot.text.safe import one_line
from bot.verdict.findings import case_stated
from bot.verdict.launch import plain
from bot.wording import spoken

MESSAGE_CHARS = 4000  # well under GitHub's 64 KB
TITLE_CHARS = 255  # GitHub's limit
SOURCE_SUFFIXES = (".cu", ".cuh", ".cpp", ".cc", ".cxx", ".c", ".h", ".hh", ".hpp", ".inl")
LEVEL_ORDER: dict[AnnotationLevel, int] = {"failure": 0, "warning": 1, "notice": 2}


class EntryPlace(BaseModel):
    """What one device's build of a kernel calls (`entry`) and the files it compiles (repository paths)."""

    model_config = ConfigDict(frozen=True)

    entry: str
    sources: list[str] = Field(default_factory=list)


class KernelSources(BaseModel):
    """Where a kernel's code is in head: its C/C++/CUDA files (repository paths) and each build's entry."""

    model_config = ConfigDict(frozen=True)

    files: list[str] = Field(default_factory=list)
    builds: dict[str, EntryPlace] = Field(default_factory=dict, description="device (cpu, cuda) -> its entry")


class Sources(BaseModel):
    """Head's side of a review as the locators read it: file texts by repository path, each kernel's files."""

    model_config = ConfigDict(frozen=True)

    texts: dict[str, str] = Field(default_factory=dict)
    kernels: dict[str, KernelSources] = Field(default_factory=dict)


class LintPlace(BaseModel):
    """A lint finding with a line (bot.lint.findings.LintFinding as the annotations need it)."""

    model_config = ConfigDict(frozen=True)

    path: str
    line: int = Field(ge=1)
    rule: str
    message: str
    severity: str  # error | warning | info


# ---------------------------------------------------------------------------------------------- the diff


_HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+(\d+)(?:,(\d+))? @@", re.M)


def changed_lines(change: FileChange) -> list[int]:
    """Head's line numbers the diff of one file adds, in order; a hunk that only removes gives the line after the
    removal (where the change is in head). Empty for a binary or deleted file."""
    if change.binary or not change.diff:
        return []
    lines: list[int] = []
    for hunk in _HUNK.finditer(change.diff):
        start, count = int(hunk.group(1)), int(hunk.group(2) or 1)
        if count == 0:
            continue  # a deleted file's only hunk (+0,0), or a removal at the top
        line, body_start = start, hunk.end()
        body_end = m.start() if (m := _HUNK.search(change.diff, body_start)) else len(change.diff)
        added_here = []
        for text in change.diff[body_start:body_end].split("\n")[1:]:
            if text.startswith("+"):
                added_here.append(line)
                line += 1
            elif text.startswith(" "):
                line += 1
        lines.extend(added_here or [start])
    return lines


def first_changed_line(change: FileChange) -> int | None:
    lines = changed_lines(change)
    return lines[0] if lines else None


# ---------------------------------------------------------------------------------------------- locators


def function_name(function: str) -> str:
    """The unqualified name of a function as ptxas names it, demangled (`void ns::gemm<128, 64>(float*)` → `gemm`)
    or not (`_ZN2ns4gemmILi128EEEvPf` → `gemm`); "" when it cannot tell."""
    if function.startswith("_Z"):
        return _mangled_name(function)
    name = plain(function)
    if name.endswith(">"):  # drop the template arguments: back to the `<` that opens them
        depth = 0
        for i in range(len(name) - 1, -1, -1):
            depth += {">": 1, "<": -1}.get(name[i], 0)
            if depth == 0:
                name = name[:i]
                break
    name = name.rsplit("::", 1)[-1].strip()
    return name if re.fullmatch(r"[A-Za-z_]\w*", name) else ""


def _mangled_name(symbol: str) -> str:
    """The last name of an Itanium-mangled symbol's (nested) name: `_Z4gemmPf`, `_ZN2ns4gemmIiEEvv`."""
    s = symbol[2:]
    nested = s.startswith("N")
    i = 1 if nested else 0
    while i < len(s) and s[i] in "rVKL":  # cv-qualifiers, internal linkage
        i += 1
    last = ""
    while i < len(s) and s[i].isdigit():
        j = i
        while j < len(s) and s[j].isdigit():
            j += 1
        length = int(s[i:j])
        last = s[j : j + length]
        i = j + length
        if not nested:
            break
    return last if re.fullmatch(r"[A-Za-z_]\w*", last) else ""


def _line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def _close(code: str, open_at: int) -> int:
    """The offset after the `)` that closes the `(` at `open_at` (len(code) when it never closes)."""
    depth = 0
    for i in range(open_at, len(code)):
        if code[i] == "(":
            depth += 1
        elif code[i] == ")":
            depth -= 1
            if depth == 0:
                return i + 1
    return len(code)


def _definitions(code: str, name: str, *, kernel: bool) -> list[tuple[int, bool]]:
    """(offset of the name, whether a body follows) of every declaration of `name` in blanked `code`: a kernel's
    statement carries `__global__`; any other function's has a type before the name (not a call, not a macro)."""
    found = []
    for m in re.finditer(rf"(?<![\w.>:])(?:\w+::)*{re.escape(name)}\s*\(", code):
        start = max(code.rfind(";", 0, m.start()), code.rfind("}", 0, m.start()), code.rfind("{", 0, m.start()))
        before = code[start + 1 : m.start()]
        if kernel and "__global__" not in before:
            continue
        words = before.split()
        if (
            not words
            or words[-1] in ("return", "new", "else", "case", "throw")
            or before.rstrip()[-1] in "=(,!?+-/|%^~"
        ):
            continue
        if code[code.rfind("\n", 0, m.start()) + 1 : m.start()].lstrip().startswith("#"):
            continue  # a macro
        after = code[_close(code, m.end() - 1) :].lstrip()
        after = re.sub(r"^(?:(?:const|noexcept|override|final)\s*)+", "", after)
        found.append((m.start() + m.group(0).rfind(name), after.startswith(("{", "->"))))
    return found


def define_line(name: str, paths: Iterable[str], texts: Mapping[str, str], *, kernel: bool) -> tuple[str, int] | None:
    """Where `name` is defined among `paths` (CUDA files first): the first definition, else the first declaration."""
    if not name:
        return None
    ordered = sorted(dict.fromkeys(paths), key=lambda p: (not p.endswith((".cu", ".cuh")), p))
    declared: tuple[str, int] | None = None
    for path in ordered:
        text = texts.get(path)
        if text is None:
            continue
        for offset, definition in _definitions(blank(text), name, kernel=kernel):
            if definition:
                return path, _line_of(text, offset)
            declared = declared or (path, _line_of(text, offset))
    return declared


_BIND = re.compile(r"\.\s*(def|impl)\s*\(\s*\"([\w.]+)(?:\(|\")\s*(?:,\s*(?:TORCH_FN\s*\(\s*)?&?\s*([\w:]+))?")


def entry_line(
    entry: str, build: EntryPlace, kernel_files: Iterable[str], texts: Mapping[str, str]
) -> tuple[str, int] | None:
    """Where the entry a build calls is defined: the function its binding binds (pybind `m.def("gemm", &gemm)`, a
    TORCH_LIBRARY `m.impl("op", &fn)`), else the binding's line itself (a lambda, an op defined by schema only)."""
    op = entry.removeprefix("torch.ops.").split(".")
    wanted = op[1] if entry.startswith("torch.ops.") and len(op) > 1 else entry
    bound: str | None = None
    binding: tuple[str, int] | None = None
    for path in build.sources:
        text = texts.get(path)
        if text is None:
            continue
        for m in _BIND.finditer(text):
            if m.group(2).split(".")[0] != wanted:
                continue
            if binding is None:
                binding = (path, _line_of(text, m.start()))
            if m.group(3) and bound is None:
                bound = m.group(3).rsplit("::", 1)[-1]
    if bound is not None:
        place = define_line(bound, build.sources, texts, kernel=False) or define_line(
            bound, kernel_files, texts, kernel=False
        )
        if place is not None:
            return place
    return binding


# ---------------------------------------------------------------------------------------------- annotations


def _annotation(path: str, line: int, level: AnnotationLevel, title: str, message: str) -> Annotation:
    return Annotation(
        path=path,
        start_line=line,
        end_line=line,
        annotation_level=level,
        title=one_line(title, limit=TITLE_CHARS),
        message=message[:MESSAGE_CHARS].strip() or title[:MESSAGE_CHARS],
    )


OUTCOME_LEVELS: dict[Outcome, AnnotationLevel] = {
    Outcome.fail: "failure",
    Outcome.error: "failure",
    Outcome.undecided: "warning",
    Outcome.accept: "warning",
    Outcome.note: "notice",
}


def _level(findings: Iterable[Finding]) -> AnnotationLevel:
    return min((OUTCOME_LEVELS[f.outcome] for f in findings), key=LEVEL_ORDER.__getitem__, default="notice")


def _group(
    found: Iterable[tuple[tuple[str, int], Finding]],
) -> dict[tuple[str, int], list[Finding]]:
    places: dict[tuple[str, int], list[Finding]] = {}
    for place, finding in found:
        places.setdefault(place, []).append(finding)
    return places


def _lines(findings: Iterable[Finding]) -> str:
    """Each finding's line as the comment renders it, with its architecture where the line does not name it."""
    lines = []
    for f in findings:
        text = spoken.render(f)
        lines.append(f"{text} ({f.arch})" if f.arch and f.arch not in text else text)
    return "\n".join(dict.fromkeys(lines))


def resource_annotations(kernel: KernelReport, sources: KernelSources, texts: Mapping[str, str]) -> list[Annotation]:
    """The kernel's resource findings about a GPU function (a spill, a register, shared-memory or occupancy change)
    at that function's definition, one annotation per definition (instantiations and architectures share it)."""
    found = []
    for f in kernel.findings:
        if f.gate == Gate.resources and f.function:
            place = define_line(function_name(f.function), sources.files, texts, kernel=True)
            if place is not None:
                found.append((place, f))
    out = []
    for (path, line), findings in _group(found).items():
        name = function_name(findings[0].function or "")
        spills = any(f.key == "resources.spill" for f in findings)
        title = (
            _("%(kernel)s: %(function)s resources (spills)", kernel=kernel.name, function=name)
            if spills
            else _("%(kernel)s: %(function)s resources", kernel=kernel.name, function=name)
        )
        out.append(_annotation(path, line, _level(findings), title, _lines(findings)))
    return out


def _failed(case: CaseReport) -> bool:
    return case.verdict in ("fail", "error")


def case_annotations(kernel: KernelReport, sources: KernelSources, texts: Mapping[str, str]) -> list[Annotation]:
    """One annotation per failed case, at the definition of the entry its device's build calls: the case's failing
    failing findings (all it states where none fails; a line made outside the gates as written)."""
    out = []
    for case in (c for c in kernel.cases if _failed(c)):
        build = sources.builds.get(case.device)
        if build is None or not build.entry:
            continue
        place = entry_line(build.entry, build, sources.files, texts)
        if place is None:
            continue
        said = case_stated(case)
        failing = [f for f in said if f.outcome in (Outcome.fail, Outcome.error)] or said
        why = "\n".join(dict.fromkeys(spoken.render(f, case=False) for f in failing)) or _(
            "status %(status)s", status=case.status.value
        )
        names = {"kernel": kernel.name, "case": case.name}
        title = (
            _("%(kernel)s: case %(case)s failed", **names)
            if case.verdict == "fail"
            else _("%(kernel)s: case %(case)s could not be judged", **names)
        )
        calls = {"case": case.name, "device": case.device, "entry": build.entry, "why": why}
        message = (
            _("%(case)s (%(device)s on %(arch)s) calls %(entry)s: %(why)s", arch=case.arch, **calls)
            if case.arch
            else _("%(case)s (%(device)s) calls %(entry)s: %(why)s", **calls)
        )
        out.append(_annotation(place[0], place[1], "failure", title, message))
    return out


# A gate as an annotation's title names it (in English its enum value; the users' checklist words in zh-CN).
GATE_NAMES: dict[Gate, str] = {
    Gate.correctness: N_("correctness"), Gate.stability: N_("stability"), Gate.performance: N_("performance"),
    Gate.resources: N_("resources"), Gate.plausibility: N_("plausibility"), Gate.static: N_("static"),
    Gate.build: N_("build"), Gate.coverage: N_("coverage"), Gate.measurement: N_("measurement"), Gate.run: N_("run"),
    Gate.manifest: N_("manifest"), Gate.acceptance: N_("acceptance"), Gate.review: N_("review"),
}  # fmt: skip


def placed_annotations(kernel: KernelReport, known: Callable[[str], bool]) -> list[Annotation]:
    """The kernel's and its cases' findings that carry a repository file and line themselves (a compile error's
    place), where `known` says head has that file."""
    found = [
        ((f.file, f.line), f)
        for f in [*kernel.findings, *(f for c in kernel.cases for f in c.findings)]
        if f.file and f.line and f.line >= 1 and known(f.file)
    ]
    out = []
    for (path, line), findings in _group(found).items():  # type: ignore[arg-type]
        gate = findings[0].gate
        title = f"{kernel.name}: {_(GATE_NAMES[gate]) if gate in GATE_NAMES else gate.value}"
        out.append(_annotation(path, line, _level(findings), title, _lines(findings)))
    return out


UNMATCHED = N_("%(path)s matches no kernel's globs: no gate read it")
LARGE = N_("%(path)s is over %(bytes)s bytes in head: no gate read it")
UNCLAIMED_FIX = N_(": add a manifest (opgate init), widen a kernel's globs, or list it under ignore")


def coverage_annotations(report: Report, changes: Iterable[FileChange]) -> list[Annotation]:
    """A changed file no gate read (no kernel's globs match it, or it is over the size limit) at its first changed
    line; a kernel source no manifest claims fails the review, so its annotation is a failure."""
    cov = report.coverage
    if cov is None:
        return []
    by_path = {c.path: c for c in changes}
    unclaimed = set(cov.kernel_sources.names)
    out = []
    limit = f"{cov.size_limit_bytes:,}"
    for group, why in (
        (cov.unmatched.names, UNMATCHED),
        (cov.large.names, LARGE),
    ):
        for path in group:
            change = by_path.get(path)
            line = first_changed_line(change) if change is not None else None
            if line is None:
                continue
            level: AnnotationLevel = "failure" if path in unclaimed else "warning"
            fix = _(UNCLAIMED_FIX) if path in unclaimed else ""
            said = _(why, path=path, bytes=limit)
            out.append(_annotation(path, line, level, _("not read by any gate"), f"{said}{fix}"))
    return out


LEVEL_COUNTS: dict[AnnotationLevel, str] = {"failure": N_("%(n)s failure"), "warning": N_("%(n)s warning"),
                                            "notice": N_("%(n)s notice")}  # fmt: skip


def check_text(context: str, description: str, annotations: Sequence[Annotation], comment_url: str) -> tuple[str, str]:
    """The annotations' check run's title and summary, in the current locale: how many findings sit on head's lines,
    and what the status `context` says (`description`, bot/present/status.py's line)."""
    levels = {level: sum(a.annotation_level == level for a in annotations) for level in LEVEL_COUNTS}
    counted = _(", ").join(_(LEVEL_COUNTS[level], n=n) for level, n in levels.items() if n) or _("none")
    title = (
        ngettext("%(num)s finding(s) on head's lines", "%(num)s finding(s) on head's lines", len(annotations))
        if annotations
        else _("no finding on a line of head")
    )
    places = _(
        "Annotations: %(counted)s. This check only places the review's findings on the lines they are about; the "
        "status `%(context)s` is what gates",
        counted=counted,
        context=context,
    )
    end = _(", and [the comment](%(url)s) has the whole review.", url=comment_url) if comment_url else _(".")
    return title, f"{context}: {description}\n\n{places}{end}"


def lint_annotations(findings: Iterable[LintPlace]) -> list[Annotation]:
    levels: dict[str, AnnotationLevel] = {"error": "failure", "warning": "warning", "info": "notice"}
    return [
        _annotation(f.path, f.line, levels.get(f.severity, "notice"), f"lint {f.rule}", f.message) for f in findings
    ]


def located(report: Report, changes: list[FileChange], sources: Sources) -> list[Annotation]:
    """Every finding of `report` that has a place in head, as an annotation: the gates' findings (a GPU function's
    at its definition, a failed case's at its entry, one with a file and line there) and the files no gate read."""
    out: list[Annotation] = []
    diffed = {c.path for c in changes}
    for kernel in report.kernels:
        where = sources.kernels.get(kernel.name)
        if where is None or not kernel.changed:
            continue
        out += resource_annotations(kernel, where, sources.texts)
        out += case_annotations(kernel, where, sources.texts)
        out += placed_annotations(kernel, lambda path: path in sources.texts or path in diffed)
    return out + coverage_annotations(report, changes)


def for_review(
    report: Report, changes: list[FileChange], sources: Sources, lint: Iterable[LintPlace] = ()
) -> list[Annotation]:
    """The review's annotations, failures first, each place once; only lines that exist in head's file."""
    every = located(report, changes, sources) + lint_annotations(lint)
    return ordered(a for a in every if _exists(a, sources.texts, changes))


def _exists(a: Annotation, texts: Mapping[str, str], changes: list[FileChange]) -> bool:
    text = texts.get(a.path)
    if text is None:  # a file read for no locator (a changed file of no kernel): its diff says it is there
        return any(c.path == a.path and a.start_line in changed_lines(c) for c in changes)
    return a.end_line <= text.count("\n") + (0 if text.endswith("\n") else 1)


def ordered(items: Iterable[Annotation]) -> list[Annotation]:
    """Failures first, then by file and line; an identical annotation (two architectures' parts) once."""
    unique = dict.fromkeys(items)
    return sorted(unique, key=lambda a: (LEVEL_ORDER[a.annotation_level], a.path, a.start_line, a.title))


__all__ = [
    "EntryPlace",
    "KernelSources",
    "LintPlace",
    "Sources",
    "changed_lines",
    "check_text",
    "define_line",
    "entry_line",
    "first_changed_line",
    "for_review",
    "function_name",
    "located",
    "ordered",
]
