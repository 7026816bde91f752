"""The worker's seccomp filter: kernel code may start threads, never processes (stdlib only: runs in the sandbox).

A small classic-BPF program, written here (no libseccomp binding), installed with `seccomp(2)` and
SECCOMP_FILTER_FLAG_TSYNC on every thread of the worker right before it loads the extension, so a
kernel's module-init code already runs under it. It refuses (EPERM) `fork`, `vfork` and `clone` without
CLONE_THREAD, answers `clone3` with ENOSYS (glibc then falls back to `clone`, so threads still start),
and refuses `execve`, `ptrace`, reading or writing other processes' memory, io_uring and AIO (work the
kernel would do on the worker's behalf while it is frozen), userfaultfd, bpf, perf_event_open and new
namespaces. A thread always belongs to the worker's thread group, so its CPU time is in the worker's own
/proc counters; a process the judge cannot see cannot exist. Other ABIs than the native one (i386 via
int 0x80, x32) are refused outright.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import struct

# Linux ABI constants (linux/seccomp.h, linux/filter.h, linux/audit.h, linux/sched.h).
PR_SET_NO_NEW_PRIVS, PR_SET_DUMPABLE = 38, 4
SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC = 1, 1
RET_ALLOW, RET_ERRNO = 0x7FFF0000, 0x00050000
LD_W_ABS, JEQ_K, JGE_K, JSET_K, RET_K = 0x20, 0x15, 0x35, 0x45, 0x06
OFF_NR, OFF_ARCH, OFF_ARG0 = 0, 4, 16  # struct seccomp_data: nr, arch, ip, args[6] (low word of args[0] at 16)
CLONE_THREAD = 0x00010000
X32_SYSCALL_BIT = 0x40000000

# Per architecture: (AUDIT_ARCH, seccomp syscall, clone, clone3, the refused syscalls).
ARCHES: dict[str, tuple[int, int, int, int, dict[str, int]]] = {
    "x86_64": (
        0xC000003E, 317, 56, 435,
        {
            "fork": 57, "vfork": 58, "execve": 59, "execveat": 322, "ptrace": 101, "process_vm_readv": 310,
            "process_vm_writev": 311, "pidfd_getfd": 438, "userfaultfd": 323, "bpf": 321, "perf_event_open": 298,
            "io_uring_setup": 425, "io_uring_enter": 426, "io_uring_register": 427, "io_setup": 206,
            "io_submit": 209, "unshare": 272, "setns": 308,
        },
    ),
    "aarch64": (
        0xC00000B7, 277, 220, 435,
        {
            "execve": 221, "execveat": 281, "ptrace": 117, "process_vm_readv": 270, "process_vm_writev": 271,
            "pidfd_getfd": 438, "userfaultfd": 282, "bpf": 280, "perf_event_open": 241, "io_uring_setup": 425,
            "io_uring_enter": 426, "io_uring_register": 427, "io_setup": 0, "io_submit": 2, "unshare": 97,
            "setns": 268,
        },
    ),
}  # fmt: skip


def supported() -> str | None:
    """Why this machine cannot confine a worker (None: it can): an architecture without a table, no seccomp."""
    machine = platform.machine()
    if machine not in ARCHES:
        return f"no seccomp table for {machine}"
    try:
        with open("/proc/self/status") as f:
            if not any(line.startswith("Seccomp:") for line in f):
                return "the kernel has no seccomp"
    except OSError:
        return "/proc is not readable"
    return None


def program(machine: str) -> list[tuple[int, int, int, int]]:
    """The filter as (code, jt, jf, k) instructions: jumps are resolved to the three returns at the end."""
    arch, _, clone, clone3, refused = ARCHES[machine]
    body: list[tuple[int, str | int, str | int, int]] = [
        (LD_W_ABS, 0, 0, OFF_ARCH),
        (JEQ_K, 0, "deny", arch),
        (LD_W_ABS, 0, 0, OFF_NR),
    ]
    if machine == "x86_64":
        body.append((JGE_K, "deny", 0, X32_SYSCALL_BIT))
    body += [(JEQ_K, "deny", 0, nr) for nr in sorted(refused.values())]
    body += [(JEQ_K, "enosys", 0, clone3), (JEQ_K, "clone", "allow", clone)]
    labels: dict[str, int] = {}
    labels["clone"] = len(body)
    body += [(LD_W_ABS, 0, 0, OFF_ARG0), (JSET_K, "allow", "deny", CLONE_THREAD)]
    labels["allow"] = len(body)
    body.append((RET_K, 0, 0, RET_ALLOW))
    labels["deny"] = len(body)
    body.append((RET_K, 0, 0, RET_ERRNO | errno.EPERM))
    labels["enosys"] = len(body)
    body.append((RET_K, 0, 0, RET_ERRNO | errno.ENOSYS))

    def jump(pc: int, target: str | int) -> int:
        return target if isinstance(target, int) else labels[target] - pc - 1

    return [(code, jump(pc, jt), jump(pc, jf), k) for pc, (code, jt, jf, k) in enumerate(body)]


class _Fprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def dumpable(on: bool) -> None:
    """PR_SET_DUMPABLE: an undumpable zygote's memory cannot be opened by its worker (/proc/PID/mem)."""
    if _libc().prctl(PR_SET_DUMPABLE, 1 if on else 0, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE)")


def install() -> None:
    """Install the filter on every thread of this process (OSError where the kernel refuses it)."""
    machine = platform.machine()
    if (why := supported()) is not None:
        raise OSError(errno.ENOSYS, why)
    code = b"".join(struct.pack("=HBBI", *ins) for ins in program(machine))
    buffer = ctypes.create_string_buffer(code, len(code))
    prog = _Fprog(len(code) // 8, ctypes.cast(buffer, ctypes.c_void_p))
    libc = _libc()
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
    seccomp = ARCHES[machine][1]
    result = libc.syscall(seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, ctypes.byref(prog))
    if result != 0:  # > 0: the id of a thread that could not be synchronised
        err = ctypes.get_errno() if result < 0 else errno.EBUSY
        raise OSError(err, f"seccomp: {os.strerror(err)}")
