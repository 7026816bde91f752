"""A changed kernel's compile-only checks: its flags against the allow-list, and ptxas resources of head and base."""

from __future__ import annotations

from pathlib import Path

from bot.config.manifest import Kernel
from bot.models.report import ResourceCheckReport
from bot.untrusted.build import defines
from bot.untrusted.resources import ResourceCheck, compile_resources
from bot.untrusted.sandbox import Sandbox
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


def resource_check(
    head_k: Kernel, base_k: Kernel | None, cache_dir: Path, sandbox: Sandbox
) -> ResourceCheckReport | None:
    """ptxas -v on the kernel's .cu files for sm_90a, head and base, each with its own launch description
    (kernel.toml [launch]: threads, dynamic smem) and occupancy; None for a CPU-only kernel."""
    head = _ptxas(head_k, cache_dir, sandbox)
    if head is None:
        return None
    base = _ptxas(base_k, cache_dir, sandbox) if base_k is not None else None
    head_d = describe_kernel(head_k, head.resources, head.threads)
    base_d = None
    if base_k is not None and base is not None and base.status == "ok":
        base_d = describe_kernel(base_k, base.resources, base.threads)
    return ResourceCheckReport(
        status=head.status.value,
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


def _ptxas(k: Kernel, cache_dir: Path, sandbox: Sandbox) -> ResourceCheck | None:
    spec = k.manifest.build.get("cuda")
    sources = [k.folder / s for s in spec.sources if s.endswith(".cu")] if spec else []
    if spec is None or not sources:
        return None
    # The check compiles for sm_90a itself; an -arch/-gencode in the flags would add other targets.
    flags = [f for f in spec.cuda_cflags if not f.startswith(ARCH_FLAGS)] + defines(k.config)
    return compile_resources(sources, [k.folder], flags, cache_dir=cache_dir, sandbox=sandbox)
