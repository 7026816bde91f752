"""The sandbox's environment (bot/untrusted/sandbox.py): pull-request code gets no secret and no ledger address."""

from __future__ import annotations


def test_pr_code_gets_an_environment_without_secrets_or_the_ledger(monkeypatch):
    from bot.untrusted.sandbox import base_env

    secrets = ("TAOTOKEN_API_KEY_DEEPGEMM_AGENT", "GITHUB_TOKEN", "OPGATE_DATABASE_URL", "ANTHROPIC_AUTH_TOKEN")
    for name in secrets:
        monkeypatch.setenv(name, "secret-value-123456")
    env = base_env({"OPGATE_BUILD_DIR": "/tmp/builds", **dict.fromkeys(secrets, "secret-value-123456")})
    assert "secret-value-123456" not in env.values()
    assert env["OPGATE_BUILD_DIR"] == "/tmp/builds" and "PATH" in env


# A process with a thread that burns 0.3 s of CPU and exits, then 0.2 s on its main thread; it says so and waits.
_BURNER = """
import sys, threading, time
def burn(seconds):
    start = time.thread_time()
    while time.thread_time() - start < seconds:
        pass
helper = threading.Thread(target=burn, args=(0.3,))
helper.start()
helper.join()
burn(0.2)
print("burnt", flush=True)
sys.stdin.read()
"""


def test_a_process_cpu_time_counts_every_thread_in_ns_those_that_exited_too():
    """Issue 37, 3: per-task schedstat loses a thread when it exits and /proc/PID/schedstat is the main thread's
    alone; the process's CPU clock (what `process_cpu_ns` and `tree_cpu_seconds` read) keeps the exited thread's."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    from bot.untrusted.sandbox import process_cpu_ns, tree_cpu_seconds

    with subprocess.Popen(
        [sys.executable, "-c", _BURNER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    ) as child:
        try:
            assert child.stdout is not None and child.stdout.readline().strip() == "burnt"
            tasks = sum(
                int(Path(f"/proc/{child.pid}/task/{tid}/schedstat").read_text().split()[0])
                for tid in os.listdir(f"/proc/{child.pid}/task")
            )
            main_only = int(Path(f"/proc/{child.pid}/schedstat").read_text().split()[0])
            total = process_cpu_ns(child.pid)
            assert total is not None and total >= 0.5e9  # both threads, the exited one included
            assert tasks < total - 0.25e9 and main_only < total - 0.25e9  # the task files lost the helper's 0.3 s
            assert 0.5 <= tree_cpu_seconds(child.pid) < total / 1e9 + 0.05
        finally:
            child.kill()
            child.wait()
    assert process_cpu_ns(child.pid) is None  # gone


def test_a_bound_checkout_shows_its_sources_but_not_gits_folder_or_a_local_env_file(tmp_path):
    """A kernel at the repository root binds the whole working tree: its .git/config (a checkout's token) and .env
    are hidden, its sources are there, and it stays read-only."""
    import sys

    import pytest

    from bot.untrusted.sandbox import Bind, Sandbox, Spec

    sandbox = Sandbox.detect()
    if not sandbox.isolated:
        pytest.fail(f"this test needs the sandbox: {sandbox.isolation}")
    tree = tmp_path / "repo"
    (tree / ".git").mkdir(parents=True)
    (tree / ".git" / "config").write_text("extraheader = AUTHORIZATION: basic c2VjcmV0LXRva2Vu\n")
    (tree / ".env").write_text("TAOTOKEN_API_KEY_X_AGENT=sk-planted-0123456789\n")
    (tree / ".env.local").write_text("SECRET=sk-planted-0123456789\n")
    (tree / "flash.cu").write_text("__global__ void k() {}\n")
    look = (
        "import os\n"
        "src = '/opgate/src'\n"
        "print(sorted(os.listdir(src + '/.git')))\n"
        "for name in ('.env', '.env.local', 'flash.cu'):\n"
        "    try:\n"
        "        print(name, repr(open(f'{src}/{name}').read()))\n"
        "    except OSError as exc:\n"
        "        print(name, type(exc).__name__)\n"
        "try:\n"
        "    open(src + '/new.cu', 'w')\n"
        "except OSError as exc:\n"
        "    print('write', type(exc).__name__)\n"
    )
    code, output = sandbox.run(Spec(binds=[Bind(tree, "/opgate/src")]), [sys.executable, "-c", look], timeout=60)
    assert code == 0, output
    assert "sk-planted" not in output and "c2VjcmV0" not in output
    lines = output.splitlines()
    assert lines[0] == "[]" and lines[3] == "flash.cu '__global__ void k() {}\\n'" and lines[4] == "write OSError"
    assert all(line.split(" ")[1] in ("''", "PermissionError") for line in lines[1:3])
