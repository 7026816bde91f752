"""A failed compile's first error named by repository path and line, what to install or configure, and whether
head's failure is its own or one base shares (then the runner or the manifest is to blame, not the change)."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Sequence

from bot.models.finding import Phrase
from bot.models.report import CompileError
from bot.wording.messages import phrase

MESSAGE_CAP = 240  # compiler output is untrusted and may be huge: a reason quotes at most this much of a line

# gcc/clang (and nvcc's host preprocessor): "path:line:col: fatal error: msg"; EDG (nvcc's front end): "path(line):
# error: msg"; ptxas: "ptxas /tmp/x.ptx, line 26; error   : msg" (a temporary file: the unit is named instead).
_GCC = re.compile(r"^(?P<path>[^\s:(][^:]*?):(?P<line>\d+)(?::\d+)?: (?:fatal )?error: (?P<msg>.+)$")
_EDG = re.compile(r"^(?P<path>[^\s(][^(]*?)\((?P<line>\d+)\): (?:catastrophic )?error: (?P<msg>.+)$")
_PTXAS = re.compile(r"^ptxas\b.*?, line (?P<line>\d+); error\s*: (?P<msg>.+)$")
_OTHER = re.compile(r"(?:\berror\b\s*:|undefined reference to|\bfatal\b)", re.IGNORECASE)
_HEADER = (
    re.compile(r"^(?P<h>[^:]+): No such file or directory$"),  # gcc
    re.compile(r'^cannot open source file "(?P<h>[^"]+)"'),  # EDG
)
_FAILED = re.compile(r"^FAILED: ", re.MULTILINE)  # ninja's line before each failed command's output
# gcc's include chain above an error in a header: "In file included from PATH:LINE," then "from PATH:LINE[,:]".
_CHAIN = re.compile(r"^(?:In file included from|from) (?P<path>[^\s:][^:]*):(?P<line>\d+)[,:]$")

# torch's CUDA headers: shipped (and `c10/cuda/impl/cuda_cmake_macros.h`, which every one of them includes, generated)
# only by torch's CUDA build. Its CPU build lacks that file or the folders, so any .cu including one cannot compile
# on a runner with the CPU build, base and head alike: the runner's problem, never the change's.
TORCH_CUDA_HEADERS = ("c10/cuda/", "ATen/cuda/", "ATen/native/cuda/", "ATen/cudnn/", "torch/csrc/cuda/")

# CUDA toolkit headers by their first name part, and the toolkit component that ships them.
_TOOLKIT = {
    "cusparse": "cuSPARSE",
    "cublas": "cuBLAS",
    "cublasLt": "cuBLASLt",
    "cufft": "cuFFT",
    "curand": "cuRAND",
    "cusolver": "cuSOLVER",
    "nvrtc": "NVRTC",
    "npp": "NPP",
    "nvToolsExt": "NVTX",
    "nvtx3": "NVTX",
    "nvjpeg": "nvJPEG",
    "cupti": "CUPTI",
    "cub": "CCCL (CUB)",
    "thrust": "CCCL (Thrust)",
    "cuda": "CCCL (libcu++)",
    "cuda_runtime": "the CUDA runtime",
    "cuda_fp16": "the CUDA runtime",
    "cuda_bf16": "the CUDA runtime",
    "cuda_fp8": "the CUDA runtime",
    "cooperative_groups": "the CUDA runtime",
    "mma": "the CUDA runtime",
}
_SEPARATE = {"cudnn": "cuDNN", "nccl": "NCCL", "cutensor": "cuTENSOR", "cudss": "cuDSS"}  # not in the toolkit


def _cap(text: str) -> str:
    text = text.strip()
    return text if len(text) <= MESSAGE_CAP else text[: MESSAGE_CAP - 1] + "…"


def repository_path(path: str, roots: Sequence[tuple[str, str]]) -> str:
    """`path` as the repository names it: a sandbox prefix (/opgate/src, /opgate/inc/0, …) replaced by the folder
    it binds; "" for a path under none of them (a temporary file, a system header). `a/../b` is read as `b`."""
    path = posixpath.normpath(path)
    for prefix, repo in sorted(roots, key=lambda r: -len(r[0])):
        if path == prefix or path.startswith(prefix.rstrip("/") + "/"):
            rest = path[len(prefix) :].lstrip("/")
            return "/".join(p for p in (repo.strip("/"), rest) if p and p != ".")
    return ""


def first_error(output: str, roots: Sequence[tuple[str, str]], unit: str = "") -> CompileError | None:
    """The first error one compile printed (None when it printed none that reads as one), its file as a repository
    path; `unit` (the unit's repository path) names ptxas' errors, which point into a temporary PTX file."""
    fallback = None
    chain: list[tuple[str, int]] = []  # the include chain gcc printed above the error, innermost first
    for raw in output.splitlines():
        line = raw.strip()
        if c := _CHAIN.match(line):
            chain.append((c.group("path"), int(c.group("line"))))
            continue
        if m := _GCC.match(line) or _EDG.match(line):
            msg = m.group("msg").strip()
            header = next((h.group("h").strip() for p in _HEADER if (h := p.match(msg))), None)
            path, at = repository_path(m.group("path"), roots), int(m.group("line"))
            if not path:  # in a header outside the repository (torch's, the toolkit's): the repository's #include
                path, at = next(
                    ((shown, n) for where, n in chain if (shown := repository_path(where, roots))),
                    (m.group("path").rsplit("/", 1)[-1], at),
                )
            kind = "missing_header" if header else "compiler"
            return CompileError(kind=kind, path=path, line=at, message=_cap(msg), header=header)
        chain = []
        if m := _PTXAS.match(line):
            return CompileError(kind="compiler", path=unit, message=_cap(f"ptxas: {m.group('msg')}"))
        if fallback is None and _OTHER.search(line):
            fallback = CompileError(kind="compiler", path=unit, message=_cap(line))
    return fallback


def build_errors(output: str, roots: Sequence[tuple[str, str]]) -> list[CompileError]:
    """The first error of each command ninja says FAILED (of the whole output when it names none)."""
    chunks = _FAILED.split(output)[1:] or [output]
    found = [e for chunk in chunks if (e := first_error(chunk, roots)) is not None]
    return list({_identity(e): e for e in found}.values())


def manifest_error(message: str) -> CompileError:
    """A kernel.toml the build cannot use (a source outside the kernel folder, a missing include folder…)."""
    return CompileError(kind="manifest", path="kernel.toml", message=_cap(message))


def describe(e: CompileError) -> str:
    """ "csrc/gemm.cu:3: cusparse.h: No such file or directory" — the error where the repository has it."""
    return phrase(described(e))


def torch_cuda(e: CompileError) -> bool:
    """Whether the error is a missing header of torch's CUDA build (TORCH_CUDA_HEADERS): a runner with torch's CPU
    build cannot compile the unit, whatever the change does."""
    return e.kind == "missing_header" and (e.header or "").startswith(TORCH_CUDA_HEADERS)


def described(e: CompileError) -> Phrase:
    """`describe` as a phrase of the catalog: the compiler's own message verbatim (`message`), opgate's words
    around it translated."""
    if e.kind == "manifest":
        return Phrase(key="compile.manifest", params={"message": e.message})
    where = f"{e.path}:{e.line}" if e.path and e.line is not None else e.path
    if torch_cuda(e):
        return Phrase(key="compile.torch_cuda_header", params={"where": where, "header": e.header or ""})
    if e.kind == "missing_header":
        return Phrase(key="compile.missing_header", params={"where": where, "header": e.header or ""})
    if where:
        return Phrase(key="compile.error_at", params={"where": where, "message": e.message})
    return Phrase(key="compile.error", params={"message": e.message})


def advised(e: CompileError) -> Phrase | None:
    """What to install or configure so the error goes away, as a phrase of the catalog; None when only the code can
    fix it."""
    if e.kind == "manifest":
        return Phrase(key="advice.manifest")
    if e.kind != "missing_header" or e.header is None:
        return None
    if torch_cuda(e):
        return Phrase(key="advice.torch_cuda", params={"header": e.header})
    stem = re.split(r"[/._]", e.header, maxsplit=1)[0]
    first = e.header.split("/", 1)[0].removesuffix(".h")
    component = _TOOLKIT.get(first) or _TOOLKIT.get(stem)
    if component is not None:
        return Phrase(key="advice.toolkit", params={"header": e.header, "component": component})
    if (library := _SEPARATE.get(stem)) is not None:
        return Phrase(key="advice.library", params={"header": e.header, "library": library})
    return Phrase(key="advice.include_dirs", params={"header": e.header})


def _identity(e: CompileError) -> tuple[str, str, str, str | None]:
    """What makes two errors the same: kind, file, message and header — not the line, which a change above it
    moves (a comment-only change must not make base's error "new")."""
    return (e.kind, e.path, e.message, e.header)


def new_errors(head: Sequence[CompileError], base: Sequence[CompileError]) -> list[CompileError]:
    """Head's errors base does not have."""
    theirs = {_identity(e) for e in base}
    return [e for e in head if _identity(e) not in theirs]


def compile_phrases(
    step: str | Phrase, head: Sequence[CompileError], base_failed: bool, base: Sequence[CompileError]
) -> tuple[Phrase | None, Phrase | None]:
    """(failure, undecided) for a head that does not compile; `step` names what was compiled ("CUDA sources for
    sm_90a", "build (cpu)"; a phrase of the catalog). Undecided when base fails too and every first error of
    head's is one of base's (the runner or the manifest is to blame, not the change), or when head's new errors
    are all torch's CUDA headers this runner's torch lacks (`torch_cuda`); a failure naming head's first new
    error otherwise. A head whose errors nobody could read fails as before, pointing at the log. Each is a
    phrase whose `step`, `error`, `base_error` and `hint` are phrases (the compiler's message inside stays
    verbatim)."""
    steps = [step if isinstance(step, Phrase) else Phrase.as_written(step)]

    def made(key: str, **parts: Phrase | None) -> Phrase:
        return Phrase(key=key, phrases={"step": steps, **{k: [p] for k, p in parts.items() if p is not None}})

    if not head:
        return made("compile.no_errors"), None
    fresh = new_errors(head, base) if base_failed else list(head)
    if fresh and all(torch_cuda(e) for e in fresh):  # torch's CPU build on this runner: it cannot tell, never a fail
        return None, made("compile.runner_torch", error=described(fresh[0]), hint=advised(fresh[0]))
    if not fresh:
        first, hint = head[0], advised(head[0])
        if first.kind == "manifest":
            return None, made("compile.alike_manifest", error=described(first))
        key = "compile.alike_hint" if hint else "compile.alike"
        return None, made(key, error=described(first), hint=hint)
    first = fresh[0]
    hint = advised(first) if first.kind != "compiler" else None
    against = described(base[0]) if base_failed and base else None
    key = "compile.head_manifest" if first.kind == "manifest" else "compile.head"
    key += "_new" if against else ""
    key += "_hint" if hint else ""
    return made(key, error=described(first), base_error=against, hint=hint), None
