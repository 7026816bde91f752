"""Each compiled kernel function's launch from kernel.toml `[launch]`: threads, dynamic shared memory, occupancy."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from bot.config import expr
from bot.config.manifest import MANIFEST_NAME, Expression, Kernel, Launch, LaunchFunction, is_cxx
from bot.models.report import Occupancy, Resource
from bot.verdict.occupancy import Arch, no_table, occupancy, table


@dataclass
class Described:
    """Resources with their launch and occupancy filled in; errors make the gate fail, notes are reported."""

    resources: list[Resource]
    errors: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def name_path(function: str) -> tuple[str, ...]:
    """`('deepgemm_tile', 'gemm_bf16_kernel')` from `void deepgemm_tile::gemm_bf16_kernel<128, 64>(int, …)`.

    Template arguments, parameters, a return type and `(anonymous namespace)` are dropped.
    """
    s = function.replace("(anonymous namespace)", "")
    depth, kept = 0, []
    for ch in s:
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth = max(0, depth - 1)
        elif ch == "(" and depth == 0:
            break
        elif depth == 0:
            kept.append(ch)
    head = "".join(kept).strip().rsplit(" ", 1)[-1]
    return tuple(part for part in head.split("::") if part)


def matches(key: str, function: str) -> bool:
    """Does a `[launch.functions]` key (`name` or `ns::name`) name this compiled function?

    A mangled name (no demangler on the machine) matches when it encodes every part of the key.
    """
    if "<" in key:  # one instantiation: its template arguments as the demangled name writes them
        name, args = key.split("<", 1)
        wanted = "".join(f"{name}<{args}".split())
        return "".join(plain(function).split()).split("::")[-len(name.split("::")) :] == wanted.split("::")
    parts = tuple(key.split("::"))
    if function.startswith("_Z"):
        at = 0
        for part in parts:
            found = function.find(f"{len(part)}{part}", at)
            if found < 0 or (found > 0 and function[found - 1].isdigit()):
                return False
            at = found + len(part)
        return True
    return name_path(function)[-len(parts) :] == parts


def _variables(config: dict[str, Any]) -> dict[str, int]:
    return {k: v for k, v in config.items() if isinstance(v, int) and not isinstance(v, bool)}


def _evaluate(where: str, text: Expression, env: dict[str, int], config: dict[str, Any]) -> int:
    """The value, or ValueError with a message naming where, the expression and the tunables' values."""
    try:
        if isinstance(text, str):
            for name in expr.names(expr.parse(text)):
                if name in config and name not in env:
                    raise expr.ExprError(f"tunable {name!r} = {config[name]!r} is not an integer")
        result = expr.value(text, env)
    except expr.ExprError as exc:
        shown = ", ".join(f"{k}={v}" for k, v in config.items())
        raise ValueError(f"{where} = {text!r}: {exc} (with {shown})") from None
    if result < 0:
        raise ValueError(f"{where} = {text!r} is {result}: must not be negative")
    return result


def values(launch: Launch, config: dict[str, Any], manifest: str) -> dict[str, int]:
    """The tunables and every `[launch.values]` entry, in order (ValueError naming the first that fails)."""
    env = _variables(config)
    for name, text in launch.values.items():
        env[name] = _evaluate(f"{manifest}: launch.values.{name}", text, env, config)
    return env


def _key_for(launch: Launch, function: str) -> tuple[str | None, str | None]:
    """The most qualified key naming `function`, or an error when two equally specific keys do."""

    def specific(k: str) -> tuple[int, int]:
        return ("<" in k, k.count("::"))

    keys = sorted((k for k in launch.functions if matches(k, function)), key=specific, reverse=True)
    if len(keys) > 1 and specific(keys[0]) == specific(keys[1]):
        return None, f"both {keys[0]!r} and {keys[1]!r} describe {function}"
    return (keys[0] if keys else None), None


def _dynamic(
    spec: LaunchFunction, env: dict[str, int], config: dict[str, Any], where: str, cxx: dict[str, int]
) -> int | None:
    """The dynamic smem of one description (None: not given); a C++ expression takes its folded value."""
    text = spec.dynamic_smem
    if isinstance(text, str) and is_cxx(text):
        if text not in cxx:
            raise ValueError(f"{where}.dynamic_smem = {text!r}: the compiler gave it no value (see the probe log)")
        return cxx[text]
    return None if text is None else _evaluate(f"{where}.dynamic_smem", text, env, config)


def _threads(
    spec: LaunchFunction, function: str, bounds: int | None, env: dict[str, int], config: dict[str, Any], where: str
) -> tuple[int | None, str | None]:
    """(threads per block, an error or None): the code's figure (`__launch_bounds__`, .maxntid/.reqntid) wins where
    it has one, and a kernel.toml value that disagrees with it is an error naming both."""
    if spec.threads is None:
        return bounds, None
    threads = _evaluate(f"{where}.threads", spec.threads, env, config)
    if threads == 0:
        raise ValueError(f"{where}.threads is 0")
    if bounds is not None and threads != bounds:
        return bounds, (
            f"{where}.threads = {threads} but the code says {bounds} threads per block for {function} "
            f"(__launch_bounds__, in its PTX): the occupancy uses the code's {bounds}; correct kernel.toml or drop it"
        )
    return threads, None


def base_name(function: str) -> str:
    """The kernel function a compiled name instantiates (`vec_kernel` of `void vec_kernel<128>(float*)`)."""
    path = name_path(function)
    return path[-1] if path else function


def instances(functions: list[str]) -> str:
    """One function, or a template's instantiations as one subject: `vec_kernel (3 instantiations: …)`."""
    if len(functions) == 1:
        return functions[0]
    return f"{base_name(functions[0])} ({len(functions)} instantiations: {'; '.join(functions)})"


def describe(
    resources: list[Resource],
    bounds: dict[str, int],
    launch: Launch,
    config: dict[str, Any],
    manifest: str,
    cxx: dict[str, int] | None = None,
    arch: str = "sm_90a",
) -> Described:
    """Fill in threads, dynamic shared memory and occupancy of every function, from `launch` over `config`.

    `bounds`: threads per block from `__launch_bounds__` (what ptxas' PTX says), which a `threads` in `launch` must
    equal; `cxx`: the folded value of each C++ dynamic_smem expression. A function without a
    description uses its launch bounds and no dynamic shared memory, unless its PTX uses `extern __shared__`
    memory: then its size is unknown, which is an error (the occupancy and the smem limit would be blind).
    """
    out = Described(resources=[])
    sm = table(arch)
    if sm is None and resources and (missing := no_table(arch)):
        out.notes.append(missing)
    try:
        env = values(launch, config, manifest)
    except ValueError as exc:
        out.errors.append(str(exc))
        env = None
    used: set[str] = set()
    unsized: dict[str, list[str]] = {}  # kernel function -> its instantiations whose dynamic smem nobody sized
    for r in resources:
        threads, dynamic = bounds.get(r.function), None
        known = True  # False once an error about this function is reported: its launch is unknown
        key, clash = _key_for(launch, r.function)
        if clash:
            out.errors.append(f"{manifest}: {clash}")
            known = False
        elif key is not None:
            used.add(key)
            known = env is not None  # else [launch.values] failed, reported above
            if env is not None:
                where = f"{manifest}: launch.functions.{key}"
                spec = launch.functions[key]
                try:
                    threads, stale = _threads(spec, r.function, threads, env, config, where)
                    if stale:
                        out.errors.append(stale)  # the occupancy below is the code's, not the stale value's
                except ValueError as exc:
                    out.errors.append(str(exc))
                    known = False
                try:
                    dynamic = _dynamic(spec, env, config, where, cxx or {})
                except ValueError as exc:
                    out.errors.append(str(exc))
                    known = False
        if known and dynamic is None and r.extern_smem:
            unsized.setdefault(base_name(r.function), []).append(r.function)
            known = False
        dynamic = (dynamic or 0) if known else None
        occ = None
        if threads is None:
            out.notes.append(
                f"occupancy of {r.function} not computed: threads per block unknown "
                f"(give __launch_bounds__ or threads in {manifest} [launch.functions])"
            )
        elif dynamic is not None and sm is not None:
            barriers = 1 if r.barriers is None else r.barriers
            occ = occupancy(r.registers, threads, r.smem_bytes, dynamic, barriers, arch=sm)
        out.resources.append(r.model_copy(update={"threads": threads, "dynamic_smem_bytes": dynamic, "occupancy": occ}))
    out.errors.extend(
        f"{instances(functions)} uses dynamic shared memory (extern __shared__) that {manifest} does not size: "
        f"add [launch.functions.{name}] dynamic_smem"
        for name, functions in unsized.items()
    )
    for key in sorted(set(launch.functions) - used):
        out.notes.append(f"{manifest}: launch.functions.{key} names no compiled kernel function")
    return out


def describe_kernel(
    kernel: Kernel,
    resources: list[Resource],
    bounds: dict[str, int],
    cxx: dict[str, int] | None = None,
    arch: str = "sm_90a",
) -> Described:
    """`describe` with the kernel's own manifest and tunable config (each side describes its own code)."""
    manifest = f"{kernel.path}/{MANIFEST_NAME}"
    return describe(resources, bounds, kernel.manifest.launch, kernel.config, manifest, cxx, arch)


# -- the launches as the code makes them: read back by the fold, per instantiation --------------------------------

DECLARED = "launch figures declared, not measured"


@dataclass(frozen=True)
class ReadBack:
    """One value the fold read back: the launch (`path:line kernel<<<…>>>`), which argument (`threads`, `smem`),
    the launched instantiation (`plain`: `ns::gemm<128, 64>`; "" when the launch names no function the fold could
    take the address of) and the value."""

    site: str
    what: str
    function: str
    value: int


@dataclass(frozen=True)
class SiteTouch:
    """A changed file that can move a kernel's launches: the sentence naming both, the launches, the kernel's name."""

    text: str
    sites: tuple[str, ...]
    kernel: str


_ANONYMOUS = "(anonymous namespace)"
_MARKER = re.compile(r"opgate_fold::site_value<\d+, &?(.*), \d+ull>\(\)$")


def plain(function: str) -> str:
    """`ns::gemm<128, 64, false>` of `void ns::gemm<128, 64, false>(int, float*)` or of `&(void ns::gemm<…>(…))`:
    the instantiation without return type and parameters, as both ptxas' and a fold marker's demangled names give it."""
    s = function.strip().replace(_ANONYMOUS, "\0")
    while s.startswith("(") and s.endswith(")"):
        s = s[1:-1].strip()
    depth, cut = 0, len(s)
    for i, ch in enumerate(s):
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif ch == "(" and depth == 0:
            cut = i
            break
    s = s[:cut].strip()
    depth, start = 0, 0
    for i, ch in enumerate(s):
        depth += {"<": 1, ">": -1}.get(ch, 0)
        if ch == " " and depth == 0:
            start = i + 1
    return s[start:].replace("\0", _ANONYMOUS)


def marked_function(demangled: str) -> str:
    """The launched instantiation a demangled fold marker names (`opgate_fold::site_value<0, &(void f<…>(…)), 96ull>()`
    gives `f<…>`); "" when it is not a marker."""
    m = _MARKER.search(demangled)
    return plain(m.group(1)) if m else ""


def read_back(
    resources: list[Resource], values: list[ReadBack], arch: str = "sm_90a"
) -> tuple[list[Resource], list[str]]:
    """The resources with every launch the fold read back replacing kernel.toml's figures (kept beside as declared)
    and the occupancy recomputed; notes where the two disagree or one instantiation is launched at several sizes."""
    sm = table(arch)
    notes: list[str] = []
    out: list[Resource] = []
    for r in resources:
        mine = [v for v in values if v.function and v.function == plain(r.function)]
        threads = sorted({v.value for v in mine if v.what == "threads"})
        smem = sorted({v.value for v in mine if v.what == "smem"})
        if not smem:
            out.append(r)
            continue
        dynamic = smem[-1]  # more shared memory never raises occupancy: the largest is the worst
        block, occ = _worst(r, threads or ([r.threads] if r.threads else []), dynamic, sm)
        if len(smem) > 1 or len(threads) > 1:
            notes.append(
                f"{r.function} is launched with {', '.join(f'{s:,} B' for s in smem)} of dynamic shared memory and "
                f"{', '.join(map(str, threads)) or 'its declared'} threads: judged at the largest shared memory and "
                "the block size with the fewest resident warps"
            )
        if r.dynamic_smem_bytes != dynamic or (threads and r.threads != block):
            sites = ", ".join(sorted({v.site for v in mine}))
            notes.append(
                f"{r.function}: kernel.toml [launch] declares {_shown(r.dynamic_smem_bytes)} dynamic shared memory and "
                f"{r.threads if r.threads is not None else '?'} threads; the launch ({sites}) asks {dynamic:,} B and "
                f"{block if block is not None else '?'} threads: judged as the code launches it"
            )
        update = {
            "threads": block,
            "dynamic_smem_bytes": dynamic,
            "occupancy": occ,
            "launch_from": "read back",
            "declared_threads": r.threads,
            "declared_dynamic_smem_bytes": r.dynamic_smem_bytes,
        }
        out.append(r.model_copy(update=update))
    return out, notes


def _worst(r: Resource, blocks: list[int], dynamic: int, sm: Arch | None) -> tuple[int | None, Occupancy | None]:
    """The block size (of those a launch used) with the fewest resident warps per SM, and that occupancy: a marker
    the kernel's own code adds can only make its verdict worse (occupancy is not monotone in the block size)."""
    if not blocks or sm is None:
        return (blocks[-1] if blocks else None), None
    barriers = 1 if r.barriers is None else r.barriers
    found = [(occupancy(r.registers, b, r.smem_bytes, dynamic, barriers, arch=sm), b) for b in blocks]
    occ, block = min(found, key=lambda pair: (pair[0].warps_per_sm, -pair[1]))
    return block, occ


def _shown(smem: int | None) -> str:
    return "no" if smem is None else f"{smem:,} B of"


def undecided_launches(
    resources: list[Resource], touched: list[SiteTouch], unfolded: dict[str, list[str]]
) -> list[str]:
    """What a changed file can move and nothing read back: "launch figures declared, not measured: …" per launch
    (`unfolded`: launch -> why the fold gave it no value). Never "unchanged from base" for these."""
    found: list[str] = []
    for t in touched:
        named = [r for r in resources if name_path(r.function)[-1:] == (t.kernel,)]
        if reasons := [why for site in t.sites for why in unfolded.get(site, [])]:
            why = "; ".join(dict.fromkeys(reasons))
        elif not named:
            why = f"no compiled kernel function is named {t.kernel!r}, so its launch cannot be read back"
        elif declared := [r.function for r in named if r.launch_from != "read back"]:
            why = f"the compiler read back no launch of {', '.join(declared)}"
        else:
            continue
        found.append(f"{DECLARED}: {t.text} ({why}): its shared memory and occupancy are undecided")
    return list(dict.fromkeys(found))


def shared_keys(resources: list[Resource], launch: Launch, manifest: str) -> list[str]:
    """Notes for a `[launch.functions]` key that describes more than one compiled instantiation with kernel.toml's
    figures: none of them has figures of its own (the code's launches, read back, give each its own)."""
    notes = []
    for key in (k for k in launch.functions if "<" not in k):
        own = [k for k in launch.functions if "<" in k]
        named = [
            r.function
            for r in resources
            if matches(key, r.function) and r.launch_from == "declared" and not any(matches(k, r.function) for k in own)
        ]
        if len(named) > 1:
            notes.append(
                f"{manifest}: launch.functions.{key} describes {len(named)} instantiations ({'; '.join(named)}) "
                "with one declared figure: none has launch figures of its own"
            )
    return notes
