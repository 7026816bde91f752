"""`opgate lint` across files (bot/lint/across.py): a base URL that differs between clients, a key variable two domains
share."""

from __future__ import annotations

from bot.lint import (
    SourceFile,
    lint_files,
)
from tests.lint_texts import BOOK, CLAUDE_OK, CODEX_OK, codex, one, task_text


def test_xfile_stale_anthropic_base_url() -> None:
    stale = CLAUDE_OK.replace("https://taotoken.net/api", "https://old-gateway.example.net/api")
    files = [
        SourceFile("kernels/a/agent_task.json", task_text(), "task", "deepgemm"),
        SourceFile("codex/config.toml", CODEX_OK, "codex"),
        SourceFile(".claude/settings.json", stale, "claude"),
    ]
    findings = lint_files(files, BOOK)
    f = one(findings, "XFILE001")
    assert (f.path, f.line) == (".claude/settings.json", 3)
    assert "ANTHROPIC_BASE_URL" in f.message
    assert "old-gateway.example.net" in f.message and "https://taotoken.net/api" in f.message


def test_xfile_codex_v1_suffix_is_not_a_difference() -> None:
    files = [
        SourceFile("t.json", task_text(), "task", "deepgemm"),
        SourceFile("config.toml", CODEX_OK, "codex"),
        SourceFile("settings.json", CLAUDE_OK, "claude"),
        SourceFile(".env.example", "TAOTOKEN_BASE_URL=https://taotoken.net/api/\n", "env"),
    ]
    assert lint_files(files, BOOK) == []


def test_xfile_two_domains_share_a_variable() -> None:
    files = [
        SourceFile("kernels/a/agent_task.json", task_text(), "task", "deepgemm"),
        SourceFile("kernels/b/agent_task.json", task_text(), "task", "flashmla"),
    ]
    findings = [f for f in lint_files(files, BOOK) if f.rule == "XFILE002"]
    assert [(f.path, f.line) for f in findings] == [("kernels/a/agent_task.json", 5), ("kernels/b/agent_task.json", 5)]
    assert all("TAOTOKEN_API_KEY_DEEPGEMM_AGENT" in f.message and "provider.api_key_env" in f.message for f in findings)


def test_xfile_codex_shares_a_domain_variable() -> None:
    files = [
        SourceFile("kernels/a/agent_task.json", task_text(), "task", "deepgemm"),
        SourceFile("config.toml", codex(TAOTOKEN_CODEX_API_KEY="TAOTOKEN_API_KEY_DEEPGEMM_AGENT"), "codex"),
    ]
    findings = [f for f in lint_files(files, BOOK) if f.rule == "XFILE002"]
    codex_hit = next(f for f in findings if f.path == "config.toml")
    assert codex_hit.line == 7 and "model_providers.taotoken.env_key" in codex_hit.message
    assert "Codex" in codex_hit.message and "domain deepgemm" in codex_hit.message


def test_xfile_same_domain_may_share_its_variable() -> None:
    files = [
        SourceFile("kernels/a/agent_task.json", task_text(), "task", "deepgemm"),
        SourceFile("kernels/b/agent_task.json", task_text(), "task", "deepgemm"),
    ]
    assert lint_files(files, BOOK) == []
