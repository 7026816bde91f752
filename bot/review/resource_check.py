"""A changed kernel's compile-only checks: its flags against the allow-list, and the resources of head and base as
the build compiles them (the build's own nvcc flags, torch's included, and include directories), both at once."""

from __future__ import annotations

import contextlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from bot.config.includes import include_closure, include_dirs, include_findings, include_paths
from bot.config.launch_sites import SOURCE_SUFFIXES, TouchKind, scan, touches
from bot.config.manifest import MANIFEST_NAME, ROOT, Kernel
from bot.errors import BuildError, InputError
from bot.models.finding import Phrase
from bot.models.report import CompileError, Resource, ResourceCheckReport, UnitCompile
from bot.untrusted.build import Unit, plan_units, unit_flags
from bot.untrusted.fold import FOLD_SOURCE_NAME, FoldResult, evaluate, fold_sites, markers
from bot.untrusted.resources import (
    NO_NVCC,
    CompileJob,
    ResourceCheck,
    ResourceStatus,
    compile_sides,
    demangle,
    demangler,
    nvcc_path,
)
from bot.untrusted.sandbox import Sandbox
from bot.untrusted.targets import unsupported
from bot.untrusted.toolchain import Toolchain, toolchain
from bot.verdict.compile_errors import manifest_error
from bot.verdict.findings import BASE, HEAD
from bot.verdict.flags import check_flags, for_arch, without_arch
from bot.verdict.launch import (
    ReadBack,
    SiteTouch,
    describe_kernel,
    marked_function,
    read_back,
    shared_keys,
    touch_phrase,
    undecided_launches,
)
from bot.wording.messages import phrase


def flag_findings(k: Kernel) -> list[str]:
    """Compiler flags of every build spec against the allow-list (a PR cannot pick its compiler or plugins), and
    include directories that are not folders of the repository."""
    findings = []
    for device, spec in k.manifest.build.items():
        where = f"kernel.toml [build.{device}]"
        findings += check_flags(spec.cflags, nvcc=False, where=f"{where} cflags")
        findings += check_flags(spec.cuda_cflags, nvcc=True, where=f"{where} cuda_cflags")
    return findings + include_findings(k)


def compile_jobs(k: Kernel, tc: Toolchain, arch: str = "sm_90a") -> tuple[list[CompileJob], CompileJob | None]:
    """The kernel's .cu units as the build compiles them for `arch` (the manifest's own -gencode for it kept,
    `bot.verdict.flags.for_arch`; `-cubin -arch=sm_90a` for a kernel that ships a cubin), and the job that folds its
    C++ launch expressions (a body unit's flags, no target: the fold picks it) when it has any; InputError,
    BuildError."""
    spec = k.manifest.build["cuda"]
    includes = tuple(include_paths(k, "cuda"))
    names = (k.path, *include_dirs(k, "cuda"))
    units = [u for u in plan_units(k.folder, spec, "cuda") if u.source.endswith(".cu")]
    n = len(includes)
    jobs = [
        CompileJob(
            k.folder / u.source,
            k.folder,
            includes,
            tuple(for_arch(unit_flags(u, spec, k.config, tc, n), arch, spec.ships)),
            names,
            spec.ships,
        )
        for u in units
    ]
    fold = None
    if k.manifest.launch.cxx_expressions():
        body = Unit(source=FOLD_SOURCE_NAME, binding=False, nvcc=True)
        flags = tuple(without_arch(unit_flags(body, spec, k.config, tc, n)))
        fold = CompileJob(k.folder / FOLD_SOURCE_NAME, k.folder, includes, flags, names)
    return jobs, fold


def _at(folder: str, name: str) -> str:
    return name if folder == ROOT else f"{folder}/{name}"


def resource_reads(k: Kernel) -> set[str]:
    """The files (from the repository root) a kernel's resource check reads: kernel.toml, its tunable config, each
    .cu of [build.cuda], the launch headers, and every file of the repository those #include, transitively,
    resolved as the compiler resolves them (`include_closure`). A resource-only kernel's gate reads nothing else."""
    reads = {_at(k.path, MANIFEST_NAME), _at(k.path, k.manifest.config)}
    spec = k.manifest.build.get("cuda")
    if spec is None:
        return reads
    try:
        units = [k.folder / u.source for u in plan_units(k.folder, spec, "cuda") if u.source.endswith(".cu")]
    except BuildError:
        return reads
    headers = [k.folder / h for h in k.manifest.launch.headers]  # the fold of C++ launch expressions reads them
    return reads | include_closure(k, "cuda", [*units, *headers])


def _cu_sources(k: Kernel | None) -> bool:
    spec = k.manifest.build.get("cuda") if k is not None else None
    return spec is not None and any(s.endswith(".cu") for s in spec.sources)


def resource_checks(
    head_k: Kernel,
    base_k: Kernel | None,
    architectures: list[str],
    cache_dir: Path,
    sandbox: Sandbox,
    changed: list[str] | None = None,
) -> list[ResourceCheckReport]:
    """`resource_check` once per architecture the kernel ships for (the rules' `architectures`), the first
    first; the architectures compile side by side. Empty for a kernel without .cu sources. `changed`: the
    repository paths the change touches (a launch they can move is read back or undecided)."""
    if not _cu_sources(head_k):
        return []
    if nvcc_path() is not None and len(architectures) > 1:
        with contextlib.suppress(BuildError):  # compiled once, before the threads share its cache file
            toolchain("cuda", cache_dir.parent / "toolchain")
    with ThreadPoolExecutor(max_workers=len(architectures)) as pool:
        found = list(
            pool.map(
                lambda a: resource_check(head_k, base_k, cache_dir, sandbox, arch=a, changed=changed), architectures
            )
        )
    return [c for c in found if c is not None]


def resource_check(
    head_k: Kernel,
    base_k: Kernel | None,
    cache_dir: Path,
    sandbox: Sandbox,
    *,
    arch: str = "sm_90a",
    changed: list[str] | None = None,
) -> ResourceCheckReport | None:
    """Every .cu of head's and base's CUDA build compiled for `arch` exactly as the build compiles it, plus
    `ptxas -v`; each side described by its own kernel.toml [launch] (threads from the code, C++ launch expressions
    folded from its C++ launch expressions) with its occupancy. None for a kernel without .cu sources."""
    if not _cu_sources(head_k):
        return None
    if (why := unsupported(arch)) is not None:  # this runner's nvcc cannot compile `arch`: say so, compile nothing
        return ResourceCheckReport(status="unsupported_arch", arch=arch, log_tail=why)
    sides = {HEAD: head_k, **({BASE: base_k} if base_k is not None and _cu_sources(base_k) else {})}
    checks, folds = _compile(sides, cache_dir, sandbox, arch)
    head = checks[HEAD]
    base = checks.get(BASE)
    head_d = describe_kernel(head_k, head.resources, head.threads, folds[HEAD].values if HEAD in folds else None, arch)
    base_d = None
    if base_k is not None and base is not None and base.status == "ok":
        cxx = folds[BASE].values if BASE in folds else None
        base_d = describe_kernel(base_k, base.resources, base.threads, cxx, arch)
    notes: list[Phrase] = []
    touched = launch_touches(head_k, base_k, changed or [])
    undecided: list[Phrase] = []
    unmeasured: list[str] = []
    units = _units(head, base)
    if touched and head.status == "ok":
        values, unfolded, read = read_launches(head_k, cache_dir, sandbox, arch)
        units += _sided(read, HEAD)
        head_d.resources, read_notes = read_back(head_d.resources, values, arch)
        notes += read_notes
        undecided = undecided_launches(head_d.resources, touched, unfolded)
        unmeasured = [t.sites[-1] for t in touched if undecided_launches(head_d.resources, [t], unfolded)]
        if base_d is not None and base_k is not None:
            base_values, _, read = read_launches(base_k, cache_dir, sandbox, arch)
            units = _merged(units, _sided(read, BASE))
            base_d.resources, _ = read_back(base_d.resources, base_values, arch)
    notes += shared_keys(head_d.resources, head_k.manifest.launch, f"{head_k.path}/kernel.toml")
    unchanged = False
    if head.status == "ok" and base_d is not None and not undecided and _same(head_d.resources, base_d.resources):
        unchanged = True
    errors = list(head_d.errors)
    for side, fold in folds.items():
        if not fold.ok and side == HEAD:
            errors.append(Phrase(key="launch.probe_failed", params={"error": fold.log[-1500:]}))
    notes = head_d.notes + notes
    return ResourceCheckReport(
        status=head.status.value,
        arch=arch,
        head=head_d.resources,
        base=base_d.resources if base_d is not None else (base.resources if base is not None else []),
        base_status=base.status.value if base is not None else None,
        threads=head.threads,
        launch_errors=errors,
        base_launch_errors=list(base_d.errors) if base_d is not None else [],
        launch_notes=notes,
        unchanged="same" if unchanged else None,
        launch_undecided=undecided,
        launch_unmeasured=list(dict.fromkeys(unmeasured)),
        launch_sites=list(dict.fromkeys(phrase(t.what) for t in touched)),
        seconds=round(max(head.seconds, base.seconds if base else 0.0), 2),
        cached=head.cached,
        units=units,
        log_tail=head.log if head.status != "ok" else "",
        base_log_tail=base.log if base is not None and base.status != "ok" else "",
        errors=head.errors,
        base_errors=base.errors if base is not None else [],
    )


def _compile(
    sides: dict[str, Kernel], cache_dir: Path, sandbox: Sandbox, arch: str
) -> tuple[dict[str, ResourceCheck], dict[str, FoldResult]]:
    """Both sides' units (and their C++ launch folds) at once; a side that cannot even be planned is a compile_fail."""
    nvcc = nvcc_path()
    if nvcc is None:
        return {s: ResourceCheck(status=ResourceStatus.no_nvcc, log=NO_NVCC) for s in sides}, {}
    try:
        tc = toolchain("cuda", cache_dir.parent / "toolchain")
    except BuildError as exc:  # the runner's toolchain: both sides alike
        error = CompileError(kind="compiler", message=f"the CUDA toolchain: {exc}")
        return {s: ResourceCheck(status=ResourceStatus.compile_fail, log=str(exc), errors=[error]) for s in sides}, {}
    jobs: dict[str, list[CompileJob]] = {}
    fold_jobs: dict[str, tuple[Kernel, CompileJob]] = {}
    failed: dict[str, ResourceCheck] = {}
    for side, k in sides.items():
        try:
            jobs[side], fold = compile_jobs(k, tc, arch)
        except (InputError, BuildError) as exc:  # kernel.toml names what cannot be built: no compiler ran
            error = manifest_error(f"[build.cuda]: {exc}")
            failed[side] = ResourceCheck(status=ResourceStatus.compile_fail, log=f"{side}: {exc}", errors=[error])
            continue
        if fold is not None:
            fold_jobs[side] = (k, fold)
    with ThreadPoolExecutor(max_workers=max(1, len(fold_jobs))) as pool:
        pending = {
            side: pool.submit(
                evaluate,
                nvcc,
                job,
                k.manifest.launch.headers,
                k.manifest.launch.cxx_expressions(),
                arch=arch,
                cache_dir=cache_dir,
                sandbox=sandbox,
            )
            for side, (k, job) in fold_jobs.items()
        }
        checks = compile_sides(jobs, arch=arch, cache_dir=cache_dir, sandbox=sandbox, toolchain=tc.key)
        folds = {side: p.result() for side, p in pending.items()}
    return {**checks, **failed}, folds


def _units(head: ResourceCheck, base: ResourceCheck | None) -> list[UnitCompile]:
    """Every unit of both sides once (a unit base and head share is one compile, named with both)."""
    return _merged(head.units, base.units if base is not None else [])


def _sided(units: list[UnitCompile], side: str) -> list[UnitCompile]:
    return [u.model_copy(update={"sides": [side]}) for u in units]


def _merged(ours: list[UnitCompile], theirs: list[UnitCompile]) -> list[UnitCompile]:
    """`ours` and `theirs` with each step's key once: a compile the second side found in the cache the first one had
    just written is the first one's, named with both sides."""
    found = {(u.step, u.key): u for u in ours}
    for u in theirs:
        if (mine := found.get((u.step, u.key))) is not None:
            found[(u.step, u.key)] = mine.model_copy(update={"sides": list(dict.fromkeys([*mine.sides, *u.sides]))})
        else:
            found[(u.step, u.key)] = u
    return list(found.values())


def without_unchanged(check: ResourceCheckReport) -> None:
    """Where changed files went unread (listed as not judged), the check says what it compared, never that the change
    leaves the kernel "unchanged from base" (the gate's finding `resources.unchanged_unread`)."""
    if check.unchanged == "same":
        check.unchanged = "unread"


def _figures(r: Resource) -> tuple[object, ...]:
    occ = r.occupancy.warps_per_sm if r.occupancy else None
    return (r.registers, r.spill_bytes, r.stack_bytes, r.smem_bytes, r.dynamic_smem_bytes, r.threads, occ)


def _same(head: list[Resource], base: list[Resource]) -> bool:
    ours, theirs = {r.function: _figures(r) for r in head}, {r.function: _figures(r) for r in base}
    return len(ours) == len(head) and len(theirs) == len(base) and ours == theirs


def _sources(k: Kernel) -> dict[str, str]:
    """The kernel folder's C++/CUDA sources, by path relative to the folder (symlinks and unreadable files left out)."""
    found = {}
    for p in sorted(k.folder.rglob("*")):
        if p.suffix in SOURCE_SUFFIXES and p.is_file() and not p.is_symlink():
            with contextlib.suppress(OSError, UnicodeDecodeError):
                found[p.relative_to(k.folder).as_posix()] = p.read_text()
    return found


def launch_touches(head_k: Kernel, base_k: Kernel | None, changed: list[str]) -> list[SiteTouch]:
    """The changed files that hold one of the kernel's launches, an explicit instantiation of its kernels or a
    constant a launch's size is computed from: one per changed file and launched kernel, naming its launches as head
    has them (base's only for a file head no longer has)."""
    found = [t for t in touches(changed, _repo_sources(head_k), _config(head_k))]
    if base_k is not None:
        gone = [p for p in changed if not (head_k.folder / p.removeprefix(f"{head_k.path}/")).is_file()]
        found += touches(gone, _repo_sources(base_k), _config(base_k))
    grouped: dict[tuple[str, TouchKind, tuple[str, ...], str], list[str]] = {}
    for t in found:
        grouped.setdefault((t.path, t.kind, t.names, t.site.function), []).append(t.site.describe())
    return [
        SiteTouch(touch_phrase(path, kind, names, list(dict.fromkeys(sites))), tuple(dict.fromkeys(sites)), function)
        for (path, kind, names, function), sites in grouped.items()
    ]


def _repo_sources(k: Kernel) -> dict[str, str]:
    return {f"{k.path}/{rel}": text for rel, text in _sources(k).items()}


def _config(k: Kernel) -> str | None:
    return f"{k.path}/{k.manifest.config}" if k.manifest.config else None


def read_launches(
    k: Kernel, cache_dir: Path, sandbox: Sandbox, arch: str
) -> tuple[list[ReadBack], dict[str, list[Phrase]], list[UnitCompile]]:
    """Every launch of the kernel's CUDA build read back by the fold (bot/untrusted/fold.py: compiled, never run),
    each value with the instantiation it launches (`plain`, from the marker's demangled symbol); the launches it
    could not read, with why; and the units it compiled or read from the cache."""
    files = _sources(k)
    sites = [s for rel, text in files.items() for s in scan(rel, text)]
    shown = {m.n: (f"{k.path}/{m.site.describe()}", m.what) for m in markers(sites)}
    nvcc = nvcc_path()
    if nvcc is None or not shown:
        why = Phrase(key="resources.no_nvcc" if nvcc is None else "launch.nothing_marked")
        return [], {site: [why] for site, _ in shown.values()}, []
    try:
        tc = toolchain("cuda", cache_dir.parent / "toolchain")
        jobs, _ = compile_jobs(k, tc)
    except (InputError, BuildError) as exc:
        plan = Phrase(key="launch.plan_error", params={"error": str(exc)})
        return [], {site: [plan] for site, _ in shown.values()}, []
    fold = fold_sites(nvcc, jobs, files, sites, arch=arch, cache_dir=cache_dir, sandbox=sandbox)
    readable = demangle(sorted({v.function for v in fold.values if v.function}), demangler(nvcc))
    values = [
        ReadBack(*shown[v.marker], marked_function(readable.get(v.function, "")), v.value)
        for v in fold.values
        if v.marker in shown
    ]
    unfolded: dict[str, list[Phrase]] = {}
    for n, u in fold.unfolded.items():
        site, what = shown[n]
        why = Phrase(key=f"launch.{u.why}", params={"error": u.error} if u.why == "not_constant" else {})
        its = "launch.its_threads" if what == "threads" else "launch.its_smem"
        unfolded.setdefault(site, []).append(Phrase(key=its, phrases={"why": [why]}))
    return values, unfolded, _merged(fold.units, [])
