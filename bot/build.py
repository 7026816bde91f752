"""Build a kernel's torch extension with ninja (cpp_extension.load), cached by content hash.

Pipeline, visible in the function names: `build_key` → `build` (spawns `python -m bot.build`,
which calls cpp_extension.load in its own process) → a `Built` record the runner loads from.
An identical build (same sources, tunables, flags, toolchain) is never compiled twice.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from bot.manifest import BuildSpec
from bot.runner import clean_environment

log = logging.getLogger(__name__)

SOURCE_SUFFIXES = {".c", ".cc", ".cpp", ".cxx", ".cu", ".cuh", ".h", ".hh", ".hpp", ".inl"}
HEADER_SUFFIXES = {".h", ".hh", ".hpp", ".inl", ".cuh"}
CUDA_ONLY_SUFFIXES = {".cu", ".cuh"}
OK_MARKER = "opgate-build-ok.json"
BUILD_TIMEOUT_S = 1800


class Built(BaseModel):
    """Outcome of one build; `so_path` is set when `ok`."""

    model_config = ConfigDict(frozen=True)

    ok: bool
    device: Literal["cpu", "cuda"]
    key: str
    module: str
    entry: str = ""
    so_path: str | None = None
    seconds: float = 0.0
    cached: bool = False
    log_tail: str = ""


def defines(config: dict[str, object]) -> list[str]:
    """Each tunable becomes `-DKEY=value` (values were checked against the manifest first)."""
    return [f"-D{key.upper()}={value}" for key, value in sorted(config.items())]


def _toolchain(device: str) -> str:
    parts = [sys.version.split()[0]]
    try:
        parts.append("torch " + metadata.version("torch"))
    except metadata.PackageNotFoundError:
        parts.append("torch missing")
    compilers = [os.environ.get("CXX", "c++")] + (["nvcc"] if device == "cuda" else [])
    for exe in compilers:
        try:
            out = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=30).stdout
            parts.append(out.strip().splitlines()[-1] if out.strip() else exe)
        except (OSError, subprocess.TimeoutExpired):
            parts.append(f"{exe} missing")
    return "|".join(parts)


def build_key(folder: Path, spec: BuildSpec, config: dict[str, object], device: str) -> str:
    """sha256 over what the device's build compiles (its sources and every header), tunables, flags, toolchain.

    A CPU build ignores .cu/.cuh files, so a CUDA-only edit never rebuilds the CPU twin.
    """
    h = hashlib.sha256()
    for path in sorted(_inputs(folder, spec, device)):
        h.update(os.path.relpath(path, folder.resolve()).encode() + b"\0")
        h.update(hashlib.sha256(path.read_bytes()).digest())
    flags = {"device": device, "spec": spec.model_dump(), "defines": defines(config)}
    h.update(json.dumps(flags, sort_keys=True).encode())
    h.update(_toolchain(device).encode())
    return h.hexdigest()


def _inputs(folder: Path, spec: BuildSpec, device: str) -> set[Path]:
    files = {(folder / s).resolve() for s in spec.sources}
    files |= {p.resolve() for p in folder.rglob("*") if p.is_file() and p.suffix in HEADER_SUFFIXES}
    if device == "cpu":
        files = {p for p in files if p.suffix not in CUDA_ONLY_SUFFIXES}
    return files


def build(
    kernel: str,
    folder: Path,
    spec: BuildSpec,
    config: dict[str, object],
    device: Literal["cpu", "cuda"],
    build_root: Path,
) -> Built:
    """Build (or reuse) the extension for `folder` with the given tunables."""
    key = build_key(folder, spec, config, device)
    module = f"{kernel}_{device}_{key[:16]}"
    directory = build_root / module
    marker = directory / OK_MARKER
    if marker.exists():
        so_path = json.loads(marker.read_text())["so_path"]
        if Path(so_path).exists():
            return Built(ok=True, device=device, key=key, module=module, entry=spec.entry, so_path=so_path, cached=True)
    directory.mkdir(parents=True, exist_ok=True)
    job = {
        "name": module,
        "sources": [str((folder / s).resolve()) for s in spec.sources],
        "include": [str(folder.resolve())],
        "cflags": spec.cflags + defines(config),
        "cuda_cflags": spec.cuda_cflags + defines(config),
        "directory": str(directory.resolve()),
    }
    started = time.perf_counter()
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "bot.build", json.dumps(job)],
            capture_output=True,
            text=True,
            timeout=BUILD_TIMEOUT_S,
            env=clean_environment(),  # a PR's sources must not be able to #include a secret
        )
        output, ok = proc.stdout + proc.stderr, proc.returncode == 0
    except subprocess.TimeoutExpired:
        output, ok = f"build timed out after {BUILD_TIMEOUT_S} s", False
    seconds = time.perf_counter() - started
    tail = "\n".join(output.strip().splitlines()[-40:])
    so_path = str(directory / f"{module}.so")
    if ok and Path(so_path).exists():
        marker.write_text(json.dumps({"so_path": so_path, "seconds": seconds}))
        return Built(ok=True, device=device, key=key, module=module, entry=spec.entry, so_path=so_path, seconds=seconds)
    return Built(ok=False, device=device, key=key, module=module, seconds=seconds, log_tail=tail)


def _child(job: dict[str, object]) -> None:
    """Runs in the build process: write the ninja file, run ninja, load the result once."""
    import warnings

    warnings.filterwarnings("ignore")
    from torch.utils import cpp_extension

    try:
        _load(cpp_extension, job)
    except RuntimeError as exc:  # ninja's output is in the message
        print(str(exc), file=sys.stderr)
        raise SystemExit(1) from None


def _load(cpp_extension: object, job: dict[str, object]) -> None:
    cpp_extension.load(  # type: ignore[attr-defined]
        name=str(job["name"]),
        sources=list(job["sources"]),  # type: ignore[call-overload]
        extra_cflags=list(job["cflags"]),  # type: ignore[call-overload]
        extra_cuda_cflags=list(job["cuda_cflags"]),  # type: ignore[call-overload]
        extra_include_paths=list(job["include"]),  # type: ignore[call-overload]
        build_directory=str(job["directory"]),
        verbose=False,
    )


if __name__ == "__main__":
    _child(json.loads(sys.argv[1]))
