"""A changed kernel's compile-only checks: its flags against the allow-list, and ptxas resources of head and base."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from bot.config.manifest import Kernel
from bot.models.report import ResourceCheckReport
from bot.untrusted.build import defines
from bot.untrusted.resources import ResourceCheck, compile_resources
from bot.untrusted.sandbox import Sandbox
from bot.untrusted.targets import unsupported
from bot.verdict.flags import check_flags
from bot.verdict.launch import describe_kernel

ARCH_FLAGS = ("-arch", "--gpu-architecture", "-gencode", "--generate-code", "-code", "--gpu-code")


def flag_findings(k: Kernel) -> list[str]:
    """Compiler flags of every build spec against the allow-list (a PR cannot pick its compiler or plugins)."""
    findings = []
    for device, spec in k.manifest.build.items():
        where = f"kernel.toml [build.{device}]"
        findings += check_flags(spec.cflags, nvcc=False, where=f"{where} cflags")
        findings += check_flags(spec.cuda_cflags, nvcc=True, where=f"{where} cuda_cflags")
    return findings


def resource_checks(
    head_k: Kernel, base_k: Kernel | None, architectures: list[str], cache_dir: Path, sandbox: Sandbox
) -> list[ResourceCheckReport]:
    """`resource_check` once per architecture the kernel ships for (the rules' `architectures`), the first
    first; the architectures compile side by side. Empty for a CPU-only kernel."""
    if _sources(head_k) is None:
        return []
    with ThreadPoolExecutor(max_workers=len(architectures)) as pool:
        found = list(pool.map(lambda a: resource_check(head_k, base_k, cache_dir, sandbox, arch=a), architectures))
    return [c for c in found if c is not None]


def resource_check(
    head_k: Kernel, base_k: Kernel | None, cache_dir: Path, sandbox: Sandbox, *, arch: str = "sm_90a"
) -> ResourceCheckReport | None:
    """ptxas -v on the kernel's .cu files for `arch`, head and base, each with its own launch description
    (kernel.toml [launch]: threads, dynamic smem) and occupancy on that architecture; None for a CPU-only
    kernel. A toolchain that cannot compile `arch` is reported as such (status unsupported_arch)."""
    if _sources(head_k) is None:
        return None
    if (why := unsupported(arch)) is not None:
        return ResourceCheckReport(status="unsupported_arch", arch=arch, log_tail=why)
    head = _ptxas(head_k, cache_dir, sandbox, arch)
    if head is None:
        return None
    base = _ptxas(base_k, cache_dir, sandbox, arch) if base_k is not None else None
    head_d = describe_kernel(head_k, head.resources, head.threads, arch)
    base_d = None
    if base_k is not None and base is not None and base.status == "ok":
        base_d = describe_kernel(base_k, base.resources, base.threads, arch)
    return ResourceCheckReport(
        status=head.status.value,
        arch=arch,
        head=head_d.resources,
        base=base_d.resources if base_d is not None else [],
        base_status=base.status.value if base is not None else None,
        threads=head.threads,
        launch_errors=head_d.errors,
        launch_notes=head_d.notes + [f"base: {e}" for e in (base_d.errors if base_d else [])],
        seconds=round(head.seconds + (base.seconds if base else 0.0), 2),
        cached=head.cached,
        log_tail=head.log if head.status != "ok" else "",
    )


def _sources(k: Kernel) -> list[Path] | None:
    spec = k.manifest.build.get("cuda")
    sources = [k.folder / s for s in spec.sources if s.endswith(".cu")] if spec else []
    return sources or None


def _ptxas(k: Kernel, cache_dir: Path, sandbox: Sandbox, arch: str) -> ResourceCheck | None:
    spec = k.manifest.build.get("cuda")
    sources = _sources(k)
    if spec is None or sources is None:
        return None
    # The check compiles for `arch` itself; an -arch/-gencode in the flags would add other targets.
    flags = [f for f in spec.cuda_cflags if not f.startswith(ARCH_FLAGS)] + defines(k.config)
    return compile_resources(sources, [k.folder], flags, arch=arch, cache_dir=cache_dir, sandbox=sandbox)
