"""The compilers and torch's extension flags, probed once per toolchain in a trusted child process.

`python -m bot.untrusted.toolchain DEVICE…` imports torch (nothing from a repository) and prints the flags a torch
binding of each device is compiled and linked with; `toolchain()` caches each answer under the build folder by the
interpreter, torch and compiler versions, so a review that finds it cached imports nothing, and a cold one probes
the CPU and CUDA (where nvcc is) at once.
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
Device = Literal["cpu", "cuda"]


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


def _versions(device: str, cxx: str, nvcc: str | None) -> dict[str, str]:
    return {
        "python": sys.version.split()[0],
        "executable": sys.executable,
        "torch": _torch_version(),
        "cxx": _version(cxx),
        **({"nvcc": _version(nvcc)} if device == "cuda" and nvcc else {}),
    }


def _cache_path(cache_dir: Path, device: str, versions: dict[str, str]) -> Path:
    ident = hashlib.sha256(json.dumps([KEY_VERSION, device, versions], sort_keys=True).encode()).hexdigest()
    return cache_dir / f"toolchain-{device}-{ident[:24]}.json"


def toolchain(device: Literal["cpu", "cuda"], cache_dir: Path) -> Toolchain:
    """The toolchain for `device`, from the cache or from a fresh probe. One probe answers for every device this
    runner builds for (the CPU, and CUDA where nvcc is on the PATH) and caches each: a cold review or check, which
    needs both (the resource check's nvcc flags, the CPU build's), imports torch for it once, not twice."""
    cxx, nvcc = _compilers()
    if device == "cuda" and nvcc is None:
        raise BuildError("nvcc is not on the PATH: cannot build the CUDA extension")
    versions: dict[Device, dict[str, str]] = {device: _versions(device, cxx, nvcc)}
    paths: dict[Device, Path] = {device: _cache_path(cache_dir, device, versions[device])}
    try:
        return Toolchain.model_validate_json(paths[device].read_text())
    except (OSError, ValidationError):
        pass
    others: list[Device] = ["cpu", "cuda"] if nvcc is not None else ["cpu"]
    for other in others:
        if other not in versions:
            versions[other] = _versions(other, cxx, nvcc)
            paths[other] = _cache_path(cache_dir, other, versions[other])
    probed = [d for d in paths if d == device or not paths[d].is_file()]
    proc = subprocess.run(
        [sys.executable, "-P", "-m", "bot.untrusted.toolchain", *probed],  # -P: never the cwd's bot/ (a repository's)
        capture_output=True,
        text=True,
        timeout=300,
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": "/tmp", "LANG": "C.UTF-8"},
    )
    if proc.returncode != 0:
        raise BuildError(f"cannot read torch's extension flags: {proc.stderr.strip()[-500:]}")
    answers = json.loads(proc.stdout)
    if "error" in answers[device]:
        raise BuildError(f"cannot read torch's extension flags: {answers[device]['error'][-500:]}")
    cache_dir.mkdir(parents=True, exist_ok=True)
    found: dict[Device, Toolchain] = {}
    for d in probed:
        if "error" in answers[d]:  # the other device's probe failed: it is probed again when a build needs it
            continue
        tc = Toolchain(device=d, cxx=cxx, nvcc=nvcc if d == "cuda" else None, versions=versions[d], **answers[d])
        tc = found[d] = tc.model_copy(update={"key": hashlib.sha256(tc.model_dump_json().encode()).hexdigest()})
        tmp = paths[d].with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(tc.model_dump_json(indent=2))
        tmp.replace(paths[d])
    return found[device]


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


def _answer(device: str) -> dict[str, object]:
    """One device's flags, or why they could not be read (the other devices of the probe still answer)."""
    try:
        return dict(_probe(device))
    except Exception as exc:  # torch's private helpers change between versions
        return {"error": f"{type(exc).__name__}: {exc}"}


if __name__ == "__main__":  # DEVICE…: each device's flags, from one import of torch
    print(json.dumps({device: _answer(device) for device in sys.argv[1:]}))
