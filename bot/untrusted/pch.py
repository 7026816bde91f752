"""One precompiled torch header per toolchain and flag set: which binding may use it, its key, its ninja edge.

A binding whose first `#include` is `torch/extension.h`, `torch/all.h` or `torch/python.h` is compiled with a GCC
precompiled header of that header, built once (in the sandbox, from torch's headers only: no repository folder on
its include path) and kept in the build store under a key over the toolchain, the header and the exact flags it was
built with. The `.gch` lies beside a stub header of the same name (`#include_next` of the real one) in a folder put
on the include path after the kernel's own folders: GCC takes the `.gch` when it is valid for the compile and the
stub otherwise (`-Winvalid-pch` says why), so a build never fails for the precompiled header. Compiling the
header costs about two plain compiles of a binding and saves about half of each later one, so the first binding of
a toolchain and flag set is compiled without it and the second compiles it: a cold build is never slower. Bindings
compiled by nvcc are left alone: nvcc hands its host compiler a preprocessed file, which no precompiled header can
serve. `OPGATE_PCH` (`mode`) changes when the header is compiled: `first` for the first binding of a flag set (a
runner's setup step), `stored` never but a stored one is used (a runner whose cache is restored read-only keeps
nothing it compiles), `off` never and none is used.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

from bot.errors import InputError
from bot.untrusted.toolchain import Toolchain

KEY_VERSION = "opgate.pch/1"
MODES = ("second", "first", "stored", "off")  # OPGATE_PCH: which binding of a flag set compiles the header
HEADERS = ("torch/extension.h", "torch/all.h", "torch/python.h")
WANTED = "wanted"  # in a header's store folder: a binding of these flags was compiled without it
PCH = "/opgate/pch"  # where the sandbox sees a stored precompiled header's folder: PCH/N
# Folders in the kernel's own include path that would shadow a header the precompiled one holds.
SHADOWS = ("torch", "ATen", "c10", "caffe2", "pybind11", "Python.h")
# Flags that put a header or an include folder in front of the binding's first include: the header is
# precompiled without the repository's folders, so such a binding is compiled without it.
_INCLUDING = ("-include", "-imacros", "-I", "-isystem", "-iquote", "-idirafter", "-nostdinc", "--sysroot")
_COMMENTS = re.compile(rb"//[^\n]*|/\*.*?\*/", re.S)
_FIRST_INCLUDE = re.compile(rb"\s*#\s*include\s*[<\"]([^>\"]+)[>\"]")
_INVALID = re.compile(r"^.*\.gch: not used because.*$", re.M)  # GCC's -Winvalid-pch warning


@dataclass(frozen=True)
class Header:
    """A precompiled header a binding uses: the header's name, the flags it is built with, its store key."""

    name: str
    flags: tuple[str, ...]
    key: str

    @property
    def gch(self) -> str:
        return f"{self.name}.gch"


def mode() -> str:
    """OPGATE_PCH: `second` (default), `first`, `stored` or `off`; any other value is refused."""
    value = os.environ.get("OPGATE_PCH", "").strip().lower() or MODES[0]
    if value not in MODES:
        raise InputError(f"OPGATE_PCH={value!r}: expected one of {', '.join(MODES)}")
    return value


def first_include(text: bytes) -> str | None:
    """The header named by the source's first line of code when that line is an `#include`, else None."""
    m = _FIRST_INCLUDE.match(_COMMENTS.sub(b"", text))
    return m.group(1).decode(errors="replace") if m else None


def header_flags(flags: list[str], own_dirs: list[str]) -> list[str]:
    """A binding's flags without the kernel's own include folders (`own_dirs`, which the header build never sees)."""
    return [f for f in flags if f not in own_dirs]


def key(tc: Toolchain, name: str, flags: list[str]) -> str:
    """sha256 over the toolchain (compiler, torch, its include paths), the header and the exact flags."""
    return hashlib.sha256(json.dumps([KEY_VERSION, tc.key, name, flags]).encode()).hexdigest()


def plan(
    text: bytes, nvcc: bool, flags: list[str], own_dirs: list[str], manifest_flags: list[str], folders: list[Path],
    tc: Toolchain,
) -> Header | str:  # fmt: skip
    """The precompiled header a binding uses, or why it is compiled without one (a sentence for its log)."""
    name = first_include(text)
    if name not in HEADERS:
        return f"its first include is {f'<{name}>' if name else 'not an #include'}, not one of {', '.join(HEADERS)}"
    if nvcc:
        return "nvcc compiles it (its host compiler reads a preprocessed file: no precompiled header applies)"
    if "g++" not in Path(tc.cxx).name and "gcc" not in Path(tc.cxx).name:
        return f"the compiler {Path(tc.cxx).name} is not GCC"
    if bad := [f for f in manifest_flags if f.startswith(_INCLUDING)]:
        return f"its flags differ from the header's: {bad[0]} puts a header or folder before <{name}>"
    for folder in folders:
        if shadow := [s for s in SHADOWS if (folder / s).exists()]:
            return f"{folder.name}/{shadow[0]} would shadow a header that <{name}> includes"
    built_with = header_flags(flags, own_dirs)
    return Header(name=name, flags=tuple(built_with), key=key(tc, name, built_with))


def stub(name: str) -> str:
    """The header beside the `.gch`: what GCC reads when it does not take the precompiled one."""
    return f"// opgate: read only where GCC refuses the precompiled header beside it\n#include_next <{name}>\n"


def source(name: str) -> str:
    """The file the precompiled header is compiled from (kept apart from the stub's folder)."""
    return f"#include <{name}>\n"


def refusals(output: str) -> list[str]:
    """GCC's own words where it did not use a precompiled header (`-Winvalid-pch`)."""
    return [line.strip() for line in _INVALID.findall(output)]
