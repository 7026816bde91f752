"""`opgate check [KERNEL…]`: in seconds, nothing timed, is each kernel of the working tree ready for a review?"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import TYPE_CHECKING

from bot import lint
from bot.commands import Commands
from bot.config.manifest import MANIFEST_NAME, find_manifests, load_kernel
from bot.config.settings import Settings
from bot.errors import InputError
from bot.text.safe import one_line

if TYPE_CHECKING:
    from bot.review.check import CheckReport


def register(commands: Commands) -> None:
    p = commands.add(
        "check",
        help="validate, compile, build and run each kernel's smallest case once, in seconds (nothing timed)",
        description="For each kernel of the working tree (or each KERNEL named), one line per step: validate its "
        "kernel.toml (as opgate lint does) and the files it names, check its tunables and flags, run the review's "
        "compile-only resource step for every architecture it ships (each kernel function's [launch] figures), build "
        "it (cached), import its reference in the sandbox, draw every case's inputs, run the reference and the entry "
        "once on the smallest case and compare (the reference alone where no case can run here). A step this runner "
        "cannot do (no nvcc, no GPU) says 'not checked on this runner'; 'ready' only when every step ran. A failed "
        "step names its file and line. Exit 1 on a failed step.",
    )
    p.add_argument("kernels", nargs="*", metavar="KERNEL", help="kernel names (default: every kernel)")
    p.add_argument("--repo", type=Path, default=Path("."), help="the repository (default: .)")


def run(args: argparse.Namespace, settings: Settings) -> int:
    started = time.perf_counter()
    config = settings.repo_config
    root = config.root if config.source != "built-in defaults" else args.repo.resolve()
    found = find_manifests(root, config.manifests)
    if not found:
        raise InputError(
            f"no kernel manifest: {', '.join(config.manifests)} match no kernel.toml under {root} "
            "(opgate init writes one)"
        )
    if unknown := [k for k in args.kernels if k not in found]:
        raise InputError(f"no kernel {', '.join(unknown)} (have: {', '.join(sorted(found))})")
    names = args.kernels or sorted(found)
    from bot.review.host import missing_runner  # the runner's half: only when something is built

    if missing := missing_runner():
        raise InputError(f"opgate check builds and runs kernels, which needs {missing}: pip install 'opgate[runner]'")
    from bot.review.check import Checker, CheckReport, KernelCheck

    checker = Checker(settings)
    book = lint.KeyBook.of(config)
    results: list[KernelCheck] = []
    for name in names:
        folder = found[name]
        manifest = root / folder / MANIFEST_NAME
        result = KernelCheck(name=name, folder=folder)
        errors = [f for f in lint.check_manifest(str(manifest), manifest.read_text(), book)[0] if f.severity == "error"]
        if errors:
            result.failed("manifest", f"{folder}/{MANIFEST_NAME} line {errors[0].line or 1}: {errors[0].message}")
        else:
            try:
                kernel = load_kernel(root / folder, config=config, path=folder)
            except InputError as exc:
                result.failed("manifest", str(exc).replace(f"{root}/", ""))
            else:
                result = checker.check(kernel)
        results.append(result)
    report = CheckReport(
        kernels=results, seconds=round(time.perf_counter() - started, 2), unsandboxed=checker.unisolated
    )
    _print(report, args)
    return 0 if all(r.ok for r in results) else 1


_MARKS = {"ok": "ok ", "failed": "✗  ", "not_checked": "-- ", "incomplete": "-- ", "note": "·  "}


def _print(report: CheckReport, args: argparse.Namespace) -> None:
    if args.json:
        print(report.model_dump_json())
        return
    from bot.review.check import NOT_CHECKED

    for r in report.kernels:
        print(f"opgate check: {r.name} ({r.folder})")
        for step in r.steps:
            prefix = {"not_checked": f"{NOT_CHECKED}: ", "incomplete": "not checked: "}.get(step.status, "")
            text = prefix + step.detail
            print(f"  {_MARKS[step.status]} {one_line(text, limit=2000 if step.status == 'failed' else 400)}")
    if report.unsandboxed:
        print(f"opgate check: not sandboxed here ({one_line(report.unsandboxed, limit=400)})")
    seconds, total = report.seconds, len(report.kernels)
    bad = [r for r in report.kernels if not r.ok]
    open_steps = sum(len(r.not_checked) for r in report.kernels)
    if bad:
        count = f"{len(bad)} of {total} kernel(s)"
        print(f"opgate check: {count} with a problem ({seconds:.1f} s): fix it and check again")
    elif open_steps:
        print(
            f"opgate check: {total} kernel(s) without a problem in what was checked, {open_steps} step(s) not "
            f"checked ({seconds:.1f} s): not ready — each '--' line above names what it needs"
        )
    else:
        print(f"opgate check: {total} kernel(s) ready ({seconds:.1f} s); next: opgate review")
