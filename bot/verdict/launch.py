"""Each compiled kernel function's launch from kernel.toml `[launch]`: threads, dynamic shared memory, occupancy."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from bot.config import expr
from bot.config.launch_sites import TouchKind
from bot.config.manifest import MANIFEST_NAME, Kernel
from bot.config.manifest_tables import Expression, Launch, LaunchFunction, is_cxx
from bot.models.finding import Phrase
from bot.models.report import Occupancy, Resource
from bot.verdict.names import LONGEST, base_name, listed, name_path, short_names
from bot.verdict.occupancy import Arch, no_table_phrase, occupancy, table
from bot.wording import messages


class LaunchError(ValueError):
    """A launch description that cannot be evaluated: its phrase (the catalog's), its English text the message."""

    def __init__(self, phrase: Phrase) -> None:
        super().__init__(messages.phrase(phrase))
        self.phrase = phrase


def _phrase(key: str, /, **params: str | int) -> Phrase:
    """A phrase; a long `function` (a template instantiation's demangled name) is kept whole as data and shown by
    its short name (`bot/verdict/names.py`)."""
    function = params.get("function")
    if isinstance(function, str) and len(function) > LONGEST:
        return Phrase(
            key=key, params=params, phrases={"function": [Phrase.as_written(short_names([function])[function])]}
        )
    return Phrase(key=key, params=params)


def _listed(key: str, functions: list[str], /, sep: str = "; ", **params: str | int) -> Phrase:
    """A phrase naming several functions: `functions` whole as data (joined by `sep`), shown short (`listed`)."""
    whole = sep.join(functions)
    if len(whole) <= LONGEST:
        return Phrase(key=key, params={**params, "functions": whole})
    return Phrase(key=key, params={**params, "functions": whole},
                  phrases={"functions": [Phrase.as_written(listed(functions, sep))]})  # fmt: skip


@dataclass
class Described:
    """Resources with their launch and occupancy filled in; errors make the gate fail, notes are reported (each a
    catalog phrase: `messages.phrase` gives its English)."""

    resources: list[Resource]
    errors: list[Phrase] = field(default_factory=list)
    notes: list[Phrase] = field(default_factory=list)


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
    """The value, or LaunchError with a message naming where, the expression and the tunables' values."""
    shown = ", ".join(f"{k}={v}" for k, v in config.items())
    at = {"where": where, "text": repr(text), "shown": shown}
    try:
        if isinstance(text, str):
            for name in expr.names(expr.parse(text)):
                if name in config and name not in env:
                    raise LaunchError(_phrase("launch.not_integer", **at, name=repr(name), value=repr(config[name])))
        result = expr.value(text, env)
    except expr.ExprError as exc:  # the expression evaluator's own words (bot/config/expr.py), as written
        raise LaunchError(_phrase("launch.bad_value", **at, error=str(exc))) from None
    if result < 0:
        raise LaunchError(_phrase("launch.negative", where=where, text=repr(text), value=result))
    return result


def values(launch: Launch, config: dict[str, Any], manifest: str) -> dict[str, int]:
    """The tunables and every `[launch.values]` entry, in order (LaunchError naming the first that fails)."""
    env = _variables(config)
    for name, text in launch.values.items():
        env[name] = _evaluate(f"{manifest}: launch.values.{name}", text, env, config)
    return env


def _key_for(launch: Launch, function: str, manifest: str) -> tuple[str | None, Phrase | None]:
    """The most qualified key naming `function`, or an error when two equally specific keys do."""

    def specific(k: str) -> tuple[int, int]:
        return ("<" in k, k.count("::"))

    keys = sorted((k for k in launch.functions if matches(k, function)), key=specific, reverse=True)
    if len(keys) > 1 and specific(keys[0]) == specific(keys[1]):
        clash = _phrase("launch.clash", manifest=manifest, first=repr(keys[0]), second=repr(keys[1]), function=function)
        return None, clash
    return (keys[0] if keys else None), None


def _dynamic(
    spec: LaunchFunction, env: dict[str, int], config: dict[str, Any], where: str, cxx: dict[str, int]
) -> int | None:
    """The dynamic smem of one description (None: not given); a C++ expression takes its folded value."""
    text = spec.dynamic_smem
    if isinstance(text, str) and is_cxx(text):
        if text not in cxx:
            raise LaunchError(_phrase("launch.no_cxx_value", where=where, text=repr(text)))
        return cxx[text]
    return None if text is None else _evaluate(f"{where}.dynamic_smem", text, env, config)


def _threads(
    spec: LaunchFunction, function: str, bounds: int | None, env: dict[str, int], config: dict[str, Any], where: str
) -> tuple[int | None, Phrase | None]:
    """(threads per block, an error or None): the code's figure (`__launch_bounds__`, .maxntid/.reqntid) wins where
    it has one, and a kernel.toml value that disagrees with it is an error naming both."""
    if spec.threads is None:
        return bounds, None
    threads = _evaluate(f"{where}.threads", spec.threads, env, config)
    if threads == 0:
        raise LaunchError(_phrase("launch.threads_zero", where=where))
    if bounds is not None and threads != bounds:
        return bounds, _phrase("launch.threads_stale", where=where, threads=threads, bounds=bounds, function=function)
    return threads, None


def instances(functions: list[str]) -> str:
    """One function, or a template's instantiations as one subject: `vec_kernel (3 instantiations: …)`."""
    return messages.phrase(instances_phrase(functions))


def instances_phrase(functions: list[str]) -> Phrase:
    """`instances` as a phrase: a single function by its name (a long one short), several by their template's name
    and count (their full names are the phrase's data)."""
    if len(functions) == 1:
        return Phrase.as_written(functions[0] if len(functions[0]) <= LONGEST else short_names(functions)[functions[0]])
    return _phrase(
        "launch.instances", name=base_name(functions[0]), count=len(functions), functions="; ".join(functions)
    )


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
    if sm is None and resources and (missing := no_table_phrase(arch)):
        out.notes.append(missing)
    try:
        env = values(launch, config, manifest)
    except LaunchError as exc:
        out.errors.append(exc.phrase)
        env = None
    used: set[str] = set()
    unsized: dict[str, list[str]] = {}  # kernel function -> its instantiations whose dynamic smem nobody sized
    for r in resources:
        threads, dynamic = bounds.get(r.function), None
        known = True  # False once an error about this function is reported: its launch is unknown
        key, clash = _key_for(launch, r.function, manifest)
        if clash:
            out.errors.append(clash)
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
                except LaunchError as exc:
                    out.errors.append(exc.phrase)
                    known = False
                try:
                    dynamic = _dynamic(spec, env, config, where, cxx or {})
                except LaunchError as exc:
                    out.errors.append(exc.phrase)
                    known = False
        if known and dynamic is None and r.extern_smem:
            unsized.setdefault(base_name(r.function), []).append(r.function)
            known = False
        dynamic = (dynamic or 0) if known else None
        occ = None
        if threads is None:
            out.notes.append(_phrase("launch.no_threads", function=r.function, manifest=manifest))
        elif dynamic is not None and sm is not None:
            barriers = 1 if r.barriers is None else r.barriers
            occ = occupancy(r.registers, threads, r.smem_bytes, dynamic, barriers, arch=sm)
        out.resources.append(r.model_copy(update={"threads": threads, "dynamic_smem_bytes": dynamic, "occupancy": occ}))
    out.errors.extend(
        Phrase(key="launch.unsized", params={"manifest": manifest, "name": name},
               phrases={"functions": [instances_phrase(functions)]})
        for name, functions in unsized.items()
    )  # fmt: skip
    for key in sorted(set(launch.functions) - used):
        out.notes.append(_phrase("launch.unused", manifest=manifest, key=key))
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
    """A changed file that can move a kernel's launches: the phrase naming both (`touch_phrase`), the launches, the
    kernel's name."""

    what: Phrase
    sites: tuple[str, ...]
    kernel: str


def touch_phrase(path: str, kind: TouchKind, names: tuple[str, ...], sites: list[str]) -> Phrase:
    """`k/plan.h defines kStages, which the launch is computed from: k/body.cu:4 k<<<…, 128, kSmem>>>`."""
    params: dict[str, str | int] = {"path": path, "sites": "; ".join(sites)}
    if kind == "defines":
        params["names"] = ", ".join(names)
    return Phrase(key=f"launch.touch_{kind}", params=params)


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
) -> tuple[list[Resource], list[Phrase]]:
    """The resources with every launch the fold read back replacing kernel.toml's figures (kept beside as declared)
    and the occupancy recomputed; notes where the two disagree or one instantiation is launched at several sizes."""
    sm = table(arch)
    notes: list[Phrase] = []
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
            sizes = {"function": r.function, "smem": ", ".join(f"{s:,} B" for s in smem)}
            if threads:
                notes.append(_phrase("launch.several_sizes", **sizes, threads=", ".join(map(str, threads))))
            else:
                notes.append(_phrase("launch.several_sizes_declared", **sizes))
        if r.dynamic_smem_bytes != dynamic or (threads and r.threads != block):
            asked: dict[str, str | int] = {
                "function": r.function,
                "threads": r.threads if r.threads is not None else "?",
                "sites": ", ".join(sorted({v.site for v in mine})),
                "dynamic": f"{dynamic:,}",
                "block": block if block is not None else "?",
            }
            if r.dynamic_smem_bytes is None:
                notes.append(_phrase("launch.disagrees_none", **asked))
            else:
                notes.append(_phrase("launch.disagrees", **asked, declared=f"{r.dynamic_smem_bytes:,}"))
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


def undecided_launches(
    resources: list[Resource], touched: list[SiteTouch], unfolded: dict[str, list[Phrase]]
) -> list[Phrase]:
    """What a changed file can move and nothing read back: "launch figures declared, not measured: …" per launch
    (`unfolded`: launch -> why the fold gave it no value). Never "unchanged from base" for these."""
    found: list[Phrase] = []
    for t in touched:
        named = [r for r in resources if name_path(r.function)[-1:] == (t.kernel,)]
        if reasons := [why for site in t.sites for why in unfolded.get(site, [])]:
            why = _unique(reasons)
        elif not named:
            why = [_phrase("launch.no_function", kernel=repr(t.kernel))]
        elif declared := [r.function for r in named if r.launch_from != "read back"]:
            why = [_listed("launch.not_read_back", declared, sep=", ")]
        else:
            continue
        found.append(Phrase(key="launch.undecided", phrases={"touch": [t.what], "why": why}))
    return _unique(found)


def _unique(phrases: list[Phrase]) -> list[Phrase]:
    """Each phrase once, in order (a phrase is not hashable: its parameters are a dict)."""
    return [p for i, p in enumerate(phrases) if p not in phrases[:i]]


def shared_keys(resources: list[Resource], launch: Launch, manifest: str) -> list[Phrase]:
    """Notes for a `[launch.functions]` key that describes more than one compiled instantiation with kernel.toml's
    figures: none of them has figures of its own (the code's launches, read back, give each its own)."""
    notes: list[Phrase] = []
    for key in (k for k in launch.functions if "<" not in k):
        own = [k for k in launch.functions if "<" in k]
        named = [
            r.function
            for r in resources
            if matches(key, r.function) and r.launch_from == "declared" and not any(matches(k, r.function) for k in own)
        ]
        if len(named) > 1:
            notes.append(_listed("launch.shared_key", named, manifest=manifest, key=key, count=len(named)))
    return notes
