"""Short names for GPU functions: a template instantiation by its differing arguments, a family by its count."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import lru_cache, partial

from bot.models.finding import Finding, Param, Phrase

SHORT_NAME_CHARS = 80  # a template name longer than this is abbreviated (the comment lists the full names)
ARG_CHARS = 24  # a template argument shown because it tells an instantiation apart is cut to this many characters
LONGEST = 120  # no short name is longer


@lru_cache(maxsize=4096)
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


def base_name(function: str) -> str:
    """The kernel function a compiled name instantiates (`vec_kernel` of `void vec_kernel<128>(float*)`)."""
    path = name_path(function)
    return path[-1] if path else function


def listed(functions: Sequence[str], sep: str = "; ") -> str:
    """Several functions joined by `sep`: as written when that is at most LONGEST characters, else by their short
    names, as many as fit in LONGEST characters, then `…`."""
    if len(whole := sep.join(functions)) <= LONGEST:
        return whole
    short = short_names(list(functions))
    shown: list[str] = []
    for f in functions:
        if shown and len(sep.join([*shown, short[f]])) > LONGEST:
            return sep.join([*shown, "…"])
        shown.append(short[f])
    return sep.join(shown)


def short_names(functions: Sequence[str]) -> dict[str, str]:
    """Function -> what the table and the reasons show: `ns::kernel<128, 64>` without its return type and
    parameter list, and a long template argument list abbreviated (`k<Traits<cutlass::bfloat16_t>, …>`), where
    that still tells every function apart; else only the arguments in which an instantiation differs from the
    other instantiations of its template (`bwd_kernel<…, 8, …>`); else without return type and parameters; else
    the full name."""
    out: dict[str, str] = {}
    parsed = {f: _template_args(_short(f)) for f in functions}
    steps = (lambda f: abbreviate(_short(f)), partial(_differing, parsed=parsed), _short, str)
    for shorten_fn in steps:
        shorts = {f: shorten_fn(f) for f in functions if f not in out}
        seen: dict[str, int] = {}
        for short in shorts.values():
            seen[short] = seen.get(short, 0) + 1
        out.update({f: short for f, short in shorts.items() if seen[short] == 1})
    return {f: out.get(f, f) for f in functions}


def _differing(function: str, parsed: Mapping[str, tuple[str, list[str]] | None]) -> str:
    """`function` by its template's name and only the template arguments in which it differs from the other
    instantiations of that template among `parsed` (each function's name and arguments), the rest as `…`
    (`bwd_kernel<…, 8, …>`); at most LONGEST characters. The full name when it has no template arguments."""
    mine = parsed.get(function)
    if mine is None:
        return function
    name, args = mine
    others = [p[1] for f, p in parsed.items() if f != function and p is not None and p[0] == name]
    others = [o for o in others if len(o) == len(args)]
    shown: list[str] = []
    for i, arg in enumerate(args):
        if any(o[i] != arg for o in others):
            shown.append(arg if len(arg) <= ARG_CHARS else f"{arg[: ARG_CHARS - 1]}…")
        elif not shown or shown[-1] != "…":
            shown.append("…")
    text = f"{name}<{', '.join(shown)}>"
    return text if len(text) <= LONGEST else f"{text[: LONGEST - 2]}…>"


@lru_cache(maxsize=4096)
def _short(function: str) -> str:
    """`void ns::k<128, 64>(int, float*)` -> `ns::k<128, 64>` (linear: names come from untrusted ptxas output)."""
    s = function.strip()
    if not s.endswith(")"):
        return function
    depth, start = 0, -1
    for i in range(len(s) - 1, -1, -1):  # the "(" that opens the final parameter list
        depth += {")": 1, "(": -1}.get(s[i], 0)
        if depth == 0:
            start = i
            break
    cut, angle = 0, 0
    for j, ch in enumerate(s[:start]):  # the return type ends at the last space outside <…>
        angle += {"<": 1, ">": -1}.get(ch, 0)
        if ch == " " and angle == 0:
            cut = j + 1
    return s[cut:start] if start > 0 and s[cut:start] else function


def _template_args(text: str) -> tuple[str, list[str]] | None:
    """(`ns::k`, its top-level template arguments) of `ns::k<a, b<c>>`; None for a name without a final <…>."""
    if not text.endswith(">") or "<" not in text:
        return None
    depth, start, args, last = 0, -1, [], 0
    for i, ch in enumerate(text):
        if ch == "<":
            depth += 1
            if depth == 1:
                start, last = i, i + 1
        elif ch == ">":
            depth -= 1
            if depth == 0 and i != len(text) - 1:
                return None  # `a<b>::c<d>`: only the final argument list is abbreviated
        elif ch == "," and depth == 1:
            args.append(text[last:i].strip())
            last = i + 1
    if depth != 0 or start < 0:
        return None
    args.append(text[last:-1].strip())
    return text[:start], args


def template_args(function: str) -> tuple[str, list[str]] | None:
    """(`ns::k`, its top-level template arguments) of a compiled name (`void ns::k<128, 4u>(float*)` gives
    `("ns::k", ["128", "4u"])`); None for a name that is no template's instantiation as the demangler writes it."""
    return _template_args(_short(function))


def abbreviate(name: str, limit: int = SHORT_NAME_CHARS) -> str:
    """A template name in at most about `limit` characters: arguments kept while they fit, a long one shown as
    `outer<…>`, the rest as `…` (linear in the name: names come from untrusted compiler output)."""
    if len(name) <= limit or (parsed := _template_args(name)) is None:
        return name
    head, args = parsed
    kept: list[str] = []
    used = len(head) + 2
    for arg in args:
        inner = _template_args(arg)
        shown = arg if len(arg) <= limit // 2 or inner is None else f"{inner[0]}<…>"
        if used + len(shown) + 2 > limit and kept:
            kept.append("…")
            break
        kept.append(shown if len(shown) <= limit else shown[: limit - 1] + "…")
        used += len(shown) + 2
    return f"{head}<{', '.join(kept)}>"


def subject(functions: Sequence[str], head: Sequence[str], short: Mapping[str, str]) -> Phrase | None:
    """How a line names `functions` (one or several instantiations of one template): one by its short name
    (`short`, from `short_names`; None when it is short as written); several by the template's name and their count,
    "n of N" when the template has other instantiations in `head` (the functions compiled), and the one left out
    named when it is one."""
    if len(functions) == 1:
        return None if len(functions[0]) <= LONGEST else Phrase.as_written(short.get(functions[0], functions[0]))
    name = base_name(functions[0])
    rest = [f for f in dict.fromkeys(head) if base_name(f) == name and f not in functions]
    if not rest:
        return Phrase(key="function.family", params={"name": name, "count": len(functions)})
    params: dict[str, Param] = {"name": name, "count": len(functions), "total": len(functions) + len(rest)}
    if len(rest) == 1:
        return Phrase(key="function.family_but", params={**params, "other": short.get(rest[0], rest[0])})
    return Phrase(key="function.family_of", params=params)


def families(findings: list[Finding], head: Sequence[str], base: Sequence[str] = ()) -> list[Finding]:
    """Findings about single functions, each named short (`subject`), and those alike but for the instantiation of
    one template (same message, figures and outcome) made one finding about the family: `function` its first
    instantiation, `functions` every one, in the order found; `family` the template's name. `head`: the functions
    compiled in head (a family's count); `base`: base's (its names, told apart with head's). Findings about no
    function pass unchanged."""
    groups: dict[str, list[Finding]] = {}
    order: list[str | Finding] = []
    for f in findings:
        if f.function is None:
            order.append(f)
            continue
        alike = f.model_copy(
            update={"function": None, "params": {k: v for k, v in f.params.items() if k != "function"}}
        )
        key = f"{base_name(f.function)}\0{alike.model_dump_json()}"
        if key not in groups:
            groups[key] = []
            order.append(key)
        groups[key].append(f)
    named_by = [f.function for f in findings if f.function is not None]
    short = short_names(list(dict.fromkeys([*head, *base, *named_by]))) if named_by else {}
    out = []
    for item in order:
        if isinstance(item, Finding):
            out.append(item)
            continue
        group = groups[item]
        functions = [f.function for f in group if f.function is not None]
        named = dict(group[0].phrases)
        if (said := subject(functions, head, short)) is not None:
            named["function"] = [said]
        if isinstance(other := group[0].params.get("base_function"), str) and len(other) > LONGEST:
            named["base_function"] = [Phrase.as_written(short[other])]  # a rename: base's name, short too
        update: dict[str, object] = {"phrases": named, "family": base_name(functions[0])}
        if len(functions) > 1:
            update["functions"] = functions
        out.append(group[0].model_copy(update=update))
    return out
