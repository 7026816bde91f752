"""`opgate lint` as a whole (bot/lint/): the examples and the repository's defaults pass, clean texts of each kind
pass, and a planted key never reaches any output. The rules of each file kind are tested in
tests/test_lint_<module>.py."""

from __future__ import annotations

import json
from pathlib import Path

from bot.lint import (
    default_paths,
    exit_code,
    format_json,
    format_text,
    lint_claude,
    lint_codex,
    lint_env,
    lint_paths,
    lint_task,
)
from tests.lint_texts import CANARY, CLAUDE_OK, CODEX_OK, ROOT, codex, task_text


def test_examples_pass_with_zero_findings() -> None:
    examples = ROOT / "examples"
    assert (examples / "claude" / "settings.json").is_file()
    assert (examples / "codex" / "config.toml").is_file()
    assert lint_paths([examples]) == []


def test_repository_defaults_have_no_errors_or_warnings() -> None:
    paths = default_paths(ROOT)
    assert ROOT / "examples" in paths
    assert any(p.name == "agent_task.json" for p in paths)
    findings = lint_paths(paths)
    assert [f for f in findings if f.severity != "info"] == []
    assert exit_code(findings) == 0


def test_clean_texts_of_each_kind_pass() -> None:
    assert lint_task("agent_task.json", task_text()) == []
    assert lint_claude(".claude/settings.json", CLAUDE_OK) == []
    assert lint_codex("config.toml", CODEX_OK) == []
    env = "TAOTOKEN_BASE_URL=https://taotoken.net/api\nTAOTOKEN_API_KEY_DEEPGEMM_AGENT=YOUR_KEY\n"
    assert lint_env(".env.example", env) == []


def test_canary_never_appears_in_any_output(tmp_path: Path) -> None:
    """Every place a key can be planted; text and JSON output, messages scanned for any fragment."""
    planted = {
        ".env": f"TAOTOKEN_API_KEY_DEEPGEMM_AGENT={CANARY}\nNOTES='Bearer {CANARY}'\n{CANARY}\n"
        f"TAOTOKEN_BASE_URL=https://u:{CANARY}@taotoken.net/api?key={CANARY}\n",
        "agent_task.json": task_text(
            api_key_env=CANARY, base_url=f"https://taotoken.net/{CANARY}/api?k={CANARY}", extra=f'  "x": "{CANARY}",\n'
        ),
        "claude/settings.json": CLAUDE_OK.replace("YOUR_TAOTOKEN_API_KEY", CANARY).replace(
            '"ANTHROPIC_MODEL"', f'"ANTHROPIC_API_KEY": "{CANARY}",\n    "TAOTOKEN_CODEX_API_KEY": "{CANARY}",\n    "X"'
        ),
        "codex/config.toml": codex(TAOTOKEN_CODEX_API_KEY=CANARY, taotoken=CANARY)
        + f'experimental_bearer_token = "{CANARY}"\nhttp_headers = {{ Authorization = "Bearer {CANARY}" }}\n'
        + f'query_params = {{ key = "{CANARY}" }}\n',
        "broken/agent_task.json": f'{{"provider": {{"api_key_env": {json.dumps(CANARY)}}}, "deny": 3}}',
    }
    for rel, text in planted.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    findings = lint_paths([tmp_path, tmp_path / ".env"])
    assert len(findings) > 15
    output = format_text(findings) + format_json(findings) + repr(findings)
    for i in range(3, len(CANARY) - 8):
        assert CANARY[i : i + 8] not in output, f"a fragment of the key leaked: {CANARY[i : i + 8]!r}"
