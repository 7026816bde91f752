"""A failed compile's first error named by repository path and line, what to install or configure, and whether
head's failure is its own or one base shares (then the runner or the manifest is to blame, not the change)."""

from __future__ import annotations

import posixpath
import re
from collections.abc import Sequence

from bot.models.report import CompileError

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
    for raw in output.splitlines():
        line = raw.strip()
        if m := _GCC.match(line) or _EDG.match(line):
            msg = m.group("msg").strip()
            header = next((h.group("h").strip() for p in _HEADER if (h := p.match(msg))), None)
            path = repository_path(m.group("path"), roots) or m.group("path").rsplit("/", 1)[-1]
            kind = "missing_header" if header else "compiler"
            return CompileError(kind=kind, path=path, line=int(m.group("line")), message=_cap(msg), header=header)
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
    if e.kind == "manifest":
        return f"{e.message} (a kernel.toml problem, not a compiler error)"
    where = f"{e.path}:{e.line}" if e.path and e.line is not None else e.path
    if e.kind == "missing_header":
        return f"{where}: #include of {e.header}, which the compiler cannot find"
    return f"{where}: {e.message}" if where else e.message


def advice(e: CompileError) -> str:
    """What to install or configure so the error goes away ("" when only the code can fix it)."""
    if e.kind == "manifest":
        return "fix the manifest (docs/manifest.md)"
    if e.kind != "missing_header" or e.header is None:
        return ""
    stem = re.split(r"[/._]", e.header, maxsplit=1)[0]
    first = e.header.split("/", 1)[0].removesuffix(".h")
    component = _TOOLKIT.get(first) or _TOOLKIT.get(stem)
    if component is not None:
        return (
            f"{e.header} ships with the CUDA toolkit ({component}): install that toolkit component on the runner, "
            "or add the folder that holds it to include_dirs in kernel.toml"
        )
    if (library := _SEPARATE.get(stem)) is not None:
        return f"{e.header} is {library}'s (not part of the CUDA toolkit): install {library} on the runner"
    return (
        f"if {e.header} is a header of the repository, add the folder that holds it to include_dirs in kernel.toml "
        "(a submodule not checked out leaves that folder empty); if a library's, install it on the runner"
    )


def _identity(e: CompileError) -> tuple[str, str, str, str | None]:
    """What makes two errors the same: kind, file, message and header — not the line, which a change above it
    moves (a comment-only change must not make base's error "new")."""
    return (e.kind, e.path, e.message, e.header)


def new_errors(head: Sequence[CompileError], base: Sequence[CompileError]) -> list[CompileError]:
    """Head's errors base does not have."""
    theirs = {_identity(e) for e in base}
    return [e for e in head if _identity(e) not in theirs]


def compile_failure(
    step: str, head: Sequence[CompileError], base_failed: bool, base: Sequence[CompileError]
) -> tuple[str | None, str | None]:
    """(failure, undecided) for a head that does not compile; `step` names what was compiled ("resource: CUDA
    sources for sm_90a", "build (cpu)"). Undecided when base fails too and every first error of head's is one of
    base's (the runner or the manifest is to blame, not the change); a failure naming head's first new error
    otherwise. A head whose errors nobody could read fails as before, pointing at the log."""
    if not head:
        return f"{step}: head does not compile (see the head log)", None
    fresh = new_errors(head, base) if base_failed else list(head)
    if not fresh:
        first, hint = head[0], advice(head[0])
        if first.kind == "manifest":
            return None, f"{step}: not decided, base's kernel.toml has the same problem: {describe(first)}"
        because = "not decided, base fails alike (the runner or the manifest, not the change)"
        return None, f"{step}: {because}: {describe(first)}" + (f"; {hint}" if hint else "")
    first = fresh[0]
    if first.kind == "manifest":
        text = f"{step}: head's kernel.toml: {describe(first)}"
    else:
        text = f"{step}: head does not compile: {describe(first)}"
    if base_failed and base:
        text += f" (new in head; base fails with {describe(base[0])})"
    if first.kind != "compiler" and (hint := advice(first)):
        text += f"; {hint}"
    return text, None
