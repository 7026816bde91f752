"""The act tests' world (tests/test_actions.py): the workflows a team copies, executed by act (nektos/act) on this host.

A scratch kernel repository whose workflow is exactly what `opgate init` writes; its origin is the local GitHub
server's git store; the caller's `uses: OWNER/opgate/.github/workflows/opgate-*.yml@PIN` resolves to this checkout's
reusable workflows (`--local-repository`), and the third-party actions (checkout, upload-artifact,
download-artifact), which cannot be fetched here, to the stand-ins in tests/actions/. Every job runs on the host
(`-P LABEL=-self-hosted`, every label the workflows and the caller's arch-runners name), one at a time, in one
workspace (each checkout cleans it, as actions/checkout does).

What act is handed differs from the team's files in one way only: act 0.2.89 refuses the job-level `cache-mode` key
("Unknown Property cache-mode"), so the caller act reads is a copy without exactly those lines; `removed` lists them.

`pip install opgate==0.2.0` (the reusable workflows' default) installs this checkout's wheel from a local folder with
no index, and the dependencies it would bring are this test environment's (PYTHONPATH, opgate's own files left out),
so no job downloads anything; act talks to 127.0.0.1 only (its artifact server, the local GitHub server, the gateway,
PostgreSQL).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import sysconfig
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.github_server import FakeGitHub

ROOT = Path(__file__).resolve().parent.parent
STANDINS = Path(__file__).parent / "actions"
ACT = Path(sys.executable).parent / "act"
SOURCE = "OWNER/opgate"  # what the caller names (`opgate init --source`)
PIN = "7" * 40  # the release commit the caller is pinned to (`opgate init --pin`)
REPO = "octo-org/kernels"
# every runs-on label the workflows use, and GPU_B: the label the caller's arch-runners gives sm_100's review jobs
GPU_B = "gpu-sm100"
LABELS = ("ubuntu-24.04", "self-hosted", "linux", "gpu", "opgate-ledger", GPU_B)
# The stand-ins, by the action each replaces at the commit the workflows pin (tests/test_workflows.py NODE24_PINS).
ACTIONS = {
    "actions/checkout@3d3c42e5aac5ba805825da76410c181273ba90b1": "checkout",
    "actions/upload-artifact@bbbca2ddaa5d8feaa63e36b76fdaad77386f024f": "upload-artifact",
    "actions/download-artifact@3e5f45b2cfb9172054b4087a40e8e0b5a5461e7c": "download-artifact",
    "actions/cache@27d5ce7f107fe9357f9df03efb73ab90386fccae": "cache",
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def without_cache_mode(text: str) -> tuple[str, list[str]]:
    """`text` without its job-level `cache-mode:` lines (what act 0.2.89 refuses), and the lines removed."""
    kept, removed = [], []
    for line in text.splitlines(keepends=True):
        (removed if line.startswith("    cache-mode:") else kept).append(line)
    return "".join(kept), [line.rstrip("\n") for line in removed]


def wheelhouse(into: Path) -> Path:
    """This checkout built as a wheel (opgate==0.2.0) in `into`, from a copy so the checkout gets no build files."""
    src = into / "src"
    src.mkdir(parents=True)
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    for name in ("bot", "templates"):
        shutil.copytree(ROOT / name, src / name, ignore=shutil.ignore_patterns("__pycache__"))
    wheels = into / "wheels"
    pip = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "--no-index"]
    subprocess.run([*pip, "-w", str(wheels), str(src)], check=True, capture_output=True, text=True, timeout=300)
    shutil.rmtree(src)
    return wheels


def seed(into: Path) -> Path:
    """This environment's site-packages as hard links, opgate's own files left out (pip must install it, not find
    it): what the runner's python3 puts into each venv it makes (`runner_python`)."""
    into.mkdir(parents=True)
    site = Path(sysconfig.get_paths()["purelib"])
    for entry in site.iterdir():
        name = entry.name.lower()
        if name.startswith(("opgate", "__editable__", "_opgate")):
            continue
        if entry.is_dir():
            subprocess.run(["cp", "-al", str(entry), str(into / entry.name)], check=True)
        else:
            os.link(entry, into / entry.name)
    return into


RUNNER_PYTHON = """#!/bin/sh
# The runner's python3 (tests/act_world.py): this test's interpreter. A venv it makes starts with the test
# environment's packages (hard links), as a prepared self-hosted runner's would, so no job downloads torch.
if [ "$#" = 3 ] && [ "$1" = "-m" ] && [ "$2" = "venv" ]; then
  {base} -m venv --without-pip "$3" && exec cp -al {seed}/. "$3"/lib/python{version}/site-packages/
fi
exec {base} "$@"
"""


@dataclass
class ActRun:
    code: int
    log: str
    seconds: float

    def _ended(self, how: str) -> list[str]:
        """The jobs (by name, a matrix job's index dropped) that ended `🏁  Job {how}`, sorted."""
        names = []
        for line in self.log.splitlines():
            if line.startswith("[") and line.rstrip().endswith(f"Job {how}"):
                name = line[1 : line.index("]")].split("/", 2)[-1].strip()  # caller job/called workflow/job
                names.append(name.rsplit("-", 1)[0] if name[-1:].isdigit() and "-" in name else name)
        return sorted(names)

    def succeeded(self) -> list[str]:
        return self._ended("succeeded")

    def failed(self) -> list[str]:
        return self._ended("failed")

    def runs_on(self) -> dict[str, list[str]]:
        """Each job's runs-on as act evaluated it (its debug log, `act -v`): job name (a matrix job's index dropped)
        to its labels, for the jobs whose runs-on is an expression over the workflow's `*-runner*` inputs."""
        found: dict[str, list[str]] = {}
        for m in RUNS_ON.finditer(self.log):
            name = m["job"].split("/", 2)[-1].strip()
            name = name.rsplit("-", 1)[0] if name[-1:].isdigit() and "-" in name else name
            found[name] = re.findall(r"string=([^)]*)\)", m["labels"])
        return found


# act -v: `[caller/called/job] [DEBUG] expression '${{ fromJSON(inputs.gpu-runner) }}' evaluated to '[%!t(string=a) …]'`
RUNS_ON = re.compile(
    r"^\[(?P<job>[^\]]+)\] \[DEBUG\] expression '\$\{\{ [^']*inputs\.[a-z-]*runners?\)[^']* \}\}' "
    r"evaluated to '\[(?P<labels>[^']*)\]'$",
    re.MULTILINE,
)


@dataclass
class World:
    """One scratch repository on the local GitHub server, ready for act runs."""

    root: Path
    github: FakeGitHub
    wheels: Path
    seed: Path
    env: dict[str, str] = field(default_factory=dict)  # --env for every job (the local servers' URLs)
    secrets: dict[str, str] = field(default_factory=dict)
    removed: list[str] = field(default_factory=list)
    base: str = ""  # main's commit

    @property
    def repo(self) -> Path:
        return self.root / "kernels"

    def git(self, *args: str, cwd: Path | None = None) -> str:
        proc = subprocess.run(["git", *args], cwd=cwd or self.repo, check=True, capture_output=True, text=True)
        return proc.stdout.strip()

    def commit(self, message: str) -> str:
        self.git("add", "-A")
        self.git("commit", "-q", "-m", message)
        return self.git("rev-parse", "HEAD")

    def push(self, *refspecs: str) -> None:
        """Push into the local GitHub server's store, the origin every checkout fetches from."""
        self.git("push", "-q", "--force", str(self.github.git(REPO).path), *refspecs)

    def prepare(self) -> None:
        """The act-side folders: the caller without its cache-mode lines, opgate's workflows, the stand-ins."""
        text, self.removed = without_cache_mode((self.repo / ".github" / "workflows" / "opgate.yml").read_text())
        for line in self.removed:
            print(f"act_world: removed from the caller act reads: {line.strip()}")
        (self.root / "caller").mkdir(exist_ok=True)
        (self.root / "caller" / "opgate.yml").write_text(text)
        opgate = self.root / "opgate-release"
        shutil.rmtree(opgate, ignore_errors=True)
        shutil.copytree(ROOT / ".github" / "workflows", opgate / ".github" / "workflows")
        for path in sorted((opgate / ".github" / "workflows").glob("*.yml")):
            cleaned, removed = without_cache_mode(path.read_text())
            for line in removed:
                print(f"act_world: removed from {path.name}: {line.strip()}")
            path.write_text(cleaned)
        for folder in ACTIONS.values():
            dest = self.root / "standins" / folder
            shutil.rmtree(dest, ignore_errors=True)
            shutil.copytree(STANDINS / folder, dest)
            if folder.endswith("-artifact"):  # one client for both directions
                shutil.copy(STANDINS / "artifact.py", dest / "artifact.py")
        git_root = self.root / "git" / REPO.split("/")[0]
        git_root.mkdir(parents=True, exist_ok=True)
        link = git_root / f"{REPO.split('/')[1]}.git"
        if not link.exists():
            link.symlink_to(self.github.git(REPO).path)
        bin_dir = self.root / "bin"
        bin_dir.mkdir(exist_ok=True)
        base = getattr(sys, "_base_executable", sys.executable)
        version = f"{sys.version_info.major}.{sys.version_info.minor}"
        for name in ("python3", "python"):
            (bin_dir / name).write_text(RUNNER_PYTHON.format(base=base, seed=self.seed, version=version))
            (bin_dir / name).chmod(0o755)

    def act(self, event_name: str, event: dict, *, timeout: float = 900, verbose: bool = False) -> ActRun:
        """One act run of the caller for `event_name` with `event` as its payload; every job's log in `log`
        (`verbose`: act's debug log too, which names each job's evaluated runs-on: `ActRun.runs_on`)."""
        self.prepare()
        workspace = self.root / "workspace"  # act reads the event's commit from it; each checkout replaces it
        shutil.rmtree(workspace, ignore_errors=True)
        self.git("clone", "-q", str(self.github.git(REPO).path), str(workspace), cwd=self.root)
        event_path = self.root / f"event-{event_name}.json"
        event_path.write_text(json.dumps(event))
        artifacts = self.root / "artifacts"
        shutil.rmtree(artifacts, ignore_errors=True)
        argv = [
            str(ACT), event_name, "-W", str(self.root / "caller" / "opgate.yml"), "-C", str(workspace),
            "-e", str(event_path), "--concurrent-jobs", "1",
            "--action-cache-path", str(self.root / "act-cache"), "--action-offline-mode",
            "--artifact-server-path", str(artifacts), "--artifact-server-addr", "127.0.0.1",
            "--artifact-server-port", str(free_port()), "--no-cache-server",
            "--local-repository", f"{SOURCE}@{PIN}={self.root / 'opgate-release'}",
        ]  # fmt: skip
        for label in LABELS:
            argv += ["-P", f"{label}=-self-hosted"]
        if verbose:
            argv.append("--verbose")
        for ref, folder in ACTIONS.items():
            argv += ["--local-repository", f"{ref}={self.root / 'standins' / folder}"]
        env = {
            "GITHUB_REPOSITORY": REPO,
            "GITHUB_REPOSITORY_OWNER": REPO.split("/")[0],
            "GITHUB_API_URL": self.github.base_url,
            "GITHUB_SERVER_URL": self.github.root_url,
            "GITHUB_RUN_ID": "7",
            # github.workflow_ref, which act 0.2.89 does not set: the caller's file, as GitHub names it
            "GITHUB_WORKFLOW_REF": f"{REPO}/.github/workflows/opgate.yml@refs/heads/main",
            "OPGATE_ACT_GIT": str(self.root / "git"),
            # `pip install opgate==0.2.0`: this checkout's wheel, no index (the venv holds its dependencies already)
            "PIP_NO_INDEX": "1",
            "PIP_FIND_LINKS": str(self.wheels),
            **self.env,
        }
        for key, value in env.items():
            argv += ["--env", f"{key}={value}"]
        for key, value in self.secrets.items():
            argv += ["-s", f"{key}={value}"]
        # act's own environment: what any job inherits on the host. Nothing of the caller's secrets or settings.
        host = {
            "PATH": f"{self.root / 'bin'}:/usr/local/bin:/usr/bin:/bin",
            "HOME": str(self.root / "home"),
            "LANG": "C.UTF-8",
            "PIP_CONFIG_FILE": os.devnull,
            "ACT_DISABLE_VERSION_CHECK": "1",  # act asks api.nektosact.com for notices otherwise
            # anything that would leave this machine goes to a closed loopback port instead (act's Go client, pip,
            # git, opgate's requests); the local servers are on 127.0.0.1, which no proxy takes
            "HTTP_PROXY": "http://127.0.0.1:9",
            "HTTPS_PROXY": "http://127.0.0.1:9",
            "NO_PROXY": "127.0.0.1,localhost",
            **{k: v for k, v in os.environ.items() if k.startswith(("OPGATE_BUILD_DIR", "OPGATE_PCH", "CUDA_"))},
        }
        (self.root / "home").mkdir(exist_ok=True)
        start = time.monotonic()
        proc = subprocess.run(argv, env=host, capture_output=True, text=True, timeout=timeout, check=False)
        run = ActRun(proc.returncode, proc.stdout + proc.stderr, time.monotonic() - start)
        log = self.root / f"act-{event_name}-{len(list(self.root.glob('act-*.log')))}.log"
        log.write_text(run.log)
        print(f"act_world: act {event_name} exited {run.code} after {run.seconds:.1f} s; its log: {log}")
        return run


@dataclass(frozen=True)
class Scratch:
    """One kernel of the scratch repository: vec_scale's sources renamed, in `domain`, built for `arch` only."""

    domain: str = "moe"
    arch: str = "sm_90a"


def cheapest(manifest: str, arch: str = "sm_90a") -> str:
    """vec_scale's manifest with its CPU case only and one architecture (the act group's cost: docs in the test)."""
    manifest = manifest[: manifest.index('[[cases]]\nname = "cuda_1m"')].rstrip() + "\n"
    return manifest.replace('architectures = ["sm_90a", "sm_100a"]', f'architectures = ["{arch}"]')


def scratch_repository(root: Path, kernels: dict[str, Scratch], arch_runners: tuple[str, ...] = ()) -> Path:
    """A kernel repository a team adopts opgate in: tests/fixtures/check_repo's vec_scale sources once per kernel in
    `kernels` (renamed) under ops/, `opgate init` run in it (its opgate.toml, agent_task.json files and workflow,
    `--arch-runner` for each of `arch_runners`), then each kernel's contract filled in as the team would: the
    fixture's kernel.toml (its CPU case, its one architecture, its domain) and reference.py over init's drafts; a
    domain other than init's moe declared in opgate.toml with its own key variable, which its kernels' task files
    name. Committed on main."""
    from tests.conftest import CHECK_REPO

    repo = root / "kernels"
    repo.mkdir(parents=True)
    shutil.copy(CHECK_REPO / "README.md", repo / "README.md")
    contracts = ("kernel.toml", "reference.py")
    for name in kernels:
        dest = repo / "ops" / name
        dest.mkdir(parents=True)
        for path in (CHECK_REPO / "ops" / "vec_scale").iterdir():
            if path.name not in contracts:
                (dest / path.name.replace("vec_scale", name)).write_text(path.read_text().replace("vec_scale", name))
    for args in (["init", "-q", "-b", "main"], ["config", "user.email", "test@opgate.local"],
                 ["config", "user.name", "opgate tests"]):  # fmt: skip
        subprocess.run(["git", *args], cwd=repo, check=True)
    runners = [arg for value in arch_runners for arg in ("--arch-runner", value)]
    init = subprocess.run(
        [sys.executable, "-m", "bot", "init", "--kernels", "ops", "--domain", "moe", "--source", SOURCE, "--pin", PIN,
         *runners],
        cwd=repo, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert init.returncode == 0, init.stdout + init.stderr
    config = repo / "opgate.toml"
    for domain in sorted({k.domain for k in kernels.values()} - {"moe"}):
        key = f"TAOTOKEN_API_KEY_{domain.upper()}_AGENT"
        declared = f'\n[domains.{domain}]\nkey = "{key}"\nweekly_budget = 200000\nrequest_budget = 8000\n'
        config.write_text(config.read_text() + declared)
    for name, kernel in kernels.items():
        for contract in contracts:
            text = (CHECK_REPO / "ops" / "vec_scale" / contract).read_text().replace("vec_scale", name)
            if contract == "kernel.toml":
                text = cheapest(text, kernel.arch).replace('domain = "moe"', f'domain = "{kernel.domain}"', 1)
            (repo / "ops" / name / contract).write_text(text)
        task = repo / "ops" / name / "agent_task.json"
        key = f"TAOTOKEN_API_KEY_{kernel.domain.upper()}_AGENT"
        task.write_text(task.read_text().replace("TAOTOKEN_API_KEY_MOE_AGENT", key))
    return repo
