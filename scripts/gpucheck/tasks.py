"""The check's first steps, stdlib only (they run before opgate's dependencies are installed).

python -m scripts.gpucheck.tasks machine   what the machine has: GPU, driver, torch and its CUDA, nvcc, ncu
python -m scripts.gpucheck.tasks setup     install opgate (editable) and its dependencies from .whl/, no network
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from scripts.gpucheck.steps import one_line, write_step_json

ROOT = Path(__file__).resolve().parents[2]
WHEELS = ROOT / ".whl"
IMPORTS = "import bot.cli, bot.untrusted.runner.judge, pydantic, github, jinja2, unidiff, tiktoken, torch"

TORCH_PROBE = """
import json, torch
info = {"torch": torch.__version__, "torch_cuda": torch.version.cuda, "cuda_available": torch.cuda.is_available()}
if info["cuda_available"]:
    p = torch.cuda.get_device_properties(0)
    info.update(device=p.name, capability=f"{p.major}.{p.minor}", sms=p.multi_processor_count,
                memory_gib=round(p.total_memory / 2**30, 1), devices=torch.cuda.device_count())
    x = torch.randn(256, 256, device="cuda")
    info["matmul_ok"] = bool(torch.allclose((x @ x).cpu(), x.cpu() @ x.cpu(), rtol=1e-2, atol=1e-2))
print(json.dumps(info))
"""


def _run(argv: list[str], timeout: float = 60) -> tuple[int, str]:
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return 127, str(exc)
    return proc.returncode, (proc.stdout + proc.stderr).strip()


def _version(tool: str, pattern: str) -> str | None:
    if shutil.which(tool) is None:
        return None
    _, out = _run([tool, "--version"])
    match = re.search(pattern, out)
    return match.group(1) if match else one_line(out, 80)


def machine() -> int:
    facts: dict[str, Any] = {
        "python": sys.version.split()[0],
        "executable": sys.executable,
        "cpu_cores": os.cpu_count(),
    }
    code, out = _run(
        ["nvidia-smi", "--query-gpu=name,driver_version,memory.total,clocks.max.sm", "--format=csv,noheader"]
    )
    if code == 0 and out:
        name, driver, memory, clock = ([*out.splitlines()[0].split(","), "", "", ""])[:4]
        facts.update(gpu=name.strip(), driver=driver.strip(), gpu_memory=memory.strip(), max_sm_clock=clock.strip())
    else:
        facts["nvidia_smi"] = one_line(out, 200) or "not found"
    code, out = _run([sys.executable, "-c", TORCH_PROBE], timeout=120)
    if code == 0:
        facts.update(json.loads(out.splitlines()[-1]))
    else:
        facts["torch_error"] = one_line(out.splitlines()[-1] if out else "no output", 200)
    facts["nvcc"] = _version("nvcc", r"release [\d.]+, V([\d.]+)")
    facts["ncu"] = _version("ncu", r"Version ([\d.]+)")
    facts["cxx"] = _version("g++", r"\) ([\d.]+)")
    facts["git"] = _version("git", r"version ([\d.]+)")
    facts["bwrap_on_path"] = shutil.which("bwrap")
    problems = []
    if not facts.get("cuda_available"):
        problems.append(f"torch sees no CUDA GPU ({facts.get('torch_error') or 'torch ' + str(facts.get('torch'))})")
    elif not facts.get("matmul_ok"):
        problems.append("a 256x256 matmul on the GPU differs from the CPU's")
    if not facts["nvcc"]:
        problems.append("nvcc is not on the PATH (CUDA builds need it)")
    if not facts["git"]:
        problems.append("git is not on the PATH (the reviews need it)")
    device = (
        f"{facts.get('device', facts.get('gpu', 'no GPU'))} (sm_{str(facts.get('capability', '?')).replace('.', '')})"
    )
    reason = "; ".join(problems) if problems else f"{device}, torch {facts.get('torch')}, nvcc {facts['nvcc']}"
    write_step_json("failed" if problems else "passed", reason, facts)
    return 1 if problems else 0


def _imports_ok() -> tuple[bool, str]:
    code, out = _run([sys.executable, "-c", f"{IMPORTS}; import bot; print(bot.__file__)"], timeout=120)
    where = out.splitlines()[-1] if out else ""
    return code == 0 and where.startswith(str(ROOT)), where


def setup() -> int:
    ok, where = _imports_ok()
    if ok:
        write_step_json("passed", f"already installed here ({sys.executable})")
        return 0
    if not WHEELS.is_dir() or not any(WHEELS.glob("*.whl")):
        write_step_json(
            "failed",
            "no wheels in .whl/: run `bash scripts/gpu-wheels.sh` where PyPI is reachable; carry .whl with the check",
        )
        return 1
    # Into the environment of the Python that has CUDA torch: a venv made from it with --system-site-packages
    # would reach the base interpreter's packages, not torch's venv, and the sandbox binds only this prefix.
    argv = [sys.executable, "-m", "pip", "install", "--no-index", "--find-links", str(WHEELS)]
    argv += ["--no-build-isolation", "--disable-pip-version-check", "--no-warn-script-location", "-e", str(ROOT)]
    print("$ " + " ".join(argv), flush=True)
    code = subprocess.call(argv)
    ok, where = _imports_ok()
    if code != 0 or not ok:
        why = f"pip install exited {code}" if code else f"installed, but `{IMPORTS}` fails: {one_line(where, 200)}"
        write_step_json("failed", why)
        return 1
    wheels = sorted(p.name for p in WHEELS.glob("*.whl"))
    write_step_json("passed", f"installed into {sys.prefix} from {len(wheels)} wheels", {"wheels": wheels})
    return 0


if __name__ == "__main__":
    task = sys.argv[1] if len(sys.argv) > 1 else ""
    if task not in ("machine", "setup"):
        print("usage: python -m scripts.gpucheck.tasks machine|setup", file=sys.stderr)
        sys.exit(2)
    sys.exit(machine() if task == "machine" else setup())
