"""The compilers and torch's extension flags, probed once per toolchain in a trusted child process.

`python -m bot.untrusted.toolchain DEVICE` imports torch (nothing from a repository) and prints the flags a torch
binding is compiled and linked with; `toolchain()` caches the answer under the build folder by the
interpreter, torch and compiler versions, so a review that finds it cached imports nothing.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from bot.errors import BuildError

EXT_NAME = "opgate_ext"  # TORCH_EXTENSION_NAME of every binding: base and head never share a process
KEY_VERSION = "opgate.toolchain/1"


class Toolchain(BaseModel):
    """What every compile and link of one device uses; `key` changes when any of it does."""

    model_config = ConfigDict(frozen=True)

    device: Literal["cpu", "cuda"]
    cxx: str
    nvcc: str | None = None
    versions: dict[str, str]
    binding_cflags: list[str]
    nvcc_flags: list[str]
    ldflags: list[str]
    key: str = ""


def _version(exe: str) -> str:
    try:
        out = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=60).stdout
    except (OSError, subprocess.TimeoutExpired):
        return "missing"
    lines = [line for line in out.strip().splitlines() if line.strip()]
    return " / ".join(lines[:1] + lines[-1:]) if lines else "unknown"


def _compilers() -> tuple[str, str | None]:
    wanted = os.environ.get("CXX", "").strip()  # the runner's choice (never the repository's)
    cxx = shutil.which(wanted) if wanted else shutil.which("c++") or shutil.which("g++")
    if cxx is None:
        raise BuildError(f"no C++ compiler ({wanted or 'c++ or g++'}) on the PATH")
    return os.path.realpath(cxx), shutil.which("nvcc")


def toolchain(device: Literal["cpu", "cuda"], cache_dir: Path) -> Toolchain:
    """The toolchain for `device`, from the cache or from a fresh probe."""
    cxx, nvcc = _compilers()
    if device == "cuda" and nvcc is None:
        raise BuildError("nvcc is not on the PATH: cannot build the CUDA extension")
    versions = {
        "python": sys.version.split()[0],
        "executable": sys.executable,
        "torch": _torch_version(),
        "cxx": _version(cxx),
        **({"nvcc": _version(nvcc)} if device == "cuda" and nvcc else {}),
    }
    ident = hashlib.sha256(json.dumps([KEY_VERSION, device, versions], sort_keys=True).encode()).hexdigest()
    path = cache_dir / f"toolchain-{device}-{ident[:24]}.json"
    try:
        return Toolchain.model_validate_json(path.read_text())
    except (OSError, ValidationError):
        pass
    proc = subprocess.run(
        [sys.executable, "-m", "bot.untrusted.toolchain", device],
        capture_output=True,
        text=True,
        timeout=300,
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": "/tmp", "LANG": "C.UTF-8"},
    )
    if proc.returncode != 0:
        raise BuildError(f"cannot read torch's extension flags: {proc.stderr.strip()[-500:]}")
    flags = json.loads(proc.stdout)
    tc = Toolchain(device=device, cxx=cxx, nvcc=nvcc if device == "cuda" else None, versions=versions, **flags)
    tc = tc.model_copy(update={"key": hashlib.sha256(tc.model_dump_json().encode()).hexdigest()})
    cache_dir.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(tc.model_dump_json(indent=2))
    tmp.replace(path)
    return tc


def _torch_version() -> str:
    try:
        return metadata.version("torch")
    except metadata.PackageNotFoundError:
        return "missing"


def _probe(device: str) -> dict[str, list[str]]:
    """Runs in the probe process: torch's include paths, defines and libraries for a binding."""
    import sysconfig
    import warnings

    from torch.utils import cpp_extension as ce

    with_cuda = device == "cuda"
    nvcc = shutil.which("nvcc")
    home = os.path.dirname(os.path.dirname(os.path.realpath(nvcc))) if nvcc else "/usr/local/cuda"
    try:
        includes = ce.include_paths("cuda" if with_cuda else "cpu")
    except OSError:  # a CPU build of torch finds no CUDA home: take nvcc's (keys stay computable)
        includes = [*ce.include_paths("cpu"), os.path.join(home, "include")]
    python_include = sysconfig.get_path("include", scheme="posix_prefix")
    cflags = [f"-DTORCH_EXTENSION_NAME={EXT_NAME}", "-DTORCH_API_INCLUDE_EXTENSION_H"]
    with warnings.catch_warnings():  # torch >= 2.9 deprecates the pybind11 ABI flags (and returns none)
        warnings.simplefilter("ignore")
        for flag_fn in ("_get_pybind11_abi_build_flags", "_get_glibcxx_abi_build_flags"):
            if hasattr(ce, flag_fn):
                cflags += list(getattr(ce, flag_fn)())
    for inc in [*includes, python_include]:
        cflags += ["-isystem", inc]
    try:
        ldflags = list(ce._prepare_ldflags([], with_cuda, False, False, False))
    except (TypeError, AttributeError, OSError):  # a changed private signature, or no CUDA home: by hand
        ldflags = [f"-L{p}" for p in ce.library_paths("cpu")] + ["-lc10", "-ltorch_cpu", "-ltorch", "-ltorch_python"]
        if with_cuda:
            ldflags += [f"-L{os.path.join(home, 'lib64')}", "-lcudart", "-lc10_cuda", "-ltorch_cuda"]
    nvcc_flags = [*ce.COMMON_NVCC_FLAGS, "--compiler-options", "-fPIC"] if with_cuda else []
    return {"binding_cflags": cflags, "nvcc_flags": nvcc_flags, "ldflags": ["-shared", *ldflags]}


if __name__ == "__main__":
    print(json.dumps(_probe(sys.argv[1])))
