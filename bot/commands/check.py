"""`opgate check [KERNEL…]`: in seconds, nothing timed, is each kernel of the working tree ready for a review?"""

from __future__ import annotations

import argparse
import json
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
    from bot.review.check import KernelCheck


def register(commands: Commands) -> None:
    p = commands.add(
        "check",
        help="validate, build and run each kernel's smallest case once, in seconds (nothing timed)",
        description="For each kernel of the working tree (or each KERNEL named): validate its kernel.toml (as "
        "opgate lint does) and the files it names, check its tunables and flags, build it (cached), import its "
        "reference in the sandbox, draw every case's inputs, run the reference and the entry once on the smallest "
        "case and compare. The first problem of a kernel is named with its file and line. Exit 1 on a problem.",
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
    from bot.review.flow import missing_runner  # the runner's half: only when something is built

    if missing := missing_runner():
        raise InputError(f"opgate check builds and runs kernels, which needs {missing}: pip install 'opgate[runner]'")
    from bot.review.check import Checker, KernelCheck

    checker = Checker(settings)
    book = lint.KeyBook.of(config)
    results: list[KernelCheck] = []
    for name in names:
        folder = found[name]
        manifest = root / folder / MANIFEST_NAME
        result = KernelCheck(name=name, folder=folder)
        errors = [f for f in lint.check_manifest(str(manifest), manifest.read_text(), book)[0] if f.severity == "error"]
        if errors:
            result.problem = f"{folder}/{MANIFEST_NAME} line {errors[0].line or 1}: {errors[0].message}"
        else:
            try:
                kernel = load_kernel(root / folder, config=config, path=folder)
            except InputError as exc:
                result.problem = str(exc).replace(f"{root}/", "")
            else:
                result = checker.check(kernel)
        results.append(result)
    _print(results, checker.unisolated, time.perf_counter() - started, args)
    return 0 if all(r.ok for r in results) else 1


def _print(results: list[KernelCheck], unisolated: str | None, seconds: float, args: argparse.Namespace) -> None:
    if args.json:
        print(json.dumps({"kernels": [vars(r) | {"ok": r.ok} for r in results], "seconds": round(seconds, 2)}))
        return
    for r in results:
        print(f"opgate check: {r.name} ({r.folder})")
        for step in r.steps:
            print(f"  ok  {one_line(step, limit=400)}")
        for skipped in r.skipped:
            print(f"  --  {one_line(skipped, limit=400)}")
        if r.problem is not None:
            print(f"  ✗   {one_line(r.problem, limit=2000)}")
    if unisolated:
        print(f"opgate check: not sandboxed here ({one_line(unisolated, limit=400)})")
    bad = [r for r in results if not r.ok]
    if bad:
        count = f"{len(bad)} of {len(results)} kernel(s)"
        print(f"opgate check: {count} with a problem ({seconds:.1f} s): fix it and check again")
    else:
        print(f"opgate check: {len(results)} kernel(s) ready ({seconds:.1f} s); next: opgate review")
