"""`opgate lint`: static checks of the files that point agents at the LLM gateway."""

# Each kind of file is checked by a pure function over its text (env, task, claude, codex), then the
# files are compared (across): one gateway base URL everywhere, one key variable per task domain and
# per client. With `--cc-switch`, CC Switch's store is read too (ccread), its entries linted and the live
# client files and keys compared with it (ccswitch, ccsync). Every finding carries the real line of the
# offending key (1 when unknown, None in a database row) and never the secret itself: a value that looks
# like a key is shown as its first three characters and `…`, a CC Switch key only by its fingerprint.

from __future__ import annotations

from bot.lint.across import lint_across
from bot.lint.ccmodel import ClientView, LiveFile, Provider, Snapshot, Store, fingerprint
from bot.lint.ccread import live_sources, read_snapshot, read_store
from bot.lint.ccswitch import DEFAULT_GATEWAY, lint_ccswitch
from bot.lint.claude import CLAUDE_TOKEN_VARS, lint_claude
from bot.lint.codex import CODEX_BUILTIN_PROVIDERS, CODEX_KEY, lint_codex
from bot.lint.collect import Facts, KeyUse, UrlUse
from bot.lint.env import lint_env
from bot.lint.findings import RULES, SEVERITIES, Kind, LintFinding, Rule, Severity, rules_markdown
from bot.lint.kernel import check_config, check_manifest
from bot.lint.locate import KeyPath, json_key_lines, toml_key_lines
from bot.lint.output import counts, exit_code, format_json, format_summary, format_text, ordered
from bot.lint.paths import SourceFile, default_paths, detect_kind, lint_files, lint_paths, read_sources
from bot.lint.secrets import (
    KEY_PREFIX,
    KeyBook,
    find_keys,
    is_domain_key,
    is_placeholder,
    is_secret_name,
    looks_like_key,
    mask,
    redact,
)
from bot.lint.task import MODEL_PLACEHOLDER, infer_domain, lint_task
from bot.lint.urls import UrlFlavor, gateway_root, show_url

__all__ = [
    "CLAUDE_TOKEN_VARS",
    "CODEX_BUILTIN_PROVIDERS",
    "CODEX_KEY",
    "DEFAULT_GATEWAY",
    "KEY_PREFIX",
    "MODEL_PLACEHOLDER",
    "RULES",
    "SEVERITIES",
    "ClientView",
    "Facts",
    "KeyBook",
    "KeyPath",
    "KeyUse",
    "Kind",
    "LintFinding",
    "LiveFile",
    "Provider",
    "Rule",
    "Severity",
    "Snapshot",
    "SourceFile",
    "Store",
    "UrlFlavor",
    "UrlUse",
    "check_config",
    "check_manifest",
    "counts",
    "default_paths",
    "detect_kind",
    "exit_code",
    "find_keys",
    "fingerprint",
    "format_json",
    "format_summary",
    "format_text",
    "gateway_root",
    "infer_domain",
    "is_domain_key",
    "is_placeholder",
    "is_secret_name",
    "json_key_lines",
    "lint_across",
    "lint_ccswitch",
    "lint_claude",
    "lint_codex",
    "lint_env",
    "lint_files",
    "lint_paths",
    "lint_task",
    "live_sources",
    "looks_like_key",
    "mask",
    "ordered",
    "read_snapshot",
    "read_sources",
    "read_store",
    "redact",
    "rules_markdown",
    "show_url",
    "toml_key_lines",
]
