"""The resources gate: registers, shared memory, spills and occupancy against the rules and against base (functions
paired across a rename), and what base already had of an absolute rule or a launch error."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from bot.config.manifest_tables import Constraints
from bot.models.finding import Finding, Gate, Outcome, Phrase
from bot.models.report import (
    Occupancy,
    Resource,
)
from bot.verdict.names import ARG_CHARS, LONGEST, base_name, families, template_args
from bot.verdict.occupancy import SM90, Arch, drop_pct, occupancy, register_phrase, smem_phrase, table

# What base already had of an absolute rule, as the gate notes it (never the change's failure): docs/review.md
IN_BASE = (
    "resources.in_base",
    "resources.in_base_renamed",
    "resources.launch_in_base",
    "resources.launch_in_base_moved",
)


SMEM_PER_BLOCK_LIMIT = SM90.smem_per_block_optin  # 232,448 B of static + dynamic shared memory per block


_NUMBER = re.compile(r"\b\d+[uUlL]*\b")  # 128, and 128u, 64l, 8ull: a template argument's literal is a number too


def _shape(function: str) -> str:
    """A function name with its integer literals blanked: `k<128, 64, false>` and `k<256u, 64, false>` match."""
    return _NUMBER.sub("#", function)


def _signature(function: str) -> str | None:
    """The parameter list of a demangled name with its numbers blanked (`(float const*, float*, int)`); None for a
    mangled name or one without parameters to read."""
    if function.startswith("_Z"):
        return None
    name, depth = function.replace("(anonymous namespace)", ""), 0
    for i, ch in enumerate(name):
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth = max(0, depth - 1)
        elif ch == "(" and depth == 0:
            return _shape(name[i:]) if name[:i].strip() else None
    return None


def _common_prefix(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        n += 1
    return n


def match_base(head: list[Resource], base: list[Resource]) -> dict[str, Resource]:
    """Head function -> its function in base, so that base's figures stand beside head's:

    1. the same name;
    2. else the same name up to its numbers (`k<128, 64>` and `k<256u, 64>`: a tunable renames instantiations)
       where that shape is unique on both sides;
    3. else, a renamed function (`forward_kernel` → `forward_kernel_naive` and `forward_kernel_wmma`), the base
       function of the same signature (demangled parameter list): the only one left, or the one whose name shares
       the longest start with head's; several head functions may stand beside one base function;
    4. else, when exactly one function is left on each side, those two.

    A base function no head function matches is removed (`removed_in_head`), never silently dropped."""
    by_name = {r.function: r for r in base}
    matched: dict[str, Resource] = {r.function: by_name[r.function] for r in head if r.function in by_name}
    taken = {id(b) for b in matched.values()}
    left = [r for r in head if r.function not in matched]
    spare = [b for b in base if id(b) not in taken]
    shapes_head: dict[str, int] = {}
    for r in left:
        shapes_head[_shape(r.function)] = shapes_head.get(_shape(r.function), 0) + 1
    shapes_base: dict[str, list[Resource]] = {}
    for b in spare:
        shapes_base.setdefault(_shape(b.function), []).append(b)
    for r in left:
        shape = _shape(r.function)
        if shapes_head[shape] == 1 and len(shapes_base.get(shape, [])) == 1:
            matched[r.function] = shapes_base[shape][0]
    taken = {id(b) for b in matched.values()}
    left = [r for r in head if r.function not in matched]
    spare = [b for b in base if id(b) not in taken]
    paired: dict[str, Resource] = {}
    for r in left:
        sig = _signature(r.function)
        same = [b for b in spare if sig is not None and _signature(b.function) == sig]
        if len(same) > 1:
            best = max(_common_prefix(r.function, b.function) for b in same)
            same = [b for b in same if _common_prefix(r.function, b.function) == best]
        if len(same) == 1:
            paired[r.function] = same[0]
    matched.update(paired)
    taken = {id(b) for b in matched.values()}
    left = [r for r in head if r.function not in matched]
    spare = [b for b in base if id(b) not in taken]
    if len(left) == 1 and len(spare) == 1:
        matched[left[0].function] = spare[0]
    return matched


def is_rename(head: str, base: str) -> bool:
    """A head function that stands beside a base function of another name (not merely other numbers)."""
    return _shape(head) != _shape(base)


def removed_in_head(head: list[Resource], base: list[Resource]) -> list[Resource]:
    """Base's functions that no head function stands beside (`match_base`): removed, or renamed past matching."""
    kept = {id(b) for b in match_base(head, base).values()}
    return [b for b in base if id(b) not in kept]


def _occupancy_of(r: Resource, threads: dict[str, int] | None, sm: Arch | None = SM90) -> Occupancy | None:
    """The function's occupancy as described, else from its launch bounds when its smem is known."""
    if r.occupancy is not None:
        return r.occupancy
    block = r.threads or (threads or {}).get(r.function)
    if not block or (r.dynamic_smem_bytes is None and r.extern_smem) or sm is None:
        return None
    barriers = 1 if r.barriers is None else r.barriers
    return occupancy(r.registers, block, r.smem_bytes, r.dynamic_smem_bytes or 0, barriers, arch=sm)


def explained(r: Resource, occ: Occupancy, factor: str, threads: int | None = None) -> Phrase:
    """Why one resource allows only so many blocks, in the kernel author's numbers."""
    block = threads or r.threads or 0
    if factor == "registers":
        return register_phrase(r.registers, block, occ)
    if factor == "shared memory":
        return smem_phrase(occ)
    if factor == "threads":
        return Phrase(key="occupancy.block_threads", params={"threads": block})
    if factor == "barriers":
        return Phrase(key="occupancy.barriers", params={"barriers": str(r.barriers)})
    return Phrase(key="occupancy.at_most", params={"blocks": str(occ.limits.get(factor))})


FACTORS = {"registers": "occupancy.registers_factor", "shared memory": "occupancy.smem_factor",
           "threads": "occupancy.threads_factor", "blocks": "occupancy.blocks_factor",
           "barriers": "occupancy.barriers_factor"}  # fmt: skip


def _factor(factor: str) -> Phrase:
    return Phrase(key=FACTORS[factor]) if factor in FACTORS else Phrase.as_written(factor)


def _limited_by(r: Resource, occ: Occupancy, threads: int | None) -> list[Phrase]:
    return [
        Phrase(
            key="resources.limited_by",
            phrases={"factor": [_factor(f)], "why": [explained(r, occ, f, threads)]},
        )
        for f in occ.limited_by
    ]


def _smem(r: Resource) -> str:
    """`static + dynamic B`; `?` for dynamic memory nobody sized; static alone when no launch was described."""
    if r.dynamic_smem_bytes is None:
        return f"{r.smem_bytes:,} + ? B" if r.extern_smem else f"{r.smem_bytes:,} B"
    return f"{r.smem_bytes:,} + {r.dynamic_smem_bytes:,} B"


# The absolute rules a launch's dynamic shared memory decides: not judged on a declared figure the change can move
ON_THE_LAUNCH = ("resources.smem_arch", "resources.smem_limit", "resources.not_resident", "resources.min_warps")


def _arg(text: str) -> str:
    return text if len(text) <= ARG_CHARS else f"{text[: ARG_CHARS - 1]}…"


def declared_moved(r: Resource, b: Resource | None, base: Sequence[Resource]) -> str | None:
    """How the change moves the template arguments of head's instantiation `r` whose dynamic shared memory is
    kernel.toml's figure (a literal or an expression of tunables: declared, not read back from the code), against
    base's instantiation `b` beside it (`match_base`): `4u → 6u` for each argument that differs, both lists where
    their counts differ, "" where none stands beside it but `base` (base's functions) has other instantiations of
    its template. None where the figure is judged as it stands: read back, not described, not a template's
    instantiation, base's instantiation has the same arguments, or base has no instantiation of the template (a new
    kernel, or no base at all: its figure was written with it)."""
    if r.launch_from != "declared" or r.dynamic_smem_bytes is None or not (r.extern_smem or r.dynamic_smem_bytes):
        return None
    if (mine := template_args(r.function)) is None:
        return None
    if b is None:
        return "" if any((t := template_args(x.function)) and t[0] == mine[0] for x in base) else None
    theirs = template_args(b.function)
    old = theirs[1] if theirs is not None else []
    if old == mine[1]:
        return None
    if len(old) != len(mine[1]):
        moved = f"<{', '.join(map(_arg, old))}> → <{', '.join(map(_arg, mine[1]))}>"
    else:
        moved = ", ".join(f"{_arg(o)} → {_arg(n)}" for o, n in zip(old, mine[1], strict=True) if o != n)
    return moved if len(moved) <= LONGEST else f"{moved[: LONGEST - 1]}…"


def _declared_finding(r: Resource, moved: str) -> Finding:
    """Head's declared figure the change can move: its shared memory and occupancy undecided, never judged."""
    smem = f"{r.dynamic_smem_bytes:,} B"
    if moved:
        return _resource("resources.declared_moved", r, Outcome.undecided, smem=smem, moved=moved)
    return _resource("resources.declared_new", r, Outcome.undecided, smem=smem)


def _resource(key: str, r: Resource, outcome: Outcome = Outcome.fail, **fields: Any) -> Finding:
    """A resource finding about `r`: keywords are the message's parameters; `value_`, `limit_`, `unit_` and
    `phrases_` the finding's own fields."""
    params = {k: v for k, v in fields.items() if not k.endswith("_")}
    extra = {k[:-1]: v for k, v in fields.items() if k.endswith("_")}
    return Finding(
        gate=Gate.resources,
        outcome=outcome,
        key=key,
        function=r.function,
        params={"function": r.function, **params},
        **extra,
    )  # type: ignore[arg-type]


def resource_findings(
    head: list[Resource],
    base: list[Resource],
    constraints: Constraints,
    threads: dict[str, int] | None = None,
    arch: str = "sm_90a",
) -> tuple[list[Finding], list[Finding]]:
    """(failures, notes) for the resources and occupancy of head against base on one architecture.

    Fails: spills, static + dynamic smem per block over the architecture's opt-in limit (232,448 B on sm_90
    and sm_100; or `max_smem_bytes`), registers over `max_registers`, a launch that fits no SM, fewer resident
    warps per SM than base beyond `max_occupancy_drop_pct`, fewer than `min_warps_per_sm`. Any occupancy change
    is noted either way. An absolute rule's breach that base's function (`match_base`) has alike or worse is base's,
    not the change's: noted "in base too" with both figures (`in_base`), never a failure. Where the dynamic shared
    memory is kernel.toml's figure and the change moves the instantiation's template arguments (`declared_moved`),
    the shared memory and occupancy are not judged: one undecided finding among the notes says so.
    """
    failures: list[Finding] = []
    notes: list[Finding] = []
    base_of = match_base(head, base)
    sm = table(arch)
    smem_limit = sm.smem_per_block_optin if sm is not None else SMEM_PER_BLOCK_LIMIT
    for r in head:
        b = base_of.get(r.function)
        moved = declared_moved(r, b, base)
        theirs = _absolute(b, None, constraints, sm, smem_limit) if b is not None else []
        for f in _absolute(r, threads, constraints, sm, smem_limit):
            same = next((g for g in theirs if g.key == f.key and _as_bad(g, f)), None)
            if moved is not None and f.key in ON_THE_LAUNCH:
                continue  # judged on a figure nobody measured: undecided below, neither a pass nor a failure
            if same is None or b is None:
                failures.append(f)
            else:
                notes.append(in_base(f, same, b))
        if moved is not None:
            notes.append(_declared_finding(r, moved))
        elif (occ := _occupancy_of(r, threads, sm)) is not None:
            block = r.threads or (threads or {}).get(r.function)
            if b is not None and b.occupancy is not None and occ.blocks_per_sm > 0:
                change = _occupancy_change(r, occ, b.occupancy, block, constraints)
                if change is not None:
                    (failures if change.outcome == Outcome.fail else notes).append(change)
        if b is not None:
            renamed = is_rename(r.function, b.function)
            for field in ("registers", "smem_bytes", "dynamic_smem_bytes", "stack_bytes"):
                new, old = getattr(r, field), getattr(b, field)
                if field == "dynamic_smem_bytes" and moved is not None:
                    continue
                if new is not None and old is not None and new > old:
                    grew = {"field": field, "old": old, "new": new, "value_": new, "limit_": old}
                    if renamed:
                        notes.append(
                            _resource("resources.grew_renamed", r, Outcome.note, base_function=b.function, **grew)
                        )
                    else:
                        notes.append(_resource("resources.grew", r, Outcome.note, **grew))
    compiled, before = [r.function for r in head], [r.function for r in base]
    return families(failures, compiled, before), families(notes, compiled, before)


def _absolute(
    r: Resource, threads: dict[str, int] | None, constraints: Constraints, sm: Arch | None, smem_limit: int
) -> list[Finding]:
    """What one function breaks of the absolute rules, whatever base has: spills, shared memory over the
    architecture's or the manifest's limit, registers over `max_registers`, a launch that fits no SM, fewer than
    `min_warps_per_sm`."""
    found: list[Finding] = []
    if r.spill_bytes > constraints.max_spill_bytes:
        spill: dict[str, Any] = {"value_": r.spill_bytes, "limit_": constraints.max_spill_bytes, "unit_": "B"}
        found.append(
            _resource(
                "resources.spill",
                r,
                bytes=r.spill_bytes,
                stores=r.spill_store_bytes,
                loads=r.spill_load_bytes,
                **spill,
            )
        )
    smem = r.smem_bytes + (r.dynamic_smem_bytes or 0)
    if smem > smem_limit:
        smem_arch: dict[str, Any] = {"value_": smem, "limit_": smem_limit, "unit_": "B"}
        found.append(_resource("resources.smem_arch", r, smem=_smem(r), limit=f"{smem_limit:,}", **smem_arch))
    if constraints.max_registers is not None and r.registers > constraints.max_registers:
        found.append(
            _resource(
                "resources.registers",
                r,
                registers=r.registers,
                limit=constraints.max_registers,
                value_=r.registers,
                limit_=constraints.max_registers,
                unit_="registers",
            )
        )
    if constraints.max_smem_bytes is not None and smem > constraints.max_smem_bytes:
        found.append(
            _resource(
                "resources.smem_limit",
                r,
                smem=_smem(r),
                limit=f"{constraints.max_smem_bytes:,}",
                value_=smem,
                limit_=constraints.max_smem_bytes,
                unit_="B",
            )
        )
    if (occ := _occupancy_of(r, threads, sm)) is not None:
        block = r.threads or (threads or {}).get(r.function)
        found.extend(_occupancy_failures(r, occ, block, constraints, smem, smem_limit))
    return found


_FEWER_IS_WORSE = ("resources.not_resident", "resources.min_warps")  # resident blocks, warps: the fewer the worse


def _as_bad(theirs: Finding, ours: Finding) -> bool:
    """Base's breach of a rule is as bad as head's or worse (the same figure, or further past the limit)."""
    if theirs.value is None or ours.value is None:
        return theirs.value is None and ours.value is None
    if ours.key in _FEWER_IS_WORSE:
        return theirs.value <= ours.value
    return theirs.value >= ours.value


def _figure(f: Finding) -> str:
    value = "?" if f.value is None else f"{f.value:,g}"
    return f"{value} {f.unit}" if f.unit else value


def in_base(ours: Finding, theirs: Finding, b: Resource) -> Finding:
    """Head's breach of an absolute rule that base has alike or worse, for the same function (`match_base`): a note
    with both figures, never a failure of this change (docs/review.md, "What base already has")."""
    renamed = is_rename(ours.function or "", b.function)
    return ours.model_copy(
        update={
            "outcome": Outcome.note,
            "key": "resources.in_base_renamed" if renamed else "resources.in_base",
            "params": {"head": _figure(ours), "base": _figure(theirs), "base_function": b.function},
            "phrases": {"violation": [Phrase(key=ours.key, params=ours.params, phrases=ours.phrases)]},
        }
    )


def _occupancy_failures(
    r: Resource, occ: Occupancy, block: int | None, constraints: Constraints, smem: int, smem_limit: int
) -> list[Finding]:
    if occ.blocks_per_sm == 0:
        why = [explained(r, occ, f, block) for f, n in occ.limits.items() if n == 0 and f != "shared memory"]
        if smem <= smem_limit or why:  # an smem overflow alone is reported above
            why = why or [explained(r, occ, "shared memory", block)]
            return [_resource("resources.not_resident", r, phrases_={"why": why}, value_=0, unit_="blocks/SM")]
        return []
    if constraints.min_warps_per_sm is not None and occ.warps_per_sm < constraints.min_warps_per_sm:
        return [
            _resource(
                "resources.min_warps",
                r,
                warps=occ.warps_per_sm,
                limit=constraints.min_warps_per_sm,
                phrases_={"limited_by": _limited_by(r, occ, block)},
                value_=occ.warps_per_sm,
                limit_=constraints.min_warps_per_sm,
                unit_="warps/SM",
            )
        ]
    return []


def _occupancy_change(
    r: Resource, occ: Occupancy, base: Occupancy, block: int | None, constraints: Constraints
) -> Finding | None:
    """The occupancy change, failing when resident warps fell more than allowed; None when it did not change."""
    if occ.warps_per_sm == base.warps_per_sm:
        return None
    change: dict[str, Any] = {
        "old": f"{base.occupancy_pct:g}",
        "new": f"{occ.occupancy_pct:g}",
        "old_blocks": base.blocks_per_sm,
        "new_blocks": occ.blocks_per_sm,
        "old_warps": base.warps_per_sm,
        "new_warps": occ.warps_per_sm,
        "phrases_": {"limited_by": _limited_by(r, occ, block)},
    }
    drop, allowed = drop_pct(base, occ), constraints.max_occupancy_drop_pct
    fewer: dict[str, Any] = {
        "drop": f"{drop:g}",
        "limit": f"{allowed:g}",
        "value_": drop,
        "limit_": allowed,
        "unit_": "%",
    }
    if drop > allowed:
        return _resource("resources.occupancy_drop", r, **change, **fewer)
    if drop > 0:
        return _resource("resources.occupancy_within", r, Outcome.note, **change, **fewer)
    return _resource("resources.occupancy_change", r, Outcome.note, **change)


def _unsized(r: Resource | None) -> bool:
    return r is not None and r.extern_smem and r.dynamic_smem_bytes is None


def _own_figures(r: Resource) -> tuple[object, ...]:
    """What a function's occupancy is made of besides its launch's dynamic shared memory."""
    return (r.registers, r.smem_bytes, r.barriers, r.threads)


def launch_in_base(
    error: Phrase, head: list[Resource], base: list[Resource], base_errors: list[Phrase]
) -> list[str] | None:
    """Whether base's kernel.toml has head's launch error alike: None when it does not (the change's: it fails);
    else the functions it leaves blind whose own figures (registers, static shared memory, barriers, threads) the
    change moved — their occupancy against base is then undecided, not passed —, an empty list when none moved.

    Alike is the same error, or dynamic shared memory nobody sizes (`launch.unsized`) where every such head function
    of the kernel stands beside a base function (`match_base`) nobody sizes either."""
    paired = match_base(head, base)
    name = error.params.get("name") if error.key == "launch.unsized" else None
    named = [r for r in head if name is not None and _unsized(r) and base_name(r.function) == name]
    if error not in base_errors and (not named or not all(_unsized(paired.get(r.function)) for r in named)):
        return None
    return [r.function for r in named if (b := paired.get(r.function)) is None or _own_figures(b) != _own_figures(r)]
