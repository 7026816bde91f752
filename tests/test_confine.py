"""The workers' confinement: the seccomp filter (runner/confine.py), the undumpable zygote as its sandbox's pid 1,
and the sandbox's path rewriting for a plain fallback process. Real processes, real filters; a second each."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bot.models.finding import Phrase
from bot.models.report import Isolation
from bot.untrusted.runner import confine
from bot.untrusted.sandbox import Bind, Sandbox, Spec

RUNNER = Path(__file__).resolve().parent.parent / "bot/untrusted/runner"

# Runs in a fresh interpreter: install the filter, then try everything a kernel could use to start a process.
ATTEMPTS = """
import json, os, subprocess, sys, threading
sys.path.insert(0, sys.argv[1])
import confine
confine.install()
result = {}
def attempt(name, fn):
    try:
        fn()
        result[name] = "allowed"
    except OSError as exc:
        result[name] = exc.strerror
attempt("fork", lambda: os.fork() or None)
attempt("subprocess", lambda: subprocess.run(["/bin/true"]))
attempt("posix_spawn", lambda: os.posix_spawn("/bin/true", ["true"], {}))
attempt("exec", lambda: os.execv("/bin/true", ["true"]))
seen = []
thread = threading.Thread(target=lambda: seen.append(os.getpid()))
thread.start()
thread.join()
result["thread"] = "ran in this process" if seen == [os.getpid()] else "did not run"
result["status"] = [l.split()[1] for l in open("/proc/self/status") if l.startswith("Seccomp:")][0]
print(json.dumps(result))
"""


@pytest.mark.skipif(confine.supported() is not None, reason=f"no seccomp here: {confine.supported()}")
def test_the_filter_refuses_every_new_process_and_lets_threads_run():
    out = subprocess.run([sys.executable, "-c", ATTEMPTS, str(RUNNER)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == {
        "fork": "Operation not permitted",
        "subprocess": "Operation not permitted",
        "posix_spawn": "Operation not permitted",
        "exec": "Operation not permitted",
        "thread": "ran in this process",
        "status": "2",
    }


def test_the_filter_checks_the_architecture_first_and_ends_in_its_three_answers():
    for machine in confine.ARCHES:
        prog = confine.program(machine)
        assert prog[0] == (confine.LD_W_ABS, 0, 0, confine.OFF_ARCH)
        assert prog[1][0] == confine.JEQ_K and prog[1][3] == confine.ARCHES[machine][0]
        assert [k for code, _, _, k in prog[-3:]] == [confine.RET_ALLOW, confine.RET_ERRNO | 1, confine.RET_ERRNO | 38]
        for pc, (code, jt, jf, _) in enumerate(prog):  # every jump lands inside the program
            if code in (confine.JEQ_K, confine.JGE_K, confine.JSET_K):
                assert pc + 1 + jt < len(prog) and pc + 1 + jf < len(prog)


# The zygote's place in the sandbox: pid 1, undumpable, forking a worker that installs the filter and then tries to
# write into every other process it can see (the bwrap reaper used to be there, unfiltered and writable).
INSIDE = """
import json, os, sys
sys.path.insert(0, "/opgate/run")
import confine
confine.dumpable(False)
r, w = os.pipe()
if os.fork() == 0:
    confine.dumpable(True)
    confine.install()
    found = {}
    for pid in sorted(p for p in os.listdir("/proc") if p.isdigit() and int(p) != os.getpid()):
        try:
            os.close(os.open(f"/proc/{pid}/mem", os.O_RDWR))
            found[pid] = "writable"
        except OSError as exc:
            found[pid] = exc.strerror
    os.write(w, json.dumps({"me": os.getpid(), "others": found}).encode())
    os._exit(0)
os.wait()
print(os.read(r, 65536).decode(), os.getpid())
"""


def test_a_worker_can_write_into_no_other_process_of_its_sandbox():
    sandbox = Sandbox.detect()
    if not sandbox.isolated:
        pytest.fail(f"this test needs the sandbox: {sandbox.isolation}")
    spec = Spec(binds=[Bind(RUNNER / "confine.py", "/opgate/run/confine.py")], pid1=True)
    code, output = sandbox.run(spec, [sys.executable, "-c", INSIDE], timeout=60)
    assert code == 0, output
    text, zygote = output.strip().rsplit(" ", 1)
    seen = json.loads(text)
    assert zygote == "1" and seen["me"] == 2  # the zygote is the namespace's init: no reaper beside it
    assert seen["others"] == {"1": "Permission denied"}


def test_paths_are_rewritten_once_for_a_plain_process_even_when_the_cache_path_holds_a_sandbox_path():
    """Issue 24, 7: the default cache ~/.cache/opgate/build holds /opgate/build, and a bound object's host path was
    rewritten a second time: ninja looked for <cache>/root/.cache/opgate/build/…/objects/….o."""
    plain = Sandbox(Isolation(mode="none", reason=Phrase.as_written("test")), None)
    cache = Path("/root/.cache/opgate/build")
    spec = Spec(
        binds=[
            Bind(Path("/repo/kernels/k"), "/opgate/src"),
            Bind(cache / "work/k-cpu-1", "/opgate/build", writable=True),
            Bind(cache / "objects/abc.o", "/opgate/obj/abc.o"),
        ]
    )
    text = "build /opgate/build/ext.so: link /opgate/obj/abc.o /opgate/build/def.o -I/opgate/src /opgate/buildx"
    assert plain.localize(spec, text) == (
        f"build {cache}/work/k-cpu-1/ext.so: link {cache}/objects/abc.o {cache}/work/k-cpu-1/def.o "
        "-I/repo/kernels/k /opgate/buildx"
    )
