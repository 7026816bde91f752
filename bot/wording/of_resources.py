"""The wording of the resource check: registers, spills, shared memory, occupancy and launches."""

from __future__ import annotations

# Message id -> (label id or None, English text): resources, occupancy and launches.
MESSAGES: dict[str, tuple[str | None, str]] = {
    # resources, shared memory and occupancy (per architecture)
    "resources.spill": ("resource", "{function} spills {bytes} bytes (stores {stores} B, loads {loads} B)"),
    "resources.smem_arch": (
        "resource",
        "{function} uses {smem} shared memory per block (static + dynamic) > {limit}",
    ),
    "resources.registers": ("resource", "{function} uses {registers} registers > limit {limit}"),
    "resources.smem_limit": ("resource", "{function} uses {smem} smem per block > limit {limit}"),
    "resources.not_resident": ("resource", "{function} cannot be resident on an SM: {why}"),
    "resources.min_warps": (
        "resource",
        "{function} keeps {warps} warps per SM < min_warps_per_sm {limit}, limited by {limited_by}",
    ),
    "resources.occupancy_drop": (
        "resource",
        "{function}: occupancy {old}% -> {new}% ({old_blocks} -> {new_blocks} blocks/SM, {old_warps} -> {new_warps} "
        "warps/SM), limited by {limited_by}: {drop}% fewer resident warps than base > max_occupancy_drop_pct {limit}%",
    ),
    "resources.occupancy_within": (
        None,
        "{function}: occupancy {old}% -> {new}% ({old_blocks} -> {new_blocks} blocks/SM, {old_warps} -> {new_warps} "
        "warps/SM), limited by {limited_by}: {drop}% fewer resident warps than base, within max_occupancy_drop_pct "
        "{limit}%",
    ),
    "resources.occupancy_change": (
        None,
        "{function}: occupancy {old}% -> {new}% ({old_blocks} -> {new_blocks} blocks/SM, {old_warps} -> {new_warps} "
        "warps/SM), limited by {limited_by}",
    ),
    "resources.limited_by": (None, "{factor}: {why}"),
    "resources.in_base": (
        None,
        "in base too: {violation} (head {head}, base {base}): base has it alike, so it fails no pull request until a "
        "change makes it worse",
    ),
    "resources.in_base_renamed": (
        None,
        "in base too: {violation} (head {head}, base {base} as {base_function}): base has it alike, so it fails no "
        "pull request until a change makes it worse",
    ),
    "resources.launch_in_base_moved": (
        None,
        "in base too: {detail}; but the change moves the registers, shared memory or block size of {functions}, so "
        "their occupancy against base is undecided",
    ),
    "resources.declared_moved": (
        None,
        "{function}'s {smem} of dynamic shared memory is declared in kernel.toml, not measured: the change moves "
        "{function}'s template arguments ({moved}), so its shared memory and occupancy are undecided",
    ),
    "resources.declared_new": (
        None,
        "{function}'s {smem} of dynamic shared memory is declared in kernel.toml, not measured: the change adds "
        "{function}, an instantiation base does not have, so its shared memory and occupancy are undecided",
    ),
    "resources.launch_in_base": (
        None,
        "in base too: {detail}: base's kernel.toml leaves it alike, so it fails no pull request until a change makes "
        "it worse",
    ),
    # the occupancy arithmetic: why a resource allows only so many blocks, in the kernel author's numbers
    "occupancy.registers_factor": (None, "registers"),
    "occupancy.smem_factor": (None, "shared memory"),
    "occupancy.threads_factor": (None, "threads"),
    "occupancy.blocks_factor": (None, "blocks"),
    "occupancy.barriers_factor": (None, "barriers"),
    "occupancy.registers": (None, "{per_thread} x {slots} = {per_block} allocated per block"),
    "occupancy.per_thread": (None, "{registers} registers"),
    "occupancy.per_thread_rounded": (None, "{registers} -> {allocated} registers allocated per thread"),
    "occupancy.threads": (None, "{threads} threads"),
    "occupancy.threads_rounded": (None, "{slots} threads ({threads} rounded up to {warps} warps)"),
    "occupancy.smem": (None, "{smem} B shared memory per block (static + dynamic)"),
    "occupancy.smem_reserve": (None, "{smem} B shared memory per block (static + dynamic + {reserve} KiB reserve)"),
    "occupancy.block_threads": (None, "{threads} threads per block"),
    "occupancy.barriers": (None, "{barriers} barriers per block"),
    "occupancy.at_most": (None, "at most {blocks} blocks per SM"),
    "resources.grew": (None, "{function}: {field} {old} -> {new}"),
    "resources.grew_renamed": (None, "{function} (in base {base_function}): {field} {old} -> {new}"),
    "resources.no_nvcc": (None, "resource check skipped: nvcc is not on the PATH"),
    "resources.unsupported_arch": ("resource", "{detail}"),
    "resources.launch": ("resource", "{detail}"),
    "resources.unchanged": (
        None,
        "resource check: unchanged from base: {functions} function(s) with the same registers, spills, stack, shared "
        "memory and occupancy",
    ),
    "resources.unchanged_unread": (
        None,
        "resource check: the {functions} compiled function(s) have base's registers, spills, stack, shared memory and "
        "occupancy; the changed files it does not read are not judged",
    ),
    "resources.compile_failed": ("resource", "{detail}"),
    "resources.base_compile_fail": (None, "resource check: base's CUDA sources do not compile for {arch}: {error}"),
    "resources.base_compile_fail_log": (
        None,
        "resource check: base's CUDA sources do not compile for {arch} (see the base log)",
    ),
    "resources.only": (None, "resources checked; no case ran (needs a CUDA GPU)"),
    "resources.launch_note": (None, "{detail}"),
    # kernel.toml [launch] and the launches the fold read back (bot/verdict/launch.py): phrases inside a finding
    "launch.bad_value": (None, "{where} = {text}: {error} (with {shown})"),
    "launch.not_integer": (None, "{where} = {text}: tunable {name} = {value} is not an integer (with {shown})"),
    "launch.negative": (None, "{where} = {text} is {value}: must not be negative"),
    "launch.no_cxx_value": (None, "{where}.dynamic_smem = {text}: the compiler gave it no value (see the probe log)"),
    "launch.threads_zero": (None, "{where}.threads is 0"),
    "launch.threads_stale": (
        None,
        "{where}.threads = {threads} but the code says {bounds} threads per block for {function} (__launch_bounds__, "
        "in its PTX): the occupancy uses the code's {bounds}; correct kernel.toml or drop it",
    ),
    "launch.clash": (None, "{manifest}: both {first} and {second} describe {function}"),
    "launch.no_threads": (
        None,
        "occupancy of {function} not computed: threads per block unknown (give __launch_bounds__ or threads in "
        "{manifest} [launch.functions])",
    ),
    "launch.no_table": (None, "occupancy not computed for {arch}: no table (opgate has {tables})"),
    "launch.instances": (None, "{name} ({count} instantiations)"),
    # a function family named short (bot/verdict/names.py): the full names are the finding's `functions`
    "function.family": (None, "{name} ({count} instantiations)"),
    "function.family_of": (None, "{name} ({count} of {total} instantiations)"),
    "function.family_but": (None, "{name} ({count} of {total} instantiations, all but {other})"),
    "launch.unsized": (
        None,
        "{functions} uses dynamic shared memory (extern __shared__) that {manifest} does not size: add "
        "[launch.functions.{name}] dynamic_smem",
    ),
    "launch.unused": (None, "{manifest}: launch.functions.{key} names no compiled kernel function"),
    "launch.shared_key": (
        None,
        "{manifest}: launch.functions.{key} describes {count} instantiations ({functions}) with one declared figure: "
        "none has launch figures of its own",
    ),
    "launch.several_sizes": (
        None,
        "{function} is launched with {smem} of dynamic shared memory and {threads} threads: judged at the largest "
        "shared memory and the block size with the fewest resident warps",
    ),
    "launch.several_sizes_declared": (
        None,
        "{function} is launched with {smem} of dynamic shared memory and its declared threads: judged at the largest "
        "shared memory and the block size with the fewest resident warps",
    ),
    "launch.disagrees": (
        None,
        "{function}: kernel.toml [launch] declares {declared} B of dynamic shared memory and {threads} threads; the "
        "launch ({sites}) asks {dynamic} B and {block} threads: judged as the code launches it",
    ),
    "launch.disagrees_none": (
        None,
        "{function}: kernel.toml [launch] declares no dynamic shared memory and {threads} threads; the launch "
        "({sites}) asks {dynamic} B and {block} threads: judged as the code launches it",
    ),
    "launch.undecided": (
        None,
        "launch figures declared, not measured: {touch} ({why}): its shared memory and occupancy are undecided",
    ),
    "launch.touch_holds": (None, "{path} holds the launch: {sites}"),
    "launch.touch_instantiates": (None, "{path} instantiates: {sites}"),
    "launch.touch_tunables": (None, "{path} sets the tunables (-D defines) the launch is compiled with: {sites}"),
    "launch.touch_defines": (None, "{path} defines {names}, which the launch is computed from: {sites}"),
    "launch.its_threads": (None, "its block size: {why}"),
    "launch.its_smem": (None, "its dynamic shared memory: {why}"),
    "launch.no_unit": (None, "no unit of the CUDA build compiles it"),
    "launch.not_instantiated": (None, "no instantiation of it was compiled"),
    "launch.not_constant": (None, "not a compile-time constant ({error})"),
    "launch.nothing_marked": (None, "no launch to read back"),
    "launch.plan_error": (None, "{error}"),
    "launch.no_function": (None, "no compiled kernel function is named {kernel}, so its launch cannot be read back"),
    "launch.not_read_back": (None, "the compiler read back no launch of {functions}"),
    "launch.base": (None, "base: {detail}"),
    "launch.probe_failed": (None, "the launch probe (C++ launch expressions of kernel.toml) failed: {error}"),
}
