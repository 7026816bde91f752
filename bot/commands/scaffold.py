"""What `opgate init` proposes for one kernel folder: its sources (subfolders too), builds, name, entry, scalars,
and what the repository's own build and launches already say (architectures, include folders, [launch] figures)."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from bot.config.bindings import Bindings, Op, scan
from bot.config.buildfiles import BuildFacts, package_name, read_build_files
from bot.config.launches import LaunchDraft, read_launches
from bot.verdict.flags import check_flags, nvcc_options

UNIT_SUFFIXES = (".cu", ".cpp", ".cc", ".cxx")
HEADER_SUFFIXES = (".h", ".cuh", ".hpp", ".hh", ".inl")
# Folders that hold no kernel of the team's own: build outputs, caches, vendored code.
SKIP_DIRS = frozenset({"build", "dist", "__pycache__", "third_party", "3rdparty", "external", "vendor", "node_modules"})
# At the repository root, also the folders that hold no kernel source: tests, documentation, examples, benchmarks.
ROOT_SKIP = frozenset({"tests", "test", "docs", "doc", "examples", "example", "benchmarks", "bench", "scripts"})
_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*[<"]([^>"]+)[>"]', re.M)
_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
# A declaration `torch::Tensor forward(torch::Tensor q, …);` at the start of a line (a prototype, no body).
_PROTOTYPE = re.compile(r"^[ \t]*((?:[\w:<>,]+[ \t\*&]+)+)([A-Za-z_]\w*)[ \t]*\(([^;{}()]|\([^()]*\))*\)[ \t]*;", re.M)
_NOT_A_TYPE = frozenset({"return", "throw", "delete", "else", "case", "goto", "new"})
WALK_LIMIT = 20_000  # files init looks at to find the folder an #include is relative to
WALK_SKIP = frozenset({"build", "dist", "__pycache__", "node_modules", "venv", "env", "site-packages"})
# Headers of the toolchain and torch, never a repository's include folder (a vendored copy is not the one used).
SYSTEM_INCLUDES = ("torch/", "ATen/", "c10/", "pybind11/", "cuda/", "thrust/", "cub/", "cooperative_groups/")
# Folder names that say where sources live, not what the kernel is: such a kernel is named after its op's namespace
# or its parent folder (extension_cpp/csrc → extension_cpp).
GENERIC_NAMES = frozenset({"csrc", "src", "source", "sources", "cuda", "cpu", "kernel", "kernels", "ops", "lib"})
SCALAR_EXAMPLES = {"float": 1.5, "int": 2, "bool": True}
# A pybind function's C++ definition returning nothing: `void mul(const torch::Tensor& A, torch::Tensor& C, int n)`.
_VOID_FUNCTION = r"\bvoid\s+{name}\s*\(([^)]*)\)\s*\{{"
_CPP_SCALARS = {"int": "int", "int64_t": "int", "long": "int", "int32_t": "int", "float": "float", "double": "float",
                "bool": "bool"}  # fmt: skip
_SCRATCH_NAME = re.compile(r"work|scratch|tmp|temp|buf|lock", re.I)  # a written argument named like work space
# The language level torch's BuildExtension adds to nvcc's and the host compiler's flags when setup.py names none.
TORCH_STD = "-std=c++17"
_PTXAS_VERBOSE = ("-v", "--verbose")


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
    globs: list[str] = field(default_factory=list)  # empty: the folder's own (FOLDER/**)
    include_dirs: list[str] = field(default_factory=list)  # from the repository root
    build: BuildFacts = field(default_factory=BuildFacts)
    launches: list[LaunchDraft] = field(default_factory=list)
    cuda_cflags: list[str] = field(default_factory=list)  # the build's own nvcc flags (empty: opgate's default)
    cflags: list[str] = field(default_factory=list)  # … and its host compiler's
    flag_choices: list[str] = field(default_factory=list)  # why each flag of the build's was left out

    @property
    def resource_only(self) -> bool:
        """No torch binding in the sources (a header-only library's instantiation files): compile-only checks."""
        return self.op is None and not self.entry


def sources_under(folder: Path, *, root: bool = False, suffixes: tuple[str, ...] = UNIT_SUFFIXES) -> list[str]:
    """Every compilation unit in `folder` and its subfolders (not hidden ones, build outputs, vendored code or
    submodules; at the repository `root` not tests, docs, examples or benchmarks either), relative to it, sorted."""
    found = []
    skip = SKIP_DIRS | ROOT_SKIP if root else SKIP_DIRS
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder)
        if path.suffix not in suffixes or not path.is_file():
            continue
        parents = rel.parts[:-1]
        if any(p.startswith(".") or p in skip for p in parents):
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


def kernel_name(folder: Path, found: Bindings, root: Path | None = None) -> str:
    """The folder's name as a kernel name (a-z, 0-9, _); for a generic folder (csrc, src …) or the repository `root`
    itself the TORCH_LIBRARY namespace, else the repository's package name (setup.py, pyproject.toml, its package
    folder: a clone's folder name says nothing), else the parent folder's name."""
    raw = folder.name
    at_root = root is not None and folder.resolve() == root.resolve()
    if raw.lower() in GENERIC_NAMES or at_root:
        package = package_name(root) if root is not None else None
        parent = folder.name if at_root else folder.parent.name
        raw = found.ops[0].namespace if found.ops else package[0] if package else parent
    name = re.sub(r"[^a-z0-9_]+", "_", raw.lower()).strip("_")
    return name or "kernel"


def _read(folder: Path, rel: str) -> str:
    try:
        return _COMMENT.sub("", (folder / rel).read_text(errors="replace"))
    except OSError:
        return ""


def binds_cuda(folder: Path, source: str, cu: list[str]) -> bool:
    """Whether the C++ `source` is a binding of the .cu files: it includes torch/extension.h and declares a
    function one of them defines (`torch::Tensor forward(…);` here, its body in flash.cu)."""
    text = _read(folder, source)
    if "torch/extension.h" not in text:
        return False
    names = {m.group(2) for m in _PROTOTYPE.finditer(text) if m.group(1).split()[0] not in _NOT_A_TYPE}
    bodies = [_read(folder, c) for c in cu]
    return any(re.search(rf"\b{re.escape(n)}\s*\([^;{{}}]*\)\s*(?:const\s*)?\{{", b) for n in names for b in bodies)


def propose(folder: Path, root: Path | None = None) -> Proposal | None:
    """The kernel `folder` holds, or None when no source is in it or below it. With the repository `root`, also
    what its build files and launches say, and the globs of a kernel whose folder is the root."""
    at_root = root is not None and folder.resolve() == root.resolve()
    listed = sources_under(folder, root=at_root)
    inside = folder.resolve()
    sources = [s for s in listed if (folder / s).resolve().is_relative_to(inside)]
    notes = [
        f"{s} links to {os.path.relpath((folder / s).resolve(), inside)}, outside the kernel folder: a build compiles "
        "only the folder's own files, so it is left out (give --kernels the folder that holds it, . for the root)"
        for s in listed
        if s not in sources
    ]
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
    bindings = [s for s in cpu if s not in defines and cu and binds_cuda(folder, s, cu)]
    cuda += bindings  # a pybind file that declares what a .cu defines is built with it, never alone
    cpu = [s for s in cpu if s not in bindings]
    proposal = Proposal(
        folder=folder, name=kernel_name(folder, found, root), cpu_sources=cpu, cuda_sources=cuda, entry=""
    )
    proposal.notes += notes
    proposal.notes += [
        f"{s} binds the .cu files (it declares what they define): built in [build.cuda]" for s in bindings
    ]
    _entry(proposal, found)
    written_arguments(proposal, found)
    if root is not None:
        _drafts(proposal, root, at_root)
    return proposal


def _drafts(p: Proposal, root: Path, at_root: bool) -> None:
    """What the repository already says about the kernel: architectures, include folders, constant launches."""
    p.build = read_build_files(root, p.folder)
    p.notes += p.build.notes
    p.include_dirs = list(p.build.include_dirs)
    p.include_dirs += [
        d for d in included_from(root, p.folder, [*p.cpu_sources, *p.cuda_sources]) if d not in p.include_dirs
    ]
    if p.build.flags_from:
        p.cuda_cflags, p.flag_choices = own_nvcc_flags(p.build.nvcc_flags)
        p.cflags = [f for f in p.build.cxx_flags if not check_flags([f], nvcc=False, where="")]
        p.cflags += [] if any(f.startswith("-std=") for f in p.cflags) else [TORCH_STD]
    headers = sources_under(p.folder, root=at_root, suffixes=HEADER_SUFFIXES)
    p.launches, notes = read_launches(p.folder, p.cuda_sources, headers)
    p.notes += notes
    if at_root:
        p.globs = root_globs([*p.cpu_sources, *p.cuda_sources, *headers])


def own_nvcc_flags(flags: list[str]) -> tuple[list[str], list[str]]:
    """(the nvcc flags a kernel.toml drafts from its build's, why each one left out is): the architecture options
    are `[constraints] architectures` (each checked one is compiled with its own), ptxas's `-v` is the resource
    check's, a flag outside opgate's allow-list is refused; torch's -std=c++17 is added when the build names none."""
    kept: list[str] = []
    arch: list[str] = []
    why: list[str] = []
    for option in nvcc_options(flags):
        tokens = list(option.tokens)
        if option.is_arch:
            arch.append(" ".join(tokens))
            continue
        if option.name == "--ptxas-options" and option.value is not None:
            subs = [v for v in option.value.split(",") if v]
            rest = [v for v in subs if v not in _PTXAS_VERBOSE]
            if len(rest) < len(subs):
                why.append(
                    f"left out: -v of {' '.join(tokens)}: ptxas's -v is the resource check's own (it reads every "
                    "function's registers and spills from it); in a build it only prints them into the log"
                )
                if not rest:
                    continue
                value = ",".join(rest)
                tokens = [tokens[0], value] if len(tokens) == 2 else [f"{tokens[0].split('=', 1)[0]}={value}"]
        if check_flags(tokens, nvcc=True, where=""):
            why.append(f"left out: {' '.join(tokens)}: not on opgate's allow-list of compiler flags (docs/manifest.md)")
            continue
        kept += tokens
    if arch:
        why.insert(
            0,
            f"left out: its target options ({len(arch)}, {arch[0]} …): the architectures are [constraints] "
            "architectures below (the resource check compiles each one with its own)",
        )
    if not any(f.startswith(("-std=", "--std")) for f in kept):
        kept.append(TORCH_STD)
        why.append(f"added: {TORCH_STD}, as torch's BuildExtension adds it when the build names none")
    return kept, why


def root_globs(files: list[str]) -> list[str]:
    """A root kernel's globs: its files at the root by suffix (*.cu, *.h), its subfolders whole (csrc/**)."""
    globs = []
    for rel in files:
        top, _, rest = rel.partition("/")
        globs.append(f"{top}/**" if rest else f"*{Path(rel).suffix}")
    return list(dict.fromkeys(globs))


def _repo_files(root: Path) -> dict[str, list[str]]:
    """File name -> its paths from the root (not hidden folders or build outputs), at most WALK_LIMIT files."""
    index: dict[str, list[str]] = {}
    seen = 0
    for here, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in WALK_SKIP)
        for name in files:
            index.setdefault(name, []).append(Path(here, name).relative_to(root).as_posix())
            seen += 1
        if seen > WALK_LIMIT:
            break
    return index


def included_from(root: Path, folder: Path, sources: list[str]) -> list[str]:
    """The folders (from the repository root, not the kernel folder) that `#include <lib/x.cuh>` lines of the
    sources and of the headers they reach are relative to: a header-only library's include folder. Only includes
    with a folder in their name count (a bare `utils.h` found somewhere says nothing), never torch's or CUDA's."""
    index: dict[str, list[str]] | None = None
    dirs: list[str] = []
    queue, done = [folder / s for s in sources], set[Path]()
    inside = folder.resolve()
    while queue and len(done) < 200:
        path = queue.pop(0)
        if path in done or not path.is_file():
            continue
        done.add(path)
        for name in _INCLUDE.findall(_COMMENT.sub("", path.read_text(errors="replace"))):
            local = next((c for c in (path.parent / name, folder / name) if c.is_file()), None)
            local = local or next((root / d / name for d in dirs if (root / d / name).is_file()), None)
            if local is None and ("/" not in name or name.startswith(SYSTEM_INCLUDES)):
                continue  # a bare name or a system header: no folder of the repository to guess
            if local is None:
                index = _repo_files(root) if index is None else index
                hits = [h for h in index.get(Path(name).name, []) if h == name or h.endswith(f"/{name}")]
                if not hits:
                    continue
                hit = min(hits, key=len)
                base = hit[: -len(name)].rstrip("/") or "."
                if base != "." and (root / base).resolve() != inside and base not in dirs:  # the folder is on -I
                    dirs.append(base)
                local = root / hit
            queue.append(local)
    return dirs


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
    if instantiations(p):
        p.notes.append(
            "no torch binding (TORCH_LIBRARY or PYBIND11_MODULE) in its sources, only .cu files that include kernel "
            "headers (instantiation files): written as a resource-only kernel (compiled for every architecture, no "
            "cases); bind an entry to add cases"
        )
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


def instantiations(p: Proposal) -> bool:
    """Whether the kernel's sources are a header-only library's instantiation files: .cu files only, each of which
    includes a kernel header (`#include "../kernel.cuh"`, `#include <lib/impls/gemm.cuh>`)."""
    if p.cpu_sources or not p.cuda_sources:
        return False
    for source in p.cuda_sources:
        text = _read(p.folder, source)
        names = _INCLUDE.findall(text)
        if not any(n.endswith(".cuh") or (f'"{n}"' in text and n.endswith((".h", ".hpp"))) for n in names):
            return False
    return True
