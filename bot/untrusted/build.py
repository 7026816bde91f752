"""Build a kernel's torch extension with ninja inside the sandbox, from content-keyed objects.

Pipeline, visible in the function names: `plan_units` (which sources are bindings, which are kernel
bodies) → `unit_key` per object → `build` writes a ninja file for the missing objects and the link,
runs ninja in the sandbox (kernel folder read-only, a private output folder), then hashes what came out
and moves it into the store → a `Built` record whose sha256 every later load checks (`verify`).

A binding (a source that includes a torch header) is compiled without the tunable defines, so it is
compiled once per binding source and toolchain; a tunable or kernel-body change recompiles only the
body (seconds) and relinks. A binding whose first include is torch's extension header is compiled with a
precompiled one (`pch.py`), built once per toolchain and flag set into the store (by the second such binding).
Nothing is imported at build time. Sandboxed processes never see the store: objects and the .so are handed to them
one file at a time (a precompiled header as its own folder: the .gch and its stub), read-only, after their hash
was checked.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import shutil
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from bot.config.manifest_tables import BuildSpec
from bot.errors import BuildError
from bot.models.report import CompileError
from bot.untrusted import pch
from bot.untrusted.sandbox import Bind, Sandbox, Spec
from bot.untrusted.toolchain import EXT_NAME, Toolchain, toolchain
from bot.verdict.compile_errors import build_errors, manifest_error

HEADER_SUFFIXES = {".h", ".hh", ".hpp", ".inl", ".cuh"}
UNIT_SUFFIXES = {".c", ".cc", ".cpp", ".cxx", ".cu"}
CUDA_ONLY_SUFFIXES = {".cu", ".cuh"}
KEY_VERSION = "opgate.build/2"
BUILD_TIMEOUT_S = 1800
SRC, OBJ, OUT, INC = "/opgate/src", "/opgate/obj", "/opgate/build", "/opgate/inc"
_TORCH_INCLUDE = re.compile(rb"#\s*include\s*[<\"](torch|ATen|c10|pybind11)/")
_LOCAL_INCLUDE = re.compile(rb"#\s*include\s*\"([^\"]+)\"")


class Built(BaseModel):
    """Outcome of one build; when `ok`, `so_path` holds a file whose sha256 is `sha256`."""

    model_config = ConfigDict(frozen=True)

    ok: bool
    device: Literal["cpu", "cuda"]
    key: str
    module: str = EXT_NAME
    entry: str = ""
    so_path: str | None = None
    sha256: str = ""
    seconds: float = 0.0
    cached: bool = False
    compiled: list[str] = []
    log_tail: str = ""
    errors: list[CompileError] = []  # the first error of each failed unit, as the repository names its file


def same_binary(a: Built, b: Built) -> bool:
    """Whether two builds are the same extension called the same way: the same build key, or byte for byte the same
    ext.so (its recorded sha256, which `verify` checks before it is loaded) with the same module and entry — a
    comment-only change compiles to the very bytes base has, whose latency and counts cannot differ from base's."""
    if not (a.ok and b.ok):
        return False
    return a.key == b.key or (bool(a.sha256) and a.sha256 == b.sha256 and (a.module, a.entry) == (b.module, b.entry))


class Unit(BaseModel):
    """One compilation unit: a binding (torch headers, no tunables) or a kernel body (tunables, no torch)."""

    model_config = ConfigDict(frozen=True)

    source: str
    binding: bool
    nvcc: bool
    key: str = ""


def defines(config: dict[str, object]) -> list[str]:
    """Each tunable becomes `-DKEY=value` (values were checked against the manifest first)."""
    return [f"-D{key.upper()}={value}" for key, value in sorted(config.items())]


def _sha(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def plan_units(folder: Path, spec: BuildSpec, device: str) -> list[Unit]:
    """Every source of the build spec, classified; a CPU build never compiles a .cu file."""
    units = []
    for source in spec.sources:
        path = folder / source
        if not path.is_file() or not path.resolve().is_relative_to(folder.resolve()):
            raise BuildError(f"{source}: not a file inside the kernel folder")
        if path.suffix not in UNIT_SUFFIXES:
            continue  # a header listed among the sources
        if device == "cpu" and path.suffix in CUDA_ONLY_SUFFIXES:
            continue
        binding = bool(_TORCH_INCLUDE.search(path.read_bytes()))
        units.append(Unit(source=source, binding=binding, nvcc=path.suffix == ".cu"))
    if not units:
        raise BuildError(f"no compilation unit for {device} in {', '.join(spec.sources)}")
    return units


def error_roots(folder: Path, includes: Sequence[Path], names: Sequence[str]) -> list[tuple[str, str]]:
    """Where a compiler's paths lead -> their repository path: SRC (and the kernel folder itself, which a fallback
    sandbox's compiler prints) is `names[0]`, INC/N (and include directory N) `names[N + 1]`."""
    names = [*names, *([""] * (len(includes) + 1 - len(names)))]
    roots = [(SRC, names[0]), *((f"{INC}/{i}", names[i + 1]) for i in range(len(includes)))]
    inc = zip(includes, names[1 : len(includes) + 1], strict=True)
    host = [(str(folder.resolve()), names[0]), *((str(Path(d).resolve()), n) for d, n in inc)]
    return roots + host


def include_binds(includes: Sequence[Path]) -> list[Bind]:
    """The include directories, read-only, at INC/0, INC/1, … (where unit_flags' -I points)."""
    return [Bind(Path(d).resolve(), f"{INC}/{i}") for i, d in enumerate(includes)]


def unit_flags(unit: Unit, spec: BuildSpec, config: dict[str, object], tc: Toolchain, includes: int = 0) -> list[str]:
    """The compiler arguments of one unit, with paths as the sandbox sees them (`includes`: how many include
    directories include_binds puts at INC/N). The resource check compiles with exactly these."""
    if unit.nvcc:
        base = [*tc.nvcc_flags, *spec.cuda_cflags]
        if not any(f.startswith(("-std=", "--std")) for f in base):
            base.append("-std=c++20")
    else:
        base = ["-fPIC", *([] if any(f.startswith("-std=") for f in spec.cflags) else ["-std=c++20"]), *spec.cflags]
    dirs = [f"-I{SRC}", *(f"-I{INC}/{i}" for i in range(includes))]
    if unit.binding:  # torch's includes and extension name; never the tunables
        return [*base, *tc.binding_cflags, *dirs]
    return [*base, *defines(config), *dirs]


def _headers(folder: Path, device: str) -> list[Path]:
    files = [p for p in folder.rglob("*") if p.is_file() and p.suffix in HEADER_SUFFIXES]
    if device == "cpu":
        files = [p for p in files if p.suffix not in CUDA_ONLY_SUFFIXES]
    return sorted(files)


def compiled_files(folder: Path, spec: BuildSpec, device: str) -> set[str]:
    """The files (relative to the kernel folder) a build compiles or its key reads: its units, every header of
    the folder and the units they #include; empty when the spec names no usable source."""
    try:
        units = plan_units(folder, spec, device)
    except BuildError:
        return set()
    files = {u.source for u in units} | {h.relative_to(folder).as_posix() for h in _headers(folder, device)}
    for u in units:
        for name in _LOCAL_INCLUDE.findall((folder / u.source).read_bytes()):
            included = Path(name.decode(errors="replace"))
            if included.suffix in UNIT_SUFFIXES and (folder / included).is_file():
                files.add(included.as_posix())
    return files


def unit_key(
    folder: Path, unit: Unit, flags: list[str], tc: Toolchain, device: str, includes: Sequence[Path] = ()
) -> str:
    """sha256 over the unit, every header of the folder and of each include directory (and any unit it
    #includes), its flags and toolchain."""
    h = hashlib.sha256(KEY_VERSION.encode() + b"\0" + tc.key.encode() + b"\0")
    for i, inc in enumerate(includes):
        for path in _headers(Path(inc), device):
            h.update(f"{INC}/{i}/{path.relative_to(inc).as_posix()}\0".encode() + _sha(path).encode())
    text = (folder / unit.source).read_bytes()
    included = {m.decode(errors="replace") for m in _LOCAL_INCLUDE.findall(text)}
    extra = [folder / i for i in sorted(included) if Path(i).suffix in UNIT_SUFFIXES and (folder / i).is_file()]
    for path in [folder / unit.source, *_headers(folder, device), *extra]:
        h.update(path.relative_to(folder).as_posix().encode() + b"\0" + hashlib.sha256(path.read_bytes()).digest())
    h.update(json.dumps([unit.source, unit.binding, unit.nvcc, flags]).encode())
    return h.hexdigest()


def _keyed_units(
    folder: Path, spec: BuildSpec, config: dict[str, object], device: str, tc: Toolchain, includes: Sequence[Path]
) -> list[Unit]:
    units = plan_units(folder, spec, device)
    n = len(includes)
    return [
        u.model_copy(update={"key": unit_key(folder, u, unit_flags(u, spec, config, tc, n), tc, device, includes)})
        for u in units
    ]


def _link_key(units: list[Unit], tc: Toolchain) -> str:
    return hashlib.sha256(
        json.dumps([KEY_VERSION, tc.key, tc.ldflags, sorted(u.key for u in units)]).encode()
    ).hexdigest()


class _Record(BaseModel):
    """What the store keeps beside each object and extension (written only by the trusted side)."""

    sha256: str
    seconds: float = 0.0


def _cached(path: Path) -> bool:
    """The file exists and matches the sha256 recorded beside it (a mismatch is removed: rebuilt)."""
    record = path.with_suffix(".json")
    try:
        want = _Record.model_validate_json(record.read_text()).sha256
    except (OSError, ValidationError):
        return False
    if path.is_file() and not path.is_symlink() and _sha(path) == want:
        return True
    for p in (path, record):
        p.unlink(missing_ok=True)
    return False


def _store(produced: Path, target: Path, seconds: float) -> str:
    """Move a file the sandbox produced into the store, with its hash recorded beside it."""
    if produced.is_symlink() or not produced.is_file():
        raise BuildError(f"{produced.name}: the build did not produce a regular file")
    digest = _sha(produced)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    shutil.copyfile(produced, tmp)
    os.chmod(tmp, 0o444)
    tmp.replace(target)
    record = target.with_suffix(".json")
    tmp_record = record.with_name(f".{record.name}.{os.getpid()}.tmp")
    tmp_record.write_text(_Record(sha256=digest, seconds=round(seconds, 3)).model_dump_json())
    tmp_record.replace(record)
    return digest


def _keep_compiled(units: list[Unit], cached: set[str], output: str, work: Path, objects: Path, seconds: float) -> None:
    """Store each object of a failed build whose command ninja did not report FAILED (it ran to its end)."""
    failed = " ".join(line[len("FAILED: ") :] for line in output.splitlines() if line.startswith("FAILED: "))
    for u in units:
        produced = work / f"{u.key}.o"
        if u.key not in cached and u.key not in failed and produced.is_file() and not produced.is_symlink():
            _store(produced, objects / f"{u.key}.o", seconds)


class _Precompiled(BaseModel):
    """The precompiled headers one build uses: binds of stored ones, edges for missing ones, its log's notes."""

    binds: list[tuple[str, str]] = []  # (store folder, where the sandbox sees it)
    edges: list[tuple[str, str, list[str]]] = []  # (output, source, flags) of a header ninja compiles
    after: dict[str, str] = {}  # a unit's key -> the header it waits for
    fresh: dict[str, str] = {}  # the key of a header compiled in this build -> its output, relative to work
    notes: list[str] = []


def _precompile(
    units: list[Unit], cached: set[str], flags: dict[str, list[str]], folder: Path, spec: BuildSpec,
    includes: Sequence[Path], tc: Toolchain, build_root: Path, work: Path,
) -> _Precompiled:  # fmt: skip
    """Plan the precompiled torch header of every binding compiled here (pch.py); adds its folder to the binding's
    flags (after the kernel's own folders) and writes the stub and source of each header ninja compiles."""
    out = _Precompiled()
    if (when := pch.mode()) == "off":
        if any(u.binding and u.key not in cached for u in units):
            out.notes.append("opgate: bindings are compiled without a precompiled header: OPGATE_PCH=off")
        return out
    own = [f"-I{SRC}", *(f"-I{INC}/{i}" for i in range(len(includes)))]
    where: dict[str, str] = {}  # header key -> its folder as the sandbox sees it
    for u in units:
        if not u.binding or u.key in cached:
            continue
        text = (folder / u.source).read_bytes()
        header = pch.plan(text, u.nvcc, flags[u.key], own, spec.cflags, [folder, *map(Path, includes)], tc)
        if isinstance(header, str):
            out.notes.append(f"opgate: {u.source} is compiled without a precompiled header: {header}")
            continue
        store = build_root / "pch" / header.key
        if header.key not in where:
            n = len(where)
            if _cached(store / header.gch):
                where[header.key] = f"{pch.PCH}/{n}"
                out.binds.append((str(store), where[header.key]))
                state = "from the build store"
            elif when == "stored":
                out.notes.append(
                    f"opgate: {u.source} is compiled without a precompiled header: <{header.name}> "
                    f"{header.key[:12]} is not in the build store (OPGATE_PCH=stored never compiles one)"
                )
                continue
            elif when == "second" and not (store / pch.WANTED).is_file():  # it costs two plain compiles: not the first
                store.mkdir(parents=True, exist_ok=True)
                (store / pch.WANTED).write_text(f"{u.source}\n")
                out.notes.append(
                    f"opgate: {u.source} is compiled without a precompiled header: the first binding of these flags "
                    f"(the next one compiles <{header.name}> {header.key[:12]})"
                )
                continue
            else:
                where[header.key] = f"{OUT}/pch/{n}"
                (work / "pch" / str(n) / header.name).parent.mkdir(parents=True, exist_ok=True)
                (work / "pch" / str(n) / header.name).write_text(pch.stub(header.name))
                (work / "pch" / f"{n}.h").write_text(pch.source(header.name))
                gch = f"{where[header.key]}/{header.gch}"
                out.edges.append((gch, f"{OUT}/pch/{n}.h", list(header.flags)))
                out.fresh[header.key] = f"pch/{n}/{header.gch}"
                state = "compiled in this build"
        else:
            state = "shared with another binding"
        if header.key in out.fresh:
            out.after[u.key] = f"{where[header.key]}/{header.gch}"
        flags[u.key] = [*flags[u.key], f"-I{where[header.key]}", "-Winvalid-pch"]
        out.notes.append(f"opgate: {u.source} uses the precompiled <{header.name}> {header.key[:12]} ({state})")
    return out


def _keep_headers(headers: _Precompiled, output: str, work: Path, build_root: Path, seconds: float) -> None:
    """Store each precompiled header this build compiled (ninja did not report it FAILED), its stub beside it."""
    failed = " ".join(line for line in output.splitlines() if line.startswith("FAILED: "))
    for key, produced in headers.fresh.items():
        if produced in failed or not (work / produced).is_file():
            continue
        store = build_root / "pch" / key
        name = produced.split("/", 2)[2].removesuffix(".gch")
        (store / name).parent.mkdir(parents=True, exist_ok=True)
        (store / name).write_text(pch.stub(name))
        _store(work / produced, store / f"{name}.gch", seconds)


def verify(built: Built) -> Path:
    """The extension's path after checking its sha256 against the build record; BuildError otherwise."""
    if not built.ok or built.so_path is None:
        raise BuildError("no extension to load: the build failed")
    path = Path(built.so_path)
    if path.is_symlink() or not path.is_file() or _sha(path) != built.sha256:
        raise BuildError(f"{path}: the extension does not match its recorded sha256 (cache tampered with?)")
    return path


def _ninja(
    units: list[Unit],
    cached: set[str],
    flags: dict[str, list[str]],
    tc: Toolchain,
    headers: Sequence[tuple[str, str, list[str]]] = (),
    after: dict[str, str] | None = None,
) -> str:
    """A ninja file: compile the precompiled headers (`headers`: output, source, flags) and the units not in the
    store (`after`: a unit's key -> the precompiled header it waits for), link everything into ext.so."""
    q = shlex.join
    lines = [
        "ninja_required_version = 1.3",
        "rule cxx",
        f"  command = {shlex.quote(tc.cxx)} $flags -c $in -o $out",
        "rule nvcc",
        f"  command = {shlex.quote(tc.nvcc or 'nvcc')} $flags -c $in -o $out",
        "rule link",
        f"  command = {shlex.quote(tc.cxx)} $in $ldflags -o $out",
        "rule pch",
        f"  command = {shlex.quote(tc.cxx)} $flags -x c++-header -c $in -o $out",
    ]
    for out, src, header_flags in headers:
        lines += [f"build {out}: pch {src}", f"  flags = {q(header_flags)}"]
    after = after or {}
    objects = []
    for u in units:
        if u.key in cached:
            objects.append(f"{OBJ}/{u.key}.o")
            continue
        obj = f"{OUT}/{u.key}.o"
        objects.append(obj)
        wait = f" | {after[u.key]}" if u.key in after else ""
        lines += [f"build {obj}: {'nvcc' if u.nvcc else 'cxx'} {SRC}/{u.source}{wait}", f"  flags = {q(flags[u.key])}"]
    lines += [f"build {OUT}/ext.so: link {' '.join(objects)}", f"  ldflags = {q(tc.ldflags)}", ""]
    return "\n".join(lines)


def build(
    kernel: str,
    folder: Path,
    spec: BuildSpec,
    config: dict[str, object],
    device: Literal["cpu", "cuda"],
    build_root: Path,
    sandbox: Sandbox,
    includes: Sequence[Path] = (),
    names: Sequence[str] = (),
) -> Built:
    """Build (or reuse) the extension of `folder` with the given tunables and include directories (folders of
    the repository, bound read-only); never raises for a compile error. `names`: the repository paths of the folder
    and the include directories, which name a failed unit's first error (`errors`)."""
    started = time.perf_counter()
    try:
        tc = toolchain(device, build_root / "toolchain")
    except BuildError as exc:  # the runner's, not the manifest's
        error = CompileError(kind="compiler", message=f"the {device} toolchain: {exc}")
        return Built(ok=False, device=device, key="", entry=spec.entry, log_tail=str(exc), errors=[error])
    try:
        units = _keyed_units(folder, spec, config, device, tc, includes)
    except BuildError as exc:  # kernel.toml names a source the build cannot use: no compiler ran
        error = manifest_error(f"[build.{device}]: {exc}")
        return Built(ok=False, device=device, key="", entry=spec.entry, log_tail=str(exc), errors=[error])
    key = _link_key(units, tc)
    so = build_root / "ext" / key / "ext.so"
    if _cached(so):
        return Built(
            ok=True, device=device, key=key, entry=spec.entry, so_path=str(so), sha256=_sha(so), cached=True,
            seconds=time.perf_counter() - started,
        )  # fmt: skip
    objects = build_root / "objects"
    cached = {u.key for u in units if _cached(objects / f"{u.key}.o")}
    flags = {u.key: unit_flags(u, spec, config, tc, len(includes)) for u in units}
    work_parent = build_root / "work"
    work_parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f"{kernel}-{device}-", dir=work_parent))
    try:
        headers = _precompile(units, cached, flags, folder, spec, includes, tc, build_root, work)
        binds = [Bind(folder.resolve(), SRC), *include_binds(includes), Bind(work, OUT, writable=True)]
        binds += [Bind(objects / f"{k}.o", f"{OBJ}/{k}.o") for k in sorted(cached)]
        binds += [Bind(Path(store), target) for store, target in headers.binds]
        spec_ = Spec(binds=binds, cwd=OUT)
        ninja = _ninja(units, cached, flags, tc, headers.edges, headers.after)
        (work / "build.ninja").write_text(sandbox.localize(spec_, ninja))
        jobs = str(max(1, min(len(units) + len(headers.edges), os.cpu_count() or 1)))
        code, output = sandbox.run(spec_, ["ninja", "-C", OUT, "-j", jobs], timeout=BUILD_TIMEOUT_S)
        seconds = time.perf_counter() - started
        if code is not None:
            _keep_headers(headers, output, work, build_root, seconds)
        refused = [f"opgate: GCC did not use a precompiled header: {r}" for r in pch.refusals(output)]
        tail = "\n".join([*headers.notes, *refused, *output.strip().splitlines()[-40:]])
        if code != 0:
            if code is not None:  # the objects that did compile are kept: the other side, the next try reuse them
                _keep_compiled(units, cached, output, work, objects, seconds)
            errors = build_errors(output, error_roots(folder, includes, names))
            return Built(
                ok=False, device=device, key=key, entry=spec.entry, seconds=seconds, log_tail=tail, errors=errors
            )
        compiled = [u for u in units if u.key not in cached]
        for u in compiled:
            _store(work / f"{u.key}.o", objects / f"{u.key}.o", seconds)
        digest = _store(work / "ext.so", so, seconds)
    except BuildError as exc:
        return Built(ok=False, device=device, key=key, entry=spec.entry, log_tail=str(exc))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return Built(
        ok=True, device=device, key=key, entry=spec.entry, so_path=str(so), sha256=digest, seconds=seconds,
        compiled=[u.source for u in compiled], log_tail=tail,
    )  # fmt: skip
