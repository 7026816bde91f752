"""`opgate lint`: check .env files, agent task files, Claude Code and Codex configs, and CC Switch's sync."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from bot import lint
from bot.commands import Commands
from bot.config.repo import RepoConfig, load_config
from bot.errors import InputError


def register(commands: Commands) -> None:
    p = commands.add(
        "lint",
        help="check .env, agent task, Claude Code and Codex configs, and CC Switch's sync",
        description="Static checks of gateway configuration and key governance (rules: docs/lint.md).",
    )
    p.add_argument(
        "paths",
        nargs="*",
        type=Path,
        help="files or folders (default: the opgate configuration, .env.example, each kernel's kernel.toml and "
        "agent_task.json, examples/)",
    )
    p.add_argument(
        "--format",
        choices=("text", "json"),
        default="text",
        help="deprecated: --format json is --json, as on every other command (text: the default)",
    )
    p.add_argument("--repo", type=Path, default=Path("."), help="repository root for the default paths")
    p.add_argument("--strict", action="store_true", help="exit 1 on warnings too (default: on errors only)")
    cc = p.add_argument_group("CC Switch (read-only)")
    cc.add_argument(
        "--cc-switch",
        nargs="?",
        type=Path,
        const=Path("~/.cc-switch"),
        metavar="DIR",
        help="also check CC Switch's store in DIR (default ~/.cc-switch) against the live client files",
    )
    cc.add_argument("--claude-settings", type=Path, metavar="FILE", help="live ~/.claude/settings.json")
    cc.add_argument("--codex-config", type=Path, metavar="FILE", help="live ~/.codex/config.toml")
    cc.add_argument("--codex-auth", type=Path, metavar="FILE", help="live ~/.codex/auth.json")


def run(args: argparse.Namespace) -> int:
    """Runs without Settings: the linter must work when the environment itself is misconfigured."""
    names = ("claude_settings", "codex_config", "codex_auth")
    live_flags = ["--" + n.replace("_", "-") for n in names if getattr(args, n)]
    if live_flags and args.cc_switch is None:
        raise InputError(f"{', '.join(live_flags)} needs --cc-switch")
    try:
        config = load_config(args.repo)
    except InputError:
        config = RepoConfig(root=args.repo)  # the configuration file itself is linted below (CONF001 says why)
    book = lint.KeyBook.of(config)
    root = args.repo if config.root == args.repo.resolve() else config.root  # relative paths stay relative
    problems, files = lint.read_sources(args.paths or lint.default_paths(root, config))
    snapshot = None
    if args.cc_switch is not None:
        snapshot = lint.read_snapshot(args.cc_switch, args.claude_settings, args.codex_config, args.codex_auth)
        live = lint.live_sources(snapshot)  # linted as files CC Switch writes, also when named as PATHs
        written = {Path(f.path).resolve() for f in live}
        files = [f for f in files if Path(f.path).resolve() not in written] + live
    findings = lint.lint_files(files, book)
    if snapshot is not None:
        gateway = os.environ.get("TAOTOKEN_BASE_URL", "").strip() or lint.DEFAULT_GATEWAY
        findings = lint.ordered(findings + lint.lint_ccswitch(snapshot, os.environ, gateway))
    findings = problems + findings
    if args.format == "json":
        print("opgate: warning: --format json is deprecated; use --json", file=sys.stderr)
    if args.format == "json" or args.json:
        print(lint.format_json(findings))
    else:
        if findings:
            print(lint.format_text(findings))
        print(lint.format_summary(findings), file=sys.stderr)
    return lint.exit_code(findings, ("error", "warning") if args.strict else ("error",))
