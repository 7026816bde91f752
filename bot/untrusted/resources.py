"""Compile-only GPU resource check: each .cu compiled as the build compiles it, plus `-Xptxas -v`, parsed into
Resource rows (no GPU needed); base's and head's units at once, each unit once per key."""

from __future__ import annotations

import hashlib
import itertools
import json
import logging
import math
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from enum import StrEnum
from functools import cache
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from bot.models.report import CompileError, Resource, UnitCompile
from bot.untrusted.build import HEADER_SUFFIXES, INC, UNIT_SUFFIXES, error_roots, include_binds
from bot.untrusted.sandbox import Bind, Sandbox, Spec
from bot.untrusted.unit_keys import cores, preprocessed, remember, remembered, slot, text_key
from bot.verdict.compile_errors import first_error
from bot.verdict.flags import default_target, nvcc_options

log = logging.getLogger(__name__)

COMPILE_TIMEOUT_S = 900
LOG_TAIL_LINES = 60
KEY_VERSION = "opgate.resources/6"  # bump when the parse or the command line changes
SRC, OUT = "/opgate/src", "/opgate/build"  # as in bot.untrusted.build: the same paths, the same command line
Ships = Literal["object", "cubin"]  # what the build makes of a unit: kernel.toml's [build.cuda] ships

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
_LOCAL_INCLUDE = re.compile(rb'#\s*include\s*"([^"]+)"')
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
    errors: list[CompileError] = Field(default_factory=list, description="the first error of each failed unit")
    seconds: float = 0.0
    cached: bool = False
    key: str = ""
    units: list[UnitCompile] = Field(default_factory=list, description="each unit: compiled, or read from the cache")


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


def _tail(text: str, lines: int = LOG_TAIL_LINES) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


# -- the subprocess edge ----------------------------------------------------------------------------


@dataclass(frozen=True)
class CompileJob:
    """One .cu as the build compiles it: the kernel folder at SRC, include directories at INC/0…, and the build's
    own flags for the unit (paths as the sandbox sees them; its target options as `for_arch` kept them, none: the
    check's `default_target`). `names`: the repository paths of the folder and the include directories, which name
    a compile error's file. `ships`: what the build makes of it, an object (`-c`) or a JIT's cubin (`-cubin`)."""

    source: Path
    folder: Path
    includes: tuple[Path, ...] = ()
    flags: tuple[str, ...] = ()
    names: tuple[str, ...] = ()
    ships: Ships = "object"

    @property
    def relative(self) -> str:
        return self.source.resolve().relative_to(self.folder.resolve()).as_posix()

    @property
    def named(self) -> str:
        """The unit as the repository names it (the kernel folder's path, then the unit's)."""
        return "/".join(p for p in (self.names[0] if self.names else "", self.relative) if p)

    def error(self, result: UnitResult) -> CompileError:
        """The first error of this job's failed compile, as the repository names it."""
        unit = self.named
        if result.timed_out:
            return CompileError(kind="compiler", path=unit, message=f"timed out after {COMPILE_TIMEOUT_S} s")
        found = first_error(result.output, error_roots(self.folder, self.includes, self.names), unit)
        return found or CompileError(kind="compiler", path=unit, message="failed without printing an error")


class UnitResult(BaseModel):
    """What compiling one job printed and its PTX said (the cache keeps one per job key)."""

    model_config = ConfigDict(extra="forbid")

    source: str
    ok: bool
    output: str = ""
    threads: dict[str, int] = Field(default_factory=dict)
    extern_smem: list[str] = Field(default_factory=list)
    seconds: float = 0.0
    timed_out: bool = False
    cached: bool = False


@cache
def nvcc_version(nvcc: str) -> str:
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


def unit_headers(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file() and p.suffix in HEADER_SUFFIXES)


def job_key(job: CompileJob, arch: str, toolchain: str) -> str:
    """sha256 over the unit, every header of its folder and include directories (any other unit it #includes),
    its flags, arch and toolchain. Paths enter relative to their folder: the same tree checked out elsewhere hits,
    and a unit base and head share compiles once."""
    h = hashlib.sha256(KEY_VERSION.encode() + b"\0")
    source = job.source.resolve()
    text = source.read_bytes()
    included = [(source.parent / i.decode(errors="replace")).resolve() for i in _LOCAL_INCLUDE.findall(text)]
    inside = job.folder.resolve()
    extra = [p for p in included if p.suffix in UNIT_SUFFIXES and p.is_file() and p.is_relative_to(inside)]
    for i, root in enumerate([job.folder, *job.includes]):
        files = unit_headers(root) + (extra if i == 0 else [])
        for path in files:
            h.update(f"{i}:{path.resolve().relative_to(root.resolve()).as_posix()}\0".encode())
            h.update(hashlib.sha256(path.read_bytes()).digest())
    h.update(hashlib.sha256(text).digest())
    meta = {"source": job.relative, "includes": len(job.includes), "flags": job.flags, "ships": job.ships}
    meta |= {"arch": arch, "tc": toolchain}
    h.update(json.dumps(meta, sort_keys=True).encode())
    return h.hexdigest()


def cache_key(
    sources: list[Path], include_dirs: list[Path], flags: list[str], arch: str, toolchain: str, ships: Ships = "object"
) -> str:
    """The keys over bytes of compile_resources' jobs, combined (each remembers its unit's key of preprocessed text)."""
    jobs = _jobs(sources, include_dirs, flags, None, ships)
    return hashlib.sha256("".join(job_key(j, arch, toolchain) for j in jobs).encode()).hexdigest()


def _command(nvcc: str, job: CompileJob, arch: str) -> list[str]:
    """The build's nvcc line for the unit (its own target options, else `arch`'s default one), plus `ptxas -v` and
    the kept PTX (which carries .maxntid): `-c` to an object, or `-cubin` for a kernel that ships a cubin."""
    target = [] if any(o.is_arch for o in nvcc_options(job.flags)) else default_target(arch)
    made = ("-cubin", f"{job.source.stem}.cubin") if job.ships == "cubin" else ("-c", f"{job.source.stem}.o")
    return [
        nvcc,
        *job.flags,
        *(*target, "-Xptxas", "-v", "-keep", "-keep-dir", OUT),
        *(made[0], f"{SRC}/{job.relative}", "-o", f"{OUT}/{made[1]}"),
    ]


def job_spec(job: CompileJob, tmp: Path) -> Spec:
    """The sandbox of one compile: the kernel folder and include directories read-only, a private output folder."""
    binds = [Bind(job.folder.resolve(), SRC), *include_binds(job.includes), Bind(tmp, OUT, writable=True)]
    return Spec(binds=binds, cwd=OUT)


def _compile_one(nvcc: str, job: CompileJob, arch: str, sandbox: Sandbox) -> UnitResult:
    """Compile one unit in the sandbox: its folders read-only, nothing else of the host's, no secrets."""
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="opgate-ptxas-") as tmp:
        cmd = _command(nvcc, job, arch)
        log.debug("%s", " ".join(cmd))
        code, output = sandbox.run(job_spec(job, Path(tmp)), cmd, timeout=COMPILE_TIMEOUT_S)
        threads: dict[str, int] = {}
        extern: set[str] = set()
        for ptx in sorted(Path(tmp).glob("*.ptx")):
            if not ptx.is_file() or ptx.is_symlink():
                continue
            text = ptx.read_text(errors="replace")
            threads.update(parse_ptx_threads(text))
            extern |= parse_ptx_extern_smem(text)
    return UnitResult(
        source=job.relative,
        ok=code == 0,
        output=output,
        threads=threads,
        extern_smem=sorted(extern),
        seconds=round(time.perf_counter() - started, 3),
        timed_out=code is None,
    )


def _load_cached(path: Path) -> UnitResult | None:
    try:
        return UnitResult.model_validate_json(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValidationError) as exc:
        log.warning("ignoring unreadable resource cache %s: %s", path, exc)
        return None


def _store(path: Path, result: BaseModel) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
    tmp.write_text(result.model_dump_json(indent=2))
    tmp.replace(path)


def nvcc_path() -> str | None:
    return shutil.which("nvcc")


NO_NVCC = "nvcc not found on PATH: compile-only resource check skipped (install the CUDA toolkit)"


def compile_sides(
    sides: dict[str, list[CompileJob]],
    *,
    arch: str = "sm_90a",
    cache_dir: Path | None,
    sandbox: Sandbox | None = None,
    toolchain: str = "",
) -> dict[str, ResourceCheck]:
    """Each side's jobs compiled for `arch` (nothing runs), all at once: a unit is keyed by its preprocessed text (each
    pass of its compile, `unit_keys.py`), flags, arch and toolchain, so a unit base and head share, or whose sides
    differ only in comments, is compiled once, and a key in `cache_dir` is not compiled at all; the compiles run side
    by side, one per core. `toolchain` names what else the flags depend on. Returns side -> its ResourceCheck, whose
    `units` say which unit was compiled and which read from the cache."""
    started = time.perf_counter()
    sandbox = sandbox or Sandbox.detect()
    nvcc = nvcc_path()
    if nvcc is None:
        log.warning("%s", NO_NVCC)
        return {side: ResourceCheck(status=ResourceStatus.no_nvcc, log=NO_NVCC) for side in sides}
    tool = demangler(nvcc)
    tc = f"{nvcc_version(nvcc)}|{toolchain}"
    raw = {side: [job_key(j, arch, tc) for j in jobs] for side, jobs in sides.items()}
    by_raw: dict[str, CompileJob] = {}
    for side, jobs in sides.items():
        for r, job in zip(raw[side], jobs, strict=True):
            by_raw.setdefault(r, job)
    unit = _unit_keys(nvcc, by_raw, arch, tc, cache_dir, sandbox)
    keys = {side: [unit[r] for r in raw[side]] for side in sides}
    unique: dict[str, CompileJob] = {}
    users: dict[str, list[str]] = {}
    for side, jobs in sides.items():
        for key, job in zip(keys[side], jobs, strict=True):
            unique.setdefault(key, job)
            users.setdefault(key, []).append(side)
    results: dict[str, UnitResult] = {}
    todo = []
    for key, job in unique.items():
        entry = cache_dir / f"resources-unit-{key[:32]}.json" if cache_dir is not None else None
        hit = _load_cached(entry) if entry is not None else None
        if hit is not None and hit.source == job.relative:
            results[key] = hit.model_copy(update={"cached": True})
        else:
            todo.append(key)
    if todo:
        log.info("compiling %s for %s with ptxas -v", compile_count(unique[k] for k in todo), arch)
    counter = itertools.count(1)

    def compile_unit(key: str) -> UnitResult:
        job = unique[key]
        with slot():
            n = next(counter)
            log.info("compiling unit %d/%d: %s (%s)", n, len(todo), job.named, arch)
            result = _compile_one(nvcc, job, arch, sandbox)
        state = "compiled" if result.ok else "failed to compile"
        log.info("%s unit %d/%d: %s (%s) in %.1f s", state, n, len(todo), job.named, arch, result.seconds)
        return result

    with ThreadPoolExecutor(max_workers=max(1, min(len(todo), cores()))) as pool:
        for key, result in zip(todo, pool.map(compile_unit, todo), strict=True):
            results[key] = result
            if cache_dir is not None and not result.timed_out:  # a timeout may pass next time
                _store(cache_dir / f"resources-unit-{key[:32]}.json", result)
    seconds = time.perf_counter() - started
    out = {}
    for side, jobs in sides.items():
        check = _assemble([results[k] for k in keys[side]], tool, _combined(keys[side]), seconds, arch)
        errors = [job.error(results[k]) for k, job in zip(keys[side], jobs, strict=True) if not results[k].ok]
        units = [
            UnitCompile(
                source=unique[k].named,
                key=k[:16],
                sides=users[k],
                cached=results[k].cached,
                seconds=0.0 if results[k].cached else results[k].seconds,
            )
            for k in dict.fromkeys(keys[side])
        ]
        out[side] = check.model_copy(update={"errors": errors, "units": units})
    return out


def _unit_keys(
    nvcc: str, jobs: dict[str, CompileJob], arch: str, tc: str, cache_dir: Path | None, sandbox: Sandbox
) -> dict[str, str]:
    """Each job's key (by its key over bytes, `job_key`): of its preprocessed text where nvcc lists the steps and they
    run, remembered in `cache_dir` for the same bytes; else the key over bytes itself."""
    found = {r: k for r in jobs if (k := remembered(cache_dir, r)) is not None}
    todo = [r for r in jobs if r not in found]
    if todo:
        log.info("reading %d unit(s) as the compiler preprocesses them for %s", len(todo), arch)

    def key_of(r: str) -> str:
        job = jobs[r]
        with tempfile.TemporaryDirectory(prefix="opgate-pp-") as tmp:
            spec = job_spec(job, Path(tmp))
            text = preprocessed(_command(nvcc, job, arch), spec, Path(tmp), OUT, sandbox, timeout=COMPILE_TIMEOUT_S)
        if text is None:
            return r
        meta = {"source": job.relative, "flags": job.flags, "ships": job.ships, "arch": arch, "tc": tc}
        key = text_key(text, {**meta, "v": KEY_VERSION})
        remember(cache_dir, r, key)
        return key

    with ThreadPoolExecutor(max_workers=max(1, min(len(todo), cores()))) as pool:
        found.update(zip(todo, pool.map(key_of, todo), strict=True))
    return found


def compile_count(jobs: Iterable[CompileJob]) -> str:
    """`2 .cu file(s)`: translation units, not sides; `1 .cu file(s) (2 compiles: head's and base's versions of 1
    differ)` when a file differs between the sides and is compiled once for each."""
    every = list(jobs)
    versions: dict[str, int] = {}
    for j in every:
        versions[j.relative] = versions.get(j.relative, 0) + 1
    differ = sum(1 for n in versions.values() if n > 1)
    extra = f" ({len(every)} compiles: head's and base's versions of {differ} differ)" if differ else ""
    return f"{len(versions)} .cu file(s){extra}"


def _combined(keys: list[str]) -> str:
    return hashlib.sha256("".join(keys).encode()).hexdigest()


def _jobs(
    sources: list[Path], include_dirs: list[Path], flags: list[str], folder: Path | None, ships: Ships = "object"
) -> list[CompileJob]:
    cu = [s.resolve() for s in sources if s.suffix == ".cu"]
    includes = tuple(Path(d).resolve() for d in include_dirs)
    dirs = [f"-I{SRC}", *(f"-I{INC}/{i}" for i in range(len(includes)))]
    return [CompileJob(s, (folder or s.parent).resolve(), includes, (*dirs, *flags), ships=ships) for s in cu]


def compile_resources(
    sources: list[Path],
    include_dirs: list[Path],
    flags: list[str],
    *,
    arch: str = "sm_90a",
    cache_dir: Path | None,
    sandbox: Sandbox | None = None,
    folder: Path | None = None,
    ships: Ships = "object",
) -> ResourceCheck:
    """Compile every .cu in `sources` for `arch` (nothing runs) and report each kernel's ptxas resources.

    `folder` (default: each source's own) is bound at SRC, each include dir at INC/N, both on -I; `flags` are
    passed as given (the review passes the build's own, bot.review.resource_check); `ships = "cubin"` compiles each
    unit with `-cubin` instead of `-c` (its flags then name one target, `for_arch`). A unit whose key is in
    `cache_dir` is read from there instead of compiling again.
    """
    jobs = _jobs(sources, include_dirs, flags, folder, ships)
    if not jobs:
        return ResourceCheck(status=ResourceStatus.ok, log="no .cu sources")
    return compile_sides({"one": jobs}, arch=arch, cache_dir=cache_dir, sandbox=sandbox)["one"]


def _assemble(compiled: list[UnitResult], tool: str | None, key: str, seconds: float, arch: str) -> ResourceCheck:
    resources = [r for c in compiled for r in parse_ptxas(c.output, arch)]
    threads = {name: n for c in compiled for name, n in c.threads.items()}
    extern = {name for c in compiled for name in c.extern_smem}
    names = demangle(sorted({r.function for r in resources} | set(threads)), tool)
    failed = [c for c in compiled if not c.ok]
    shown = failed or compiled
    text = "\n".join(
        f"== {c.source} ({'ok' if c.ok else 'failed'}, {'cached' if c.cached else f'{c.seconds:.1f} s'})\n{c.output}"
        for c in shown
    )
    return ResourceCheck(
        status=ResourceStatus.compile_fail if failed else ResourceStatus.ok,
        resources=[
            r.model_copy(update={"function": names[r.function], "extern_smem": r.function in extern}) for r in resources
        ],
        threads={names[n]: t for n, t in threads.items()},
        log=_tail(text),
        seconds=round(seconds, 3),
        cached=all(c.cached for c in compiled),
        key=key,
    )
