"""`opgate lint`: check .env files, agent task files, Claude Code and Codex configs."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from bot import lint


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "lint",
        help="check .env, agent task, Claude Code and Codex configs",
        description="Static checks of gateway configuration and key governance (rules: see the README).",
    )
    p.add_argument(
        "paths",
        nargs="*",
        type=Path,
        help="files or folders (default: .env.example, kernels/*/agent_task.json, examples/)",
    )
    p.add_argument("--format", choices=("text", "json"), default="text", help="output format (default: text)")
    p.add_argument("--repo", type=Path, default=Path("."), help="repository root for the default paths")


def run(args: argparse.Namespace) -> int:
    """Runs without Settings: the linter must work when the environment itself is misconfigured."""
    findings = lint.lint_paths(args.paths or lint.default_paths(args.repo))
    if args.format == "json":
        print(lint.format_json(findings))
    else:
        if findings:
            print(lint.format_text(findings))
        print(lint.format_summary(findings), file=sys.stderr)
    return lint.exit_code(findings)
