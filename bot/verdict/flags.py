"""The compiler flags a kernel.toml may ask for: an allow-list, so no flag can run or load other code (pure)."""

from __future__ import annotations

import re
from collections.abc import Sequence

_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_VALUE = r"[A-Za-z0-9_.+-]*"
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
# nvcc flags on top of the host ones.
NVCC = [
    *HOST,
    r"--?use_fast_math",
    r"--expt-relaxed-constexpr|--expt-extended-lambda|--extended-lambda",
    r"--?maxrregcount=\d+",
    r"-lineinfo|--generate-line-info",
    r"-(arch|code)=(sm|compute)_\d+[af]?",
    r"--?gencode=arch=compute_\d+[af]?,code=\[?(sm|compute)_\d+[af]?(,(sm|compute)_\d+[af]?)*\]?",
    r"--?(ftz|prec-div|prec-sqrt|fmad)=(true|false)",
    r"--resource-usage|-Xptxas=-v|-Xptxas=--warn-on-spills|-Xptxas=-O[0-3]",
    r"--threads=?\d+|-t\d+",
    r"--?diag-suppress=[0-9,]+",
]
_HOST = re.compile("|".join(f"(?:{p})" for p in HOST))
_NVCC = re.compile("|".join(f"(?:{p})" for p in NVCC))
ALLOWED_SUMMARY = (
    "-O*, -std=c++NN, -DNAME[=value], -UNAME, -W<warning>, -g, -march/-mtune, a few -f math/vectorisation "
    "flags; for nvcc also --use_fast_math, --expt-*, -maxrregcount=N, -lineinfo, -arch/-gencode, -ftz/-prec-*/-fmad"
)


def check_flags(flags: Sequence[str], *, nvcc: bool, where: str) -> list[str]:
    """Findings for every flag outside the allow-list (empty: all allowed).

    Flags that change the compiler (`-ccbin`), load plugins, add include or library paths, read
    response files or pass raw options to the linker or assembler are refused: a pull request could
    otherwise run its own code at build time or compile files from outside its kernel folder.
    """
    allowed = _NVCC if nvcc else _HOST
    findings = []
    pending_xcompiler = False
    for flag in flags:
        if pending_xcompiler:  # nvcc's `-Xcompiler VALUE`: every comma-separated host flag must be allowed
            pending_xcompiler = False
            bad = [f for f in flag.split(",") if not _HOST.fullmatch(f)]
            if bad:
                findings.append(f"{where}: -Xcompiler {flag!r} is not allowed ({ALLOWED_SUMMARY})")
            continue
        if nvcc and flag in ("-Xcompiler", "--compiler-options"):
            pending_xcompiler = True
            continue
        if nvcc and flag.startswith(("-Xcompiler=", "--compiler-options=")):
            value = flag.split("=", 1)[1].strip("'\"")
            if all(_HOST.fullmatch(f) for f in value.split(",")):
                continue
        if not allowed.fullmatch(flag):
            findings.append(f"{where}: flag {flag!r} is not allowed ({ALLOWED_SUMMARY})")
    if pending_xcompiler:
        findings.append(f"{where}: -Xcompiler without a value")
    return findings


TUNABLE_KEY = re.compile(_NAME)
TUNABLE_VALUE = re.compile(r"-?[A-Za-z0-9_.+]+")


def check_defines(config: dict[str, object], where: str) -> list[str]:
    """Tunables become `-DKEY=value`: keys must be identifiers and values plain tokens."""
    findings = []
    for key, value in config.items():
        if not TUNABLE_KEY.fullmatch(str(key)):
            findings.append(f"{where}: tunable name {key!r} is not an identifier")
        if isinstance(value, bool) or not TUNABLE_VALUE.fullmatch(str(value)):
            findings.append(f"{where}: {key}={value!r} is not a plain number or word")
    return findings
