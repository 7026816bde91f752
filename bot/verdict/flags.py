"""The compiler flags a kernel.toml may ask for: an allow-list, so no flag can run or load other code (pure).

`opgate lint` and the review read flags through the same `check_flags`; `nvcc_options` groups nvcc's
two-token forms (`-gencode arch=…,code=…`, `--threads 32`, `-Xptxas -v`) the way nvcc reads them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from bot.models.finding import Finding, Gate, Outcome
from bot.wording.messages import render

_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_VALUE = r"[A-Za-z0-9_.+-]*"
_ARCH = r"(?:sm|compute)_\d+[af]?"
# Host compiler flags (g++/clang++): optimisation, language level, defines, warnings, debug info, codegen.
HOST = [
    r"-O[0-3sgz]?|-Ofast",
    r"-std=(c|gnu)\+\+(11|14|17|20|23|2a|2b)",
    rf"-[DU]{_NAME}(={_VALUE})?",
    r"-w|-W(?!l,|a,|p,)[A-Za-z0-9_=-]+",
    r"-g[0-3]?",
    r"-m(arch|tune)=[A-Za-z0-9_-]+|-m(no-)?(avx[A-Za-z0-9_]*|fma|sse[0-9.a-z]*|f16c|bmi2?|popcnt|lzcnt)",
    r"-f(no-)?(fast-math|math-errno|unroll-loops|strict-aliasing|omit-frame-pointer|tree-vectorize"
    r"|finite-math-only|openmp|PIC|pic|vectorize|inline-functions|trapping-math|associative-math)",
]
# ptxas options inside -Xptxas / --ptxas-options: what it reports (informational) and how hard it optimises.
PTXAS = [
    r"-v|--verbose",
    r"--?warn-on-spills|-warn-spills|--?warn-on-local-memory-usage|-warn-lmem-usage",
    r"--?warn-on-double-precision-use|-warn-double-usage|--?suppress-stack-size-warning",
    r"--?suppress-double-demote-warning|--?suppress-async-bulk-multicast-advisory-warning",
    r"-O[0-3]|--opt-level=[0-3]",
    r"--?register-usage-level=\d{1,2}",
    r"--?maxrregcount=\d{1,3}",
    r"--?allow-expensive-optimizations(=(true|false))?",
    r"--?disable-optimizer-constants",
    r"--?(fmad|prec-div|prec-sqrt|ftz)=(true|false)",
    r"-lineinfo|--generate-line-info",
]
# nvcc flags on top of the host ones (each in its one-token form; see nvcc_options).
NVCC = [
    *HOST,
    r"--?use_fast_math",
    r"--?expt-relaxed-constexpr|--?expt-extended-lambda|--?extended-lambda",
    r"--?maxrregcount=\d{1,3}",
    r"-lineinfo|--generate-line-info|--source-in-ptx",
    rf"(-arch|--gpu-architecture|-code|--gpu-code)={_ARCH}",
    rf"(-gencode|--generate-code)=arch=compute_\d+[af]?,code=(\[{_ARCH}(,{_ARCH})*\]|{_ARCH})",
    r"--?(ftz|prec-div|prec-sqrt|fmad)=(true|false)",
    r"--resource-usage",
    r"(--threads|-t)=?\d{1,3}",
    r"--?diag-suppress=[0-9,]+",
]
# nvcc options whose value may be the next token (`-gencode arch=…`, `--threads 32`, `-Xptxas -v`).
SPLIT = {
    "-gencode": "-gencode",
    "--generate-code": "--generate-code",
    "-arch": "-arch",
    "--gpu-architecture": "--gpu-architecture",
    "-code": "-code",
    "--gpu-code": "--gpu-code",
    "--threads": "--threads",
    "-t": "-t",
    "-maxrregcount": "-maxrregcount",
    "--maxrregcount": "--maxrregcount",
    "-Xptxas": "--ptxas-options",
    "--ptxas-options": "--ptxas-options",
    "-Xcompiler": "--compiler-options",
    "--compiler-options": "--compiler-options",
}
ARCH_OPTIONS = ("-arch", "--gpu-architecture", "-gencode", "--generate-code", "-code", "--gpu-code")
_HOST = re.compile("|".join(f"(?:{p})" for p in HOST))
_NVCC = re.compile("|".join(f"(?:{p})" for p in NVCC))
_PTXAS = re.compile("|".join(f"(?:{p})" for p in PTXAS))
ALLOWED_SUMMARY = (
    "-O*, -std=c++NN, -DNAME[=value], -UNAME, -W<warning>, -g, -march/-mtune, a few -f math/vectorisation "
    "flags; for nvcc also --use_fast_math, --expt-*, -maxrregcount=N, -lineinfo, --source-in-ptx, "
    "-arch/-code/-gencode (one token or two), --threads N, -ftz/-prec-*/-fmad, -Xcompiler with host flags, "
    "-Xptxas/--ptxas-options with -v, --warn-on-*, -O<n>, --register-usage-level=N, --maxrregcount=N"
)


@dataclass(frozen=True)
class Option:
    """One nvcc option as nvcc reads it: its tokens in the manifest, its name and its value (None: a plain flag)."""

    tokens: tuple[str, ...]
    name: str
    value: str | None

    @property
    def joined(self) -> str:
        return self.name if self.value is None else f"{self.name}={self.value}"

    @property
    def is_arch(self) -> bool:
        return self.name in ARCH_OPTIONS


def nvcc_options(flags: Sequence[str]) -> list[Option]:
    """The flags grouped as nvcc reads them: `-gencode X` and `-gencode=X` are one option with value X."""
    out: list[Option] = []
    i = 0
    while i < len(flags):
        flag = flags[i]
        name, sep, value = flag.partition("=")
        if flag in SPLIT and i + 1 < len(flags):
            out.append(Option((flag, flags[i + 1]), SPLIT[flag], flags[i + 1]))
            i += 2
            continue
        if sep and name in SPLIT:
            out.append(Option((flag,), SPLIT[name], value))
        else:
            out.append(Option((flag,), flag, None))
        i += 1
    return out


def without_arch(flags: Sequence[str]) -> list[str]:
    """The flags less every -arch/-code/-gencode option (in either form): a check that picks its own target."""
    return [t for o in nvcc_options(flags) if not o.is_arch for t in o.tokens]


def _codes(value: str) -> list[str]:
    """The targets an -arch/-code/-gencode value names: "arch=compute_90a,code=[sm_90a,compute_90a]" -> [compute_90a,
    sm_90a, compute_90a]."""
    return [v.strip() for v in re.split(r"[,=\[\]\"' ]+", value) if v.strip().startswith(("sm_", "compute_"))]


def default_target(arch: str) -> list[str]:
    """The one target of `arch` with no other PTX beside it: `-gencode arch=compute_90a,code=sm_90a` (`-arch=sm_90a`
    alone also embeds a compute_90 PTX, which ptxas checks and where wgmma/tcgen05 are rejected)."""
    return ["-gencode", f"arch=compute_{arch.removeprefix('sm_')},code={arch}"]


def for_arch(flags: Sequence[str], arch: str, ships: str = "object") -> list[str]:
    """The flags compiled for one architecture (sm_90a) as the manifest ships it: its `-gencode` options that name
    `arch` kept as written (or its `-arch`/`-code` pair, or an `-arch=sm_90a` alone), every other target option
    dropped; when the flags name `arch` nowhere, `default_target(arch)`. A kernel that ships a cubin (`ships =
    "cubin"`, a JIT's `nvcc -cubin --gpu-architecture=sm_90a`) is compiled for `-arch=sm_90a` alone: a cubin holds
    that one architecture's code, no PTX beside it, whatever target options its flags name."""
    if ships == "cubin":
        return [*without_arch(flags), f"-arch={arch}"]
    options = nvcc_options(flags)
    rest = [t for o in options if not o.is_arch for t in o.tokens]
    targets = [o for o in options if o.is_arch and o.value is not None]
    virtual = f"compute_{arch.removeprefix('sm_')}"
    mine = [o for o in targets if o.name in ("-gencode", "--generate-code") and arch in _codes(o.value or "")]
    if not mine:
        codes = [o for o in targets if o.name in ("-code", "--gpu-code") and arch in _codes(o.value or "")]
        archs = [o for o in targets if o.name in ("-arch", "--gpu-architecture")]
        if codes:
            mine = [*[o for o in archs if virtual in _codes(o.value or "")], *codes]
            mine = mine if len(mine) > len(codes) else []
        else:
            mine = [o for o in archs if _codes(o.value or "") == [arch]]
    return [*rest, *([t for o in mine for t in o.tokens] or default_target(arch))]


def _suboptions(value: str) -> list[str]:
    return [v for v in value.strip("'\"").split(",") if v]


def check_flags(flags: Sequence[str], *, nvcc: bool, where: str) -> list[str]:
    """Findings for every flag outside the allow-list (empty: all allowed).

    Flags that change the compiler (`-ccbin`), load plugins, add include or library paths (include
    directories are `include_dirs`, checked to lie in the repository), read response files or pass raw
    options to the linker are refused, and ptxas gets only reporting and optimisation options: a pull
    request could otherwise run its own code at build time or compile files from outside the repository.
    """
    if not nvcc:
        return [_refused(where, f) for f in flags if not _HOST.fullmatch(f)]
    findings = []
    stds = [f for f in flags if f.startswith(("-std=", "--std="))]
    if len(stds) > 1:
        findings.append(f"{where}: -std= given {len(stds)} times ({', '.join(stds)}): keep one")
    for o in nvcc_options(flags):
        shown = " ".join(o.tokens)
        if o.name in ("--compiler-options", "--ptxas-options"):
            allowed, what = (_HOST, "host") if o.name == "--compiler-options" else (_PTXAS, "ptxas")
            if o.value is None or not _suboptions(o.value):
                findings.append(f"{where}: {o.tokens[0]} without a value")
            elif bad := [s for s in _suboptions(o.value) if not allowed.fullmatch(s)]:
                findings.append(f"{where}: {shown!r}: {what} option {bad[0]!r} is not allowed ({ALLOWED_SUMMARY})")
            continue
        if o.name in SPLIT and o.value is None:
            findings.append(f"{where}: {o.name} without a value")
        elif not _NVCC.fullmatch(o.joined):
            findings.append(_refused(where, shown))
    return findings


def _refused(where: str, flag: str) -> str:
    if flag in ("-cubin", "--cubin"):
        return f'{where}: flag {flag!r} is not allowed: a kernel a JIT loads as a cubin says ships = "cubin"'
    if flag.startswith(("-I", "-isystem", "-iquote", "--include-path")):
        return f"{where}: flag {flag!r} is not allowed: list include directories in include_dirs (repository paths)"
    return f"{where}: flag {flag!r} is not allowed ({ALLOWED_SUMMARY})"


TUNABLE_KEY = re.compile(_NAME)
TUNABLE_VALUE = re.compile(r"-?[A-Za-z0-9_.+]+")


def check_defines(config: dict[str, object], where: str) -> list[str]:
    """Tunables become `-DKEY=value`: keys must be identifiers and values plain tokens (`define_findings`, as lines)."""
    return [render(f) for f in define_findings(config, where)]


def define_findings(
    config: dict[str, object], where: str, path: str | None = None, lines: Mapping[str, int] | None = None
) -> list[Finding]:
    """Tunables become `-DKEY=value`: keys must be identifiers and values plain tokens; each finding at the config
    file (`path` from the repository root, else `where`) and its key's line (`lines`: `Kernel.config_lines`)."""

    def found(message: str, tunable: object, /, **params: str) -> Finding:
        line = (lines or {}).get(str(tunable))
        return Finding(
            gate=Gate.static, outcome=Outcome.fail, key=message, params=params, file=path or where, line=line
        )

    findings = []
    for key, value in config.items():
        if not TUNABLE_KEY.fullmatch(str(key)):
            findings.append(found("static.tunable_name", key, where=where, key=repr(key)))
        if isinstance(value, bool) or not TUNABLE_VALUE.fullmatch(str(value)):
            findings.append(found("static.tunable_token", key, where=where, key=str(key), value=repr(value)))
    return findings
