"""Texts and helpers the lint tests share: planted keys, good files of each kind, and finding pickers."""

from __future__ import annotations

from pathlib import Path

from bot.lint import (
    KeyBook,
    LintFinding,
)
from tests.conftest import REPO_CONFIG

ROOT = Path(__file__).resolve().parent.parent
# Planted secrets: none may ever appear in any output, whole or beyond its first three characters.
CANARY = "sk-ant-api03-Zq8vK2mR7xW4nP9tL3bY6cH1dF5gJ0sA"
CANARY_TT = "tt-9fQ2xL7kM4pR8vW3nZ6bT1yH5"
CANARY_HEX = "3f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c"
BOOK = KeyBook.of(REPO_CONFIG)  # this repository's domains and key variables


def one(findings: list[LintFinding], rule: str) -> LintFinding:
    hits = [f for f in findings if f.rule == rule]
    assert len(hits) == 1, f"expected one {rule}, got {[f.model_dump() for f in findings]}"
    return hits[0]


def rules(findings: list[LintFinding]) -> set[str]:
    return {f.rule for f in findings}


def task_text(
    *,
    base_url: str = "https://taotoken.net/api",
    api_key_env: str = "TAOTOKEN_API_KEY_DEEPGEMM_AGENT",
    model: str = "deepseek-v4",
    deny: str = '["direct_production_db_access", "remote_shell_execution", "secret_exfiltration"]',
    extra: str = "",
) -> str:
    return "\n".join(
        [
            "{",  # 1
            '  "task_id": "deepgemm_tile_acceptance_001",',  # 2
            '  "provider": {',  # 3
            f'    "base_url": "{base_url}",',  # 4
            f'    "api_key_env": "{api_key_env}"',  # 5
            "  },",  # 6
            f'  "model": "{model}",',  # 7
            '  "target": {"kernel": "deepgemm_tile", "stage": "gemm"},',  # 8
            '  "constraints": {"correctness": "max_abs_err <= 1e-2"},',  # 9
            '  "acceptance_outputs": ["candidate_patch", "risk_notes"],',  # 10
            f"{extra}"  # 11 when given (ends with a comma)
            f'  "deny": {deny}',  # 11 or 12
            "}",
            "",
        ]
    )


CLAUDE_OK = """{
  "env": {
    "ANTHROPIC_BASE_URL": "https://taotoken.net/api",
    "ANTHROPIC_AUTH_TOKEN": "YOUR_TAOTOKEN_API_KEY",
    "ANTHROPIC_MODEL": "YOUR_MODEL_ID"
  }
}
"""
CODEX_OK = """model = "YOUR_MODEL_ID"
model_provider = "taotoken"

[model_providers.taotoken]
name = "TaoToken"
base_url = "https://taotoken.net/api/v1"
env_key = "TAOTOKEN_CODEX_API_KEY"
wire_api = "responses"
"""


def codex(**replace: str) -> str:
    text = CODEX_OK
    for old, new in replace.items():
        text = text.replace(old, new)
    return text
