"""What `opgate init` proposes for one kernel folder: its sources (subfolders too), builds, name, entry and scalars."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from bot.config.bindings import Bindings, Op, scan

UNIT_SUFFIXES = (".cu", ".cpp", ".cc", ".cxx")
# Folders that hold no kernel of the team's own: build outputs, caches, vendored code.
SKIP_DIRS = frozenset({"build", "dist", "__pycache__", "third_party", "3rdparty", "external", "vendor", "node_modules"})
# Folder names that say where sources live, not what the kernel is: such a kernel is named after its op's namespace
# or its parent folder (extension_cpp/csrc → extension_cpp).
GENERIC_NAMES = frozenset({"csrc", "src", "source", "sources", "cuda", "cpu", "kernel", "kernels", "ops", "lib"})
SCALAR_EXAMPLES = {"float": 1.5, "int": 2, "bool": True}
# A pybind function's C++ definition returning nothing: `void mul(const torch::Tensor& A, torch::Tensor& C, int n)`.
_VOID_FUNCTION = r"\bvoid\s+{name}\s*\(([^)]*)\)\s*\{{"
_CPP_SCALARS = {"int": "int", "int64_t": "int", "long": "int", "int32_t": "int", "float": "float", "double": "float",
                "bool": "bool"}  # fmt: skip
_SCRATCH_NAME = re.compile(r"work|scratch|tmp|temp|buf|lock", re.I)  # a written argument named like work space


@dataclass
class Proposal:
    """One kernel as init would write it."""

    folder: Path
    name: str
    cpu_sources: list[str]
    cuda_sources: list[str]
    entry: str
    tensors: list[str] = field(default_factory=list)  # the op's tensor arguments (make_inputs returns them)
    arguments: list[str] = field(default_factory=list)  # all of them in order, when the entry writes into some
    outputs: list[str] = field(default_factory=list)  # the arguments it writes (returning nothing)
    scratch: list[str] = field(default_factory=list)  # written arguments named like work space
    args: list[str] = field(default_factory=list)  # its scalar arguments, passed from each case's params
    params: dict[str, object] = field(default_factory=dict)  # an example value of each
    notes: list[str] = field(default_factory=list)
    op: Op | None = None


def sources_under(folder: Path) -> list[str]:
    """Every compilation unit in `folder` and its subfolders (not hidden ones, build outputs, vendored code or
    submodules), relative to it, sorted."""
    found = []
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder)
        if path.suffix not in UNIT_SUFFIXES or not path.is_file():
            continue
        parents = rel.parts[:-1]
        if any(p.startswith(".") or p in SKIP_DIRS for p in parents):
            continue
        if any((folder.joinpath(*parents[: i + 1]) / ".git").exists() for i in range(len(parents))):
            continue  # a submodule: someone else's code
        found.append(rel.as_posix())
    return found


def holds_sources(folder: Path) -> bool:
    """Whether `folder` itself (not a subfolder) holds a compilation unit: then it is one kernel."""
    return any(p.is_file() and p.suffix in UNIT_SUFFIXES for p in folder.iterdir())


def _cuda_only(source: str) -> bool:
    return source.endswith(".cu") or "cuda" in source.lower()


def kernel_name(folder: Path, found: Bindings) -> str:
    """The folder's name as a kernel name (a-z, 0-9, _); for a generic folder (csrc, src …) the TORCH_LIBRARY
    namespace or the parent folder's name."""
    raw = folder.name
    if raw.lower() in GENERIC_NAMES:
        raw = found.ops[0].namespace if found.ops else folder.parent.name
    name = re.sub(r"[^a-z0-9_]+", "_", raw.lower()).strip("_")
    return name or "kernel"


def propose(folder: Path) -> Proposal | None:
    """The kernel `folder` holds, or None when no source is in it or below it."""
    sources = sources_under(folder)
    if not sources:
        return None
    found = scan(folder, sources)
    cu = [s for s in sources if s.endswith(".cu")]
    cuda = [s for s in sources if _cuda_only(s)] if cu else []
    cuda = cu + [s for s in cuda if s not in cu]
    cpu = [s for s in sources if not _cuda_only(s)]
    defines = {s for s, namespaces in found.libraries.items() if namespaces}
    if cuda and not defines & set(cuda):  # the CUDA sources implement ops a CPU source defines: build it too
        cuda += [s for s in cpu if s in defines]
    proposal = Proposal(folder=folder, name=kernel_name(folder, found), cpu_sources=cpu, cuda_sources=cuda, entry="")
    _entry(proposal, found)
    written_arguments(proposal, found)
    return proposal


def _entry(p: Proposal, found: Bindings) -> None:
    """The entry point the sources offer: their first TORCH_LIBRARY op, else a pybind function, else a guess."""
    if found.ops:
        op = p.op = found.ops[0]
        p.entry = op.entry
        p.tensors = [a.name for a in op.arguments if a.tensor]
        for a in op.arguments:
            if (kind := a.scalar) is not None:
                p.args.append(a.name)
                p.params[a.name] = SCALAR_EXAMPLES[kind]
        other = [a.name for a in op.arguments if not a.tensor and a.scalar is None]
        if other:
            p.notes.append(f"{op.entry} takes {', '.join(other)}, which a case cannot pass: write a wrapper op")
        if len(found.ops) > 1:
            rest = ", ".join(o.name for o in found.ops[1:4]) + (" …" if len(found.ops) > 4 else "")
            p.notes.append(f"entry {op.entry} (the first op defined; also {rest}: one kernel.toml per op to judge)")
        return
    functions = [f for fs in found.pybind.values() for f in fs]
    if functions:
        p.entry = p.name if p.name in functions else functions[0]
        return
    p.entry = p.name
    p.notes.append("no torch binding (TORCH_LIBRARY or PYBIND11_MODULE) in its sources: write the entry its cases call")


def written_arguments(p: Proposal, found: Bindings) -> None:
    """An entry that returns nothing (`-> ()`, or a pybind function defined `void`) writes into its arguments: propose
    `arguments`, and the tensors it writes (`Tensor(a!)`, a non-const `Tensor&`) as `outputs`, or as `scratch` when
    named like work space. Drafted from the signature for the team to confirm (a note says so); the shapes go in
    kernel.toml's [buffers]."""
    params: list[tuple[str, bool, bool, str | None]] = []  # (name, a tensor, written, scalar kind or None), in order
    if p.op is not None:
        if p.op.returns.strip() != "()":
            return
        params = [(a.name, a.tensor, a.mutable, a.scalar) for a in p.op.arguments]
    else:
        texts = {
            source: re.sub(r"//[^\n]*|/\*.*?\*/", "", (p.folder / source).read_text(errors="replace"), flags=re.S)
            for source in sorted({*found.pybind, *p.cpu_sources, *p.cuda_sources})
        }
        binding = rf'\.\s*def\s*\(\s*"{re.escape(p.entry)}"\s*,\s*&?\s*([\w:]+)'  # m.def("mul", &mul, …)
        bound = re.findall(binding, "".join(texts.values()))
        function = (bound[0] if bound else p.entry).split("::")[-1]  # the C++ function the entry is bound to
        m = next(
            (m for t in texts.values() if (m := re.search(_VOID_FUNCTION.format(name=re.escape(function)), t))), None
        )
        for raw in (x.strip() for x in m.group(1).split(",")) if m is not None else []:
            if "=" in raw:
                break  # a defaulted argument and those after it: the call leaves them out
            name = (re.findall(r"\w+", raw) or [""])[-1]
            kind = raw[: len(raw) - len(name)]
            scalar = next((v for k, v in _CPP_SCALARS.items() if re.fullmatch(rf"(const\s+)?{k}\s*&?\s*", kind)), None)
            tensor = "Tensor" in kind
            params.append((name, tensor, tensor and "&" in kind and "const" not in kind, scalar))
        if not params:
            return
    written = [name for name, tensor, mutable, _ in params if tensor and mutable]
    if not written:
        p.notes.append(
            f"{p.entry} returns nothing, and no tensor argument is written to: name its outputs in kernel.toml"
        )
        return
    p.arguments = [name for name, *_ in params]
    p.scratch = [n for n in written if _SCRATCH_NAME.search(n)]
    p.outputs = [n for n in written if n not in p.scratch]
    p.tensors = [name for name, tensor, mutable, _ in params if tensor and not mutable]
    p.args = [name for name, tensor, _, scalar in params if not tensor and scalar is not None]
    p.params = {name: SCALAR_EXAMPLES[scalar] for name, tensor, _, scalar in params if not tensor and scalar}
    roles = ", ".join([*(f"{n} (output)" for n in p.outputs), *(f"{n} (scratch)" for n in p.scratch)])
    p.notes.append(
        f"{p.entry} returns nothing and writes {roles}: drafted as outputs/scratch; confirm their [buffers] shapes"
    )
