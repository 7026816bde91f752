"""A changed kernel's compile-only checks: its flags against the allow-list, and the resources of head and base as
the build compiles them (the build's own nvcc flags, torch's included, and include directories), both at once."""

from __future__ import annotations

import contextlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from bot.config.includes import include_dirs, include_findings, include_paths
from bot.config.manifest import Kernel
from bot.errors import BuildError, InputError
from bot.models.report import CompileError, Resource, ResourceCheckReport
from bot.untrusted.build import Unit, plan_units, unit_flags
from bot.untrusted.fold import FOLD_SOURCE_NAME, FoldResult, evaluate
from bot.untrusted.resources import NO_NVCC, CompileJob, ResourceCheck, ResourceStatus, compile_sides, nvcc_path
from bot.untrusted.sandbox import Sandbox
from bot.untrusted.targets import unsupported
from bot.untrusted.toolchain import Toolchain, toolchain
from bot.verdict.compile_errors import manifest_error
from bot.verdict.flags import check_flags, for_arch, without_arch
from bot.verdict.gate import BASE, HEAD
from bot.verdict.launch import describe_kernel


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
    `bot.verdict.flags.for_arch`), and the job that folds its C++ launch expressions (a body unit's flags, no
    target: the fold picks it) when it has any; InputError, BuildError."""
    spec = k.manifest.build["cuda"]
    includes = tuple(include_paths(k, "cuda"))
    names = (k.path, *include_dirs(k, "cuda"))
    units = [u for u in plan_units(k.folder, spec, "cuda") if u.source.endswith(".cu")]
    n = len(includes)
    jobs = [
        CompileJob(
            k.folder / u.source, k.folder, includes, tuple(for_arch(unit_flags(u, spec, k.config, tc, n), arch)), names
        )
        for u in units
    ]
    fold = None
    if k.manifest.launch.cxx_expressions():
        body = Unit(source=FOLD_SOURCE_NAME, binding=False, nvcc=True)
        flags = tuple(without_arch(unit_flags(body, spec, k.config, tc, n)))
        fold = CompileJob(k.folder / FOLD_SOURCE_NAME, k.folder, includes, flags, names)
    return jobs, fold


def _cu_sources(k: Kernel | None) -> bool:
    spec = k.manifest.build.get("cuda") if k is not None else None
    return spec is not None and any(s.endswith(".cu") for s in spec.sources)


def resource_checks(
    head_k: Kernel, base_k: Kernel | None, architectures: list[str], cache_dir: Path, sandbox: Sandbox
) -> list[ResourceCheckReport]:
    """`resource_check` once per architecture the kernel ships for (the rules' `architectures`), the first
    first; the architectures compile side by side. Empty for a kernel without .cu sources."""
    if not _cu_sources(head_k):
        return []
    if nvcc_path() is not None and len(architectures) > 1:
        with contextlib.suppress(BuildError):  # compiled once, before the threads share its cache file
            toolchain("cuda", cache_dir.parent / "toolchain")
    with ThreadPoolExecutor(max_workers=len(architectures)) as pool:
        found = list(pool.map(lambda a: resource_check(head_k, base_k, cache_dir, sandbox, arch=a), architectures))
    return [c for c in found if c is not None]


def resource_check(
    head_k: Kernel, base_k: Kernel | None, cache_dir: Path, sandbox: Sandbox, *, arch: str = "sm_90a"
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
    notes = [f"base: {e}" for e in (base_d.errors if base_d else [])]
    if head.status == "ok" and base_d is not None and _same(head_d.resources, base_d.resources):
        notes.append(
            f"resource check: unchanged from base: {len(head_d.resources)} function(s) with the same registers, "
            "spills, stack, shared memory and occupancy"
        )
    errors = list(head_d.errors)
    for side, fold in folds.items():
        if not fold.ok and side == HEAD:
            errors.append(f"the launch probe (C++ launch expressions of kernel.toml) failed: {fold.log[-1500:]}")
    return ResourceCheckReport(
        status=head.status.value,
        arch=arch,
        head=head_d.resources,
        base=base_d.resources if base_d is not None else (base.resources if base is not None else []),
        base_status=base.status.value if base is not None else None,
        threads=head.threads,
        launch_errors=errors,
        launch_notes=head_d.notes + notes,
        seconds=round(max(head.seconds, base.seconds if base else 0.0), 2),
        cached=head.cached,
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


def _figures(r: Resource) -> tuple[object, ...]:
    occ = r.occupancy.warps_per_sm if r.occupancy else None
    return (r.registers, r.spill_bytes, r.stack_bytes, r.smem_bytes, r.dynamic_smem_bytes, r.threads, occ)


def _same(head: list[Resource], base: list[Resource]) -> bool:
    ours, theirs = {r.function: _figures(r) for r in head}, {r.function: _figures(r) for r in base}
    return len(ours) == len(head) and len(theirs) == len(base) and ours == theirs
