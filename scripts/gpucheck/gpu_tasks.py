"""The check's GPU steps that drive opgate itself (run after the setup step installed its dependencies).

python -m scripts.gpucheck.gpu_tasks sandbox   bubblewrap with the GPU bound; CUDA inside it
python -m scripts.gpucheck.gpu_tasks build     every kernel's CUDA and CPU extension, in parallel, timed
python -m scripts.gpucheck.gpu_tasks review    opgate review A/A (a comment in each kernel's .cu) per kernel
python -m scripts.gpucheck.gpu_tasks example   opgate review of examples/changes/*.patch
python -m scripts.gpucheck.gpu_tasks pytest    pytest -m gpu, its counts and failures
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import tomllib
import xml.etree.ElementTree as ET
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Literal

from scripts.gpucheck.steps import one_line, write_step_json

ROOT = Path(__file__).resolve().parents[2]
KERNELS = ROOT / "kernels"
BASELINES = ROOT / "benchmarks" / "torch_baselines"  # torch.matmul and SDPA as an extension (kernels_vs_torch.py)
CUDA_SMOKE = (
    "import json, torch; x = torch.arange(1 << 20, device='cuda', dtype=torch.float32); "
    "print(json.dumps({'device': torch.cuda.get_device_name(), 'sum': float(x.sum())}))"
)
EXPECTED_SUM = float((1 << 20) * ((1 << 20) - 1) // 2)


def work() -> Path:
    return Path(os.environ.get("GPU_CHECK_WORK", ROOT / "reports" / "gpu-check"))


def seconds_left() -> float:
    deadline = os.environ.get("GPU_CHECK_DEADLINE")
    return float(deadline) - time.time() if deadline else float("inf")


def sandbox() -> int:
    from bot.untrusted.sandbox import Sandbox, Spec, gpu_devices
    from bot.wording.messages import phrase

    box = Sandbox.detect()
    details: dict[str, Any] = {"isolation": box.isolation.model_dump(), "gpu_devices": [str(p) for p in gpu_devices()]}
    if not box.isolated:
        why = phrase(box.isolation.reason) if box.isolation.reason is not None else ""
        write_step_json("failed", f"no sandbox, reviews here run with isolation none: {why}", details)
        return 1
    code, out = box.run(Spec(gpu=True), [sys.executable, "-c", CUDA_SMOKE], timeout=180)
    details["cuda_inside"] = one_line(out, 1000)
    try:
        got = json.loads(out.strip().splitlines()[-1])
        ok = code == 0 and got["sum"] == EXPECTED_SUM
    except (ValueError, IndexError, KeyError, TypeError):
        ok = False
    if not ok:
        last = [line for line in out.splitlines() if line.strip()][-1:] or ["no output"]
        write_step_json("failed", f"CUDA inside bubblewrap failed (exit {code}): {one_line(last[0], 250)}", details)
        return 1
    write_step_json(
        "passed", f"{box.isolation.tool}; {len(details['gpu_devices'])} device nodes bound; CUDA ran inside", details
    )
    return 0


def build() -> int:
    from bot.config.manifest import load_kernel
    from bot.config.manifest_tables import BuildSpec
    from bot.untrusted.build import build as build_one
    from bot.untrusted.sandbox import Sandbox

    box = Sandbox.detect()
    store = Path(os.environ.get("OPGATE_BUILD_DIR", work() / "build"))
    kernels = [load_kernel(m.parent) for m in sorted(KERNELS.glob("*/kernel.toml"))]
    devices: tuple[Literal["cuda", "cpu"], ...] = ("cuda", "cpu")
    jobs: list[tuple[Any, Literal["cuda", "cpu"]]] = [
        (k, device) for k in kernels for device in devices if device in k.manifest.build
    ]
    if (BASELINES / "binding.cpp").is_file():
        jobs.append((None, "cuda"))

    def one(job: tuple[Any, Literal["cuda", "cpu"]]) -> dict[str, Any]:
        k, device = job
        if k is None:  # the benchmark's torch baselines, built once here like a kernel
            spec = BuildSpec(sources=["binding.cpp"], cflags=["-O3"], entry="matmul")
            built = build_one("torch_baselines", BASELINES, spec, {}, device, store, box)
            return _row("torch_baselines", device, built)
        built = build_one(k.name, k.folder, k.manifest.build[device], k.config, device, store, box)
        return _row(k.name, device, built)

    def _row(name: str, device: str, built: Any) -> dict[str, Any]:
        return {
            "kernel": name, "device": device, "ok": built.ok, "seconds": round(built.seconds, 1),
            "cached": built.cached, "compiled": built.compiled, "log_tail": "" if built.ok else built.log_tail[-3000:],
        }  # fmt: skip

    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=len(jobs) or 1) as pool:
        rows = list(pool.map(one, jobs))
    wall = time.perf_counter() - started
    lines = ["| kernel | device | built | seconds | cached | compiled |", "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(
            f"| {r['kernel']} | {r['device']} | {'yes' if r['ok'] else '**no**'} | {r['seconds']} | "
            f"{'yes' if r['cached'] else 'no'} | {', '.join(r['compiled']) or '—'} |"
        )
    lines.append("")
    lines += [
        f"- {r['kernel']} ({r['device']}) did not build: `{first_error(r['log_tail'])}`" for r in rows if not r["ok"]
    ]
    lines.append(
        f"All {len(rows)} builds in parallel: {wall:.1f} s wall ({box.isolation.mode} sandbox, {os.cpu_count()} cores)."
    )
    failed = [f"{r['kernel']} ({r['device']}: {first_error(r['log_tail'], 120)})" for r in rows if not r["ok"]]
    reason = (
        f"did not build: {', '.join(failed)}"
        if failed
        else (
            "; ".join(f"{r['kernel']} cuda {r['seconds']:.0f} s" for r in rows if r["device"] == "cuda")
            + f"; {wall:.0f} s wall"
        )
    )
    write_step_json("failed" if failed else "passed", reason, {"builds": rows, "wall_s": round(wall, 1)}, lines)
    return 1 if failed else 0


def first_error(log: str, limit: int = 200) -> str:
    """The first line of a build log that names an error (else its last line), as one short line."""
    lines = [line for line in log.splitlines() if line.strip()]
    found = next((line for line in lines if "error" in line.lower() and not line.startswith("FAILED:")), None)
    return one_line(found or (lines[-1] if lines else "no output"), limit).replace("`", "'")


def _git(repo: Path, *args: str) -> str:
    ident = ("-c", "user.name=opgate gpu-check", "-c", "user.email=gpu-check@opgate.local")
    return subprocess.run(["git", "-C", str(repo), *ident, *args], check=True, capture_output=True, text=True).stdout


def scratch_repo(path: Path, kernels: list[str]) -> str:
    """A throwaway repository holding copies of `kernels`; returns its first commit."""
    shutil.rmtree(path, ignore_errors=True)
    path.mkdir(parents=True)
    _git(path, "init", "-q", "-b", "main")
    for name in kernels:
        shutil.copytree(KERNELS / name, path / "kernels" / name, ignore=shutil.ignore_patterns("__pycache__"))
    (path / "README.md").write_text("scratch repository of opgate's GPU check\n")
    _git(path, "add", "-A")
    _git(path, "commit", "-q", "-m", "base")
    return _git(path, "rev-parse", "HEAD").strip()


def review(repo: Path, base: str, out: Path, timeout: float) -> tuple[int, dict[str, Any] | None, str]:
    """`opgate review --offline` of base..HEAD; (exit code, report.json or None, last lines of its output)."""
    head = _git(repo, "rev-parse", "HEAD").strip()
    argv = [sys.executable, "-m", "bot", "review", "--repo", str(repo), "--base", base, "--head", head]
    argv += ["--offline", "--out", str(out)]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TAOTOKEN_", "GITHUB_"))}
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=timeout)
    except subprocess.TimeoutExpired:
        return 124, None, f"still running when the step's time ran out ({timeout:.0f} s)"
    (out / "review.log").parent.mkdir(parents=True, exist_ok=True)
    (out / "review.log").write_text(proc.stdout + proc.stderr)
    try:
        report = json.loads((out / "report.json").read_text())
    except (OSError, ValueError):
        report = None
    tail = one_line(" / ".join((proc.stdout + proc.stderr).strip().splitlines()[-3:]), 300)
    return proc.returncode, report, tail


def case_rows(report: dict[str, Any], kernel: str) -> list[dict[str, Any]]:
    found = next((k for k in report.get("kernels", []) if k["name"] == kernel), None)
    return [c for c in (found or {}).get("cases", []) if c.get("device") == "cuda"]


def _case_line(kernel: str, c: dict[str, Any]) -> str:
    ci = c.get("ci95_pct")
    span = f"[{ci[0]:+.2f}, {ci[1]:+.2f}]" if ci else "—"
    p50 = f"{c['p50_ms']:.4g}" if c.get("p50_ms") else "—"
    base = f"{c['base_p50_ms']:.4g}" if c.get("base_p50_ms") else "—"
    err = f"{c['max_abs_err']:.2g}" if c.get("max_abs_err") is not None else "—"
    reasons = one_line("; ".join(c.get("reasons", [])), 160).replace("|", "/") or "—"
    return f"| {kernel} | {c['name']} | {c['status']} | {c['verdict']} | {err} | {base} → {p50} | {span} | {reasons} |"


CASE_HEADER = [
    "| kernel | case | status | verdict | max abs err | p50 ms base → head | ratio CI % | reasons |",
    "|---|---|---|---|---|---|---|---|",
]


def _attach_nsight(out: Path) -> bool:
    """Put the ncu step's metrics (work/nsight.json) into this review's report.json and comment.md."""
    source = work() / "nsight.json"
    if not source.is_file() or not (out / "report.json").is_file():
        return False
    from bot.models.report import NsightMetrics, Report
    from bot.present.render import render_comment
    from bot.untrusted.nsight import attach

    metrics = {key: NsightMetrics.model_validate(v) for key, v in json.loads(source.read_text()).items()}
    report = attach(Report.model_validate_json((out / "report.json").read_text()), metrics)
    (out / "report.json").write_text(report.to_json())
    (out / "comment.md").write_text(render_comment(report))
    return True


def review_all() -> int:
    names = sorted(m.parent.name for m in KERNELS.glob("*/kernel.toml"))
    lines, problems, details = list(CASE_HEADER), [], {}
    for i, name in enumerate(names):
        if seconds_left() < 60:
            problems.append(f"{name}: not reviewed, out of time")
            continue
        share = (seconds_left() - 5) / (len(names) - i)  # each kernel left gets an equal part of the time
        repo = work() / "scratch" / f"aa-{name}"
        base = scratch_repo(repo, [name])
        manifest = tomllib.loads((KERNELS / name / "kernel.toml").read_text())
        for source in manifest["build"]["cuda"]["sources"]:
            if source.endswith(".cu"):
                path = repo / "kernels" / name / source
                path.write_text("// A/A on the GPU: a comment, no behaviour change\n" + path.read_text())
        _git(repo, "commit", "-qam", "comment only")
        out = work() / f"review-{name}"
        code, report, tail = review(repo, base, out, max(30.0, share))
        nsight = _attach_nsight(out)
        rows = case_rows(report, name) if report else []
        details[name] = {"exit": code, "verdict": report and report["verdict"], "cuda_cases": rows, "nsight": nsight}
        lines += [_case_line(name, c) for c in rows]
        bad = [c for c in rows if c["status"] != "ok" or c["verdict"] not in ("pass", "inconclusive")]
        if code != 0 or not rows or bad:
            why = f" ({'; '.join(bad[0]['reasons'])[:150]})" if bad and bad[0]["reasons"] else ""
            listed = ", ".join(f"{c['name']} {c['status']}/{c['verdict']}" for c in bad)
            what = f"cases {listed}{why}" if bad else ("no cuda case ran" if not rows else f"exit {code}")
            problems.append(f"{name}: {what} ({tail})" if code not in (0, 1) or not rows else f"{name}: {what}")
    lines.append("")
    lines.append(
        "Measurement for these reviews: "
        + ", ".join(
            f"{k}={v}" for k, v in os.environ.items() if k.startswith("OPGATE_MEASURE_") or k == "OPGATE_CASE_TIMEOUT_S"
        )
    )
    reason = "; ".join(problems) if problems else f"{len(names)} kernels: every cuda case ok, every verdict pass"
    write_step_json("failed" if problems else "passed", reason, details, lines)
    return 1 if problems else 0


def example() -> int:
    patches = sorted((ROOT / "examples" / "changes").glob("*.patch"))
    if not patches:
        write_step_json("skipped", "no patch in examples/changes/")
        return 0
    names = sorted(m.parent.name for m in KERNELS.glob("*/kernel.toml"))
    lines, problems, details = list(CASE_HEADER), [], {}
    for patch in patches:
        repo = work() / "scratch" / f"example-{patch.stem}"
        base = scratch_repo(repo, names)
        _git(repo, "apply", str(patch))
        _git(repo, "commit", "-qam", f"example: {patch.name}")
        out = work() / f"example-{patch.stem}"
        code, report, tail = review(repo, base, out, max(30.0, seconds_left() - 5))
        if report is None:
            problems.append(f"{patch.name}: no report (exit {code}: {tail})")
            continue
        changed = [k["name"] for k in report["kernels"] if k["changed"]]
        rows = {k: case_rows(report, k) for k in changed}
        details[patch.name] = {"exit": code, "verdict": report["verdict"], "cuda_cases": rows}
        lines += [_case_line(k, c) for k in changed for c in rows[k]]
        broken = [c for k in changed for c in rows[k] if c["status"] not in ("ok", "incorrect")]
        if code not in (0, 1) or broken or not any(rows.values()):
            listed = ", ".join(c["name"] for c in broken) or "no cuda case"
            why = f" ({'; '.join(broken[0]['reasons'])[:150]})" if broken and broken[0]["reasons"] else ""
            problems.append(f"{patch.name}: exit {code}, cases not judged{why}: {listed}")
        else:
            details[patch.name]["summary"] = f"{patch.name}: verdict {report['verdict']} (exit {code})"
    ran = "; ".join(d.get("summary", "") for d in details.values() if d.get("summary"))
    write_step_json("failed" if problems else "passed", "; ".join(problems) or ran, details, lines)
    return 1 if problems else 0


def pytest_gpu() -> int:
    files = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tests").glob("test_*.py") if "mark.gpu" in p.read_text())
    junit = work() / "pytest-gpu.xml"
    argv = [sys.executable, "-m", "pytest", "-m", "gpu", "-q", "-rs", "-p", "no:cacheprovider"]
    argv += [f"--junitxml={junit}", *files]
    print("$ " + " ".join(argv), flush=True)
    code = subprocess.call(argv, cwd=ROOT)
    try:
        suite = ET.parse(junit).getroot()
    except (OSError, ET.ParseError):
        write_step_json("failed", f"pytest exited {code} and wrote no report")
        return 1
    cases = suite.findall(".//testcase")
    failed = [c for c in cases if c.find("failure") is not None or c.find("error") is not None]
    skipped = [c for c in cases if c.find("skipped") is not None]
    passed = len(cases) - len(failed) - len(skipped)
    counts = f"{passed} passed, {len(failed)} failed, {len(skipped)} skipped"
    lines = [f"`{' '.join(argv[2:])}`: {counts}", ""]
    for c in failed:
        node = c.find("failure") if c.find("failure") is not None else c.find("error")
        message = node.get("message", "") if node is not None else ""
        lines.append(f"- {c.get('name')}: {one_line(message, 300)}")
    if failed or code not in (0, 5):
        write_step_json("failed", f"{counts}: {', '.join(str(c.get('name')) for c in failed)}", {"files": files}, lines)
        return 1
    if not passed:
        why = skipped[0].find("skipped") if skipped else None
        write_step_json(
            "skipped", f"every gpu test skipped: {why.get('message', '') if why is not None else 'none collected'}"
        )
        return 0
    write_step_json("passed", counts, {"files": files}, lines)
    return 0


TASKS = {"sandbox": sandbox, "build": build, "review": review_all, "example": example, "pytest": pytest_gpu}

if __name__ == "__main__":
    if len(sys.argv) != 2 or sys.argv[1] not in TASKS:
        print(f"usage: python -m scripts.gpucheck.gpu_tasks {'|'.join(TASKS)}", file=sys.stderr)
        sys.exit(2)
    sys.exit(TASKS[sys.argv[1]]())
