"""Compile-only GPU resource check: `nvcc -Xptxas -v` per .cu file, parsed into Resource rows (no GPU needed)."""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import re
import shutil
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from enum import StrEnum
from functools import cache
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from bot.models.report import Resource
from bot.untrusted.build import SOURCE_SUFFIXES
from bot.untrusted.sandbox import Bind, Sandbox, Spec

log = logging.getLogger(__name__)

COMPILE_TIMEOUT_S = 900
LOG_TAIL_LINES = 60
KEY_VERSION = "opgate.resources/3"  # bump when the parse or the command line changes
SRC, OUT = "/opgate/src", "/opgate/build"

# A count starts where a digit run starts ((?<!\d)): a hostile line of digits is scanned once, not once per digit.
_ENTRY = re.compile(r"Compiling entry function '([^']+)' for '([^']+)'")
_PROPS = re.compile(r"Function properties for '?([^'\s]+)'?")
_STACK = re.compile(r"(?<!\d)(\d+) bytes stack frame")
_STORES = re.compile(r"(?<!\d)(\d+) bytes spill stores")
_LOADS = re.compile(r"(?<!\d)(\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers")
_SMEM = re.compile(r"(?<!\d)(\d+) bytes smem")
_CUMULATIVE = re.compile(r"(?<!\d)(\d+) bytes cumulative stack size")
_BARRIERS = re.compile(r"used (?<!\d)(\d+) barriers")
_PTX_ENTRY = re.compile(r"\.entry\s+([^\s(]+)")
_PTX_FUNCTION = re.compile(r"^\s*(?:\.visible\s+|\.weak\s+)?\.(?:entry|func)\b", re.MULTILINE)
_PTX_EXTERN_SHARED = re.compile(r"\.extern\s+\.shared\b[^;]*?([A-Za-z_$][\w$]*)\s*\[\s*\]")
_PTX_BOUNDS = re.compile(r"\.(reqntid|maxntid)\s+(\d+(?:\s*,\s*\d+)*)")


class ResourceStatus(StrEnum):
    ok = "ok"
    no_nvcc = "no_nvcc"
    compile_fail = "compile_fail"


class ResourceCheck(BaseModel):
    """Resources of every kernel in a set of .cu files, and max threads per block where `__launch_bounds__` says."""

    model_config = ConfigDict(extra="forbid")

    status: ResourceStatus
    resources: list[Resource] = Field(default_factory=list)
    threads: dict[str, int] = Field(default_factory=dict, description="function -> max threads per block")
    log: str = ""
    seconds: float = 0.0
    cached: bool = False
    key: str = ""


# -- pure parsing -----------------------------------------------------------------------------------


@dataclass
class _Entry:
    name: str
    arch: str
    registers: int | None = None
    smem: int = 0
    stack: int = 0
    cumulative: int = 0
    stores: int = 0
    loads: int = 0
    barriers: int | None = None

    def frame(self, values: tuple[int, int, int]) -> None:
        self.stack, self.stores, self.loads = values

    def resource(self) -> Resource:
        return Resource(
            function=self.name,
            registers=self.registers or 0,
            spill_bytes=self.stores + self.loads,
            spill_store_bytes=self.stores,
            spill_load_bytes=self.loads,
            smem_bytes=self.smem,
            stack_bytes=max(self.stack, self.cumulative),
            barriers=self.barriers,
        )


NUMBER_CAP = 10**18  # a count longer than 18 digits is read as this (never as 0, never as a crash)


def _number(digits: str) -> int:
    """A count ptxas printed; the compiler runs on PR code, so its output is untrusted and may be absurd."""
    return int(digits) if len(digits) <= 18 else NUMBER_CAP


def _int(pattern: re.Pattern[str], line: str) -> int:
    m = pattern.search(line)
    return _number(m.group(1)) if m else 0


def parse_ptxas(text: str, arch: str | None = None) -> list[Resource]:
    """Entry functions (kernels) in `ptxas -v` output, in order, with mangled names.

    Only "Compiling entry function" names are kernels; "Function properties" of device functions are skipped.
    stack_bytes is the larger of the own stack frame and the cumulative stack size (callees included) when
    ptxas prints one. With several architectures in one output a kernel appears once per architecture:
    pass `arch` ("sm_90a") to keep one.
    """
    entries: list[_Entry] = []
    current: _Entry | None = None
    props: str | None = None
    pending: dict[str, tuple[int, int, int]] = {}  # frames printed before their entry's "Compiling" line
    for line in text.splitlines():
        if m := _ENTRY.search(line):
            current = _Entry(name=m.group(1), arch=m.group(2))
            entries.append(current)
            if current.name in pending:
                current.frame(pending.pop(current.name))
            props = None
        elif m := _PROPS.search(line):
            props = m.group(1)
        elif _STACK.search(line):  # "N bytes stack frame, N bytes spill stores, N bytes spill loads"
            frame = (_int(_STACK, line), _int(_STORES, line), _int(_LOADS, line))
            if current is not None and props == current.name:
                current.frame(frame)
            elif props is not None:
                pending[props] = frame
        elif (m := _USED.search(line)) and current is not None and current.registers is None:
            current.registers = _number(m.group(1))
            current.smem = _int(_SMEM, line)
            current.cumulative = _int(_CUMULATIVE, line)
            if m := _BARRIERS.search(line):
                current.barriers = _number(m.group(1))
    return [e.resource() for e in entries if arch is None or e.arch == arch]


def parse_ptx_threads(ptx: str) -> dict[str, int]:
    """Max threads per block of each PTX entry with `.reqntid`/`.maxntid` (what `__launch_bounds__` emits)."""
    threads: dict[str, int] = {}
    for m in _PTX_ENTRY.finditer(ptx):
        body = ptx.find("{", m.end())
        header = ptx[m.end() : body if body >= 0 else len(ptx)]
        bounds = {
            kind: math.prod(_number(d.strip()) for d in dims.split(",")) for kind, dims in _PTX_BOUNDS.findall(header)
        }
        if bounds:
            threads[m.group(1)] = bounds.get("reqntid") or bounds["maxntid"]
    return threads


def parse_ptx_extern_smem(ptx: str) -> set[str]:
    """PTX entries whose body uses a module's `.extern .shared` array: `extern __shared__`, sized at launch.

    A body runs from its `.entry` to the next `.entry`/`.func`; device functions are inlined at -O3.
    """
    arrays = set(_PTX_EXTERN_SHARED.findall(ptx))
    if not arrays:
        return set()
    starts = [m.start() for m in _PTX_FUNCTION.finditer(ptx)] + [len(ptx)]
    users = set()
    for m in _PTX_ENTRY.finditer(ptx):
        end = next(s for s in starts if s > m.start())
        body = ptx[m.end() : end]
        if any(re.search(rf"(?<![\w$]){re.escape(a)}(?![\w$])", body) for a in arrays):
            users.add(m.group(1))
    return users


def _roots(sources: list[Path], include_dirs: list[Path]) -> list[Path]:
    roots: list[Path] = []
    for d in [s.parent for s in sources] + include_dirs:
        if d.is_dir() and d not in roots:
            roots.append(d)
    return roots


def cache_key(sources: list[Path], include_dirs: list[Path], flags: list[str], arch: str, toolchain: str) -> str:
    """sha256 over the source files of every kernel folder and include dir, the flags, arch and toolchain.

    Paths enter only relative to their folder, so the same tree checked out elsewhere (a worktree) hits.
    """
    sources = [s.resolve() for s in sources]
    roots = _roots(sources, [d.resolve() for d in include_dirs])
    h = hashlib.sha256(KEY_VERSION.encode() + b"\0")
    for i, root in enumerate(roots):
        for path in sorted(p for p in root.rglob("*") if p.is_file() and p.suffix in SOURCE_SUFFIXES):
            h.update(f"{i}:{path.relative_to(root).as_posix()}\0".encode())
            h.update(hashlib.sha256(path.read_bytes()).digest())
    meta = {
        "sources": [f"{roots.index(s.parent)}:{s.name}" for s in sources],
        "includes": len(include_dirs),
        "flags": flags,
        "arch": arch,
        "toolchain": toolchain,
    }
    h.update(json.dumps(meta, sort_keys=True).encode())
    return h.hexdigest()


def _tail(text: str, lines: int = LOG_TAIL_LINES) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


# -- the subprocess edge ----------------------------------------------------------------------------


@dataclass
class _Compiled:
    source: Path
    ok: bool
    output: str
    ptx: dict[str, int]
    seconds: float
    timed_out: bool = False
    extern_smem: set[str] = field(default_factory=set)


@cache
def _nvcc_version(nvcc: str) -> str:
    try:
        proc = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return proc.stdout.strip() or "unknown"


def demangler(nvcc: str) -> str | None:
    """cu++filt next to nvcc (or in $CUDA_HOME/bin), else cu++filt or c++filt on the PATH."""
    dirs = [Path(nvcc).parent, Path(nvcc).resolve().parent]
    if cuda_home := os.environ.get("CUDA_HOME"):
        dirs.append(Path(cuda_home) / "bin")
    for d in dirs:
        if os.access(d / "cu++filt", os.X_OK):
            return str(d / "cu++filt")
    return shutil.which("cu++filt") or shutil.which("c++filt")


def demangle(names: list[str], tool: str | None) -> dict[str, str]:
    """mangled -> readable; names stay mangled when there is no tool or it misbehaves."""
    same = {n: n for n in names}
    if not names or tool is None:
        return same
    try:
        proc = subprocess.run([tool, *names], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        log.warning("demangling with %s failed: %s", tool, exc)
        return same
    out = proc.stdout.splitlines()
    if proc.returncode != 0 or len(out) != len(names):
        log.warning("demangling with %s failed (rc %s); keeping mangled names", tool, proc.returncode)
        return same
    return {n: d.strip() or n for n, d in zip(names, out, strict=True)}


def _command(nvcc: str, source: Path, include_dirs: list[Path], flags: list[str], arch: str, tmp: str) -> list[str]:
    """nvcc for one .cu, with paths as the sandbox sees them: the source's folder at SRC, a private tmp at OUT."""
    includes = [f"-I{SRC}"] + [
        f"-I{SRC}/{d.resolve().relative_to(source.parent.resolve())}"
        for d in include_dirs
        if d.resolve() != source.parent.resolve() and d.resolve().is_relative_to(source.parent.resolve())
    ]
    return [
        *(nvcc, "-std=c++17", "-O3", f"-arch={arch}", "-Xptxas", "-v"),
        *("-keep", "-keep-dir", tmp),  # the kept .ptx carries .maxntid; one compile, no second pass
        *includes,
        *flags,
        *("-c", f"{SRC}/{source.name}", "-o", f"{tmp}/{source.stem}.o"),
    ]


def _compile_one(
    nvcc: str, source: Path, include_dirs: list[Path], flags: list[str], arch: str, sandbox: Sandbox
) -> _Compiled:
    """Compile one .cu in the sandbox: the kernel folder read-only, nothing else of the host's, no secrets."""
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="opgate-ptxas-") as tmp:
        spec = Spec(binds=[Bind(source.parent.resolve(), SRC), Bind(Path(tmp), OUT, writable=True)], cwd=OUT)
        cmd = _command(nvcc, source, include_dirs, flags, arch, OUT)
        log.debug("%s", " ".join(cmd))
        code, output = sandbox.run(spec, cmd, timeout=COMPILE_TIMEOUT_S)
        ok, timed_out = code == 0, code is None
        threads: dict[str, int] = {}
        extern: set[str] = set()
        for ptx in sorted(Path(tmp).glob("*.ptx")):
            if not ptx.is_file() or ptx.is_symlink():
                continue
            text = ptx.read_text(errors="replace")
            threads.update(parse_ptx_threads(text))
            extern |= parse_ptx_extern_smem(text)
    return _Compiled(source, ok, output, threads, time.perf_counter() - started, timed_out, extern)


def _load_cached(path: Path) -> ResourceCheck | None:
    try:
        return ResourceCheck.model_validate_json(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValidationError) as exc:
        log.warning("ignoring unreadable resource cache %s: %s", path, exc)
        return None


def _store(path: Path, check: ResourceCheck) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(check.model_dump_json(indent=2))
    tmp.replace(path)


def compile_resources(
    sources: list[Path],
    include_dirs: list[Path],
    flags: list[str],
    *,
    arch: str = "sm_90a",
    cache_dir: Path | None,
    sandbox: Sandbox | None = None,
) -> ResourceCheck:
    """Compile every .cu in `sources` for `arch` (nothing runs) and report each kernel's ptxas resources.

    `flags` go after the defaults (so `-O2` or `-std=c++20` there wins) and usually hold the tunables'
    `-DKEY=value` defines. A result for the same key is read from `cache_dir` instead of compiling again.
    """
    started = time.perf_counter()
    sandbox = sandbox or Sandbox.detect()
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        message = "nvcc not found on PATH: compile-only resource check skipped (install the CUDA toolkit)"
        log.warning("%s", message)
        return ResourceCheck(status=ResourceStatus.no_nvcc, log=message)
    cu = [s.resolve() for s in sources if s.suffix == ".cu"]
    if not cu:
        return ResourceCheck(status=ResourceStatus.ok, log="no .cu sources")
    tool = demangler(nvcc)
    key = cache_key(cu, include_dirs, flags, arch, f"{_nvcc_version(nvcc)}|{tool}")
    entry = cache_dir / f"resources-{key[:32]}.json" if cache_dir is not None else None
    if entry is not None and (hit := _load_cached(entry)) is not None and hit.key == key:
        log.info("resource check cached (%s)", key[:16])
        return hit.model_copy(update={"cached": True, "seconds": round(time.perf_counter() - started, 3)})

    log.info("compiling %d .cu file(s) for %s with ptxas -v", len(cu), arch)
    workers = max(1, min(len(cu), os.cpu_count() or 1))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        compiled = list(pool.map(lambda s: _compile_one(nvcc, s, include_dirs, flags, arch, sandbox), cu))
    check = _assemble(compiled, tool, key, time.perf_counter() - started)
    if entry is not None and not any(c.timed_out for c in compiled):  # a timeout may pass next time
        _store(entry, check)
    return check


def _assemble(compiled: list[_Compiled], tool: str | None, key: str, seconds: float) -> ResourceCheck:
    resources = [r for c in compiled for r in parse_ptxas(c.output)]
    threads = {name: n for c in compiled for name, n in c.ptx.items()}
    extern = {name for c in compiled for name in c.extern_smem}
    names = demangle(sorted({r.function for r in resources} | set(threads)), tool)
    failed = [c for c in compiled if not c.ok]
    shown = failed or compiled
    text = "\n".join(f"== {c.source.name} ({'ok' if c.ok else 'failed'}, {c.seconds:.1f} s)\n{c.output}" for c in shown)
    return ResourceCheck(
        status=ResourceStatus.compile_fail if failed else ResourceStatus.ok,
        resources=[
            r.model_copy(update={"function": names[r.function], "extern_smem": r.function in extern}) for r in resources
        ],
        threads={names[n]: t for n, t in threads.items()},
        log=_tail(text),
        seconds=round(seconds, 3),
        key=key,
    )
