"""Each compiled kernel function's launch from kernel.toml `[launch]`: threads, dynamic shared memory, occupancy."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from bot.config import expr
from bot.config.manifest import MANIFEST_NAME, Expression, Kernel, Launch, LaunchFunction, is_cxx
from bot.models.report import Resource
from bot.verdict.occupancy import no_table, occupancy, table


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
    keys = sorted((k for k in launch.functions if matches(k, function)), key=lambda k: -k.count("::"))
    if len(keys) > 1 and keys[0].count("::") == keys[1].count("::"):
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
            out.errors.append(
                f"{r.function} uses dynamic shared memory (extern __shared__) that {manifest} does not size: "
                f"add [launch.functions.{name_path(r.function)[-1]}] dynamic_smem"
            )
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
