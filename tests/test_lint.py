"""`opgate lint`: one test per mistake (rule id, line, the offending key named), the examples pass,
JSON output parses, and a planted key never reaches any output."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bot.lint import (
    RULES,
    Finding,
    KeyBook,
    SourceFile,
    default_paths,
    detect_kind,
    exit_code,
    find_keys,
    format_json,
    format_summary,
    format_text,
    is_placeholder,
    lint_claude,
    lint_codex,
    lint_env,
    lint_files,
    lint_paths,
    lint_task,
    looks_like_key,
    mask,
    rules_markdown,
)
from tests.conftest import REPO_CONFIG

ROOT = Path(__file__).resolve().parent.parent

# Planted secrets: none may ever appear in any output, whole or beyond its first three characters.
CANARY = "sk-ant-api03-Zq8vK2mR7xW4nP9tL3bY6cH1dF5gJ0sA"
CANARY_TT = "tt-9fQ2xL7kM4pR8vW3nZ6bT1yH5"
CANARY_HEX = "3f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c"
BOOK = KeyBook.of(REPO_CONFIG)  # this repository's domains and key variables


def one(findings: list[Finding], rule: str) -> Finding:
    hits = [f for f in findings if f.rule == rule]
    assert len(hits) == 1, f"expected one {rule}, got {[f.model_dump() for f in findings]}"
    return hits[0]


def rules(findings: list[Finding]) -> set[str]:
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


# --- the good files -----------------------------------------------------------------------------


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


# --- .env ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value", [CANARY, CANARY_TT, CANARY_HEX, "sk-proj-" + "a1B2c3D4e5F6g7H8i9J0", "abcd1234efgh5678"]
)
def test_env_real_key_is_an_error(value: str) -> None:
    text = f"# keys\nTAOTOKEN_BASE_URL=https://taotoken.net/api\nTAOTOKEN_API_KEY_FLASHMLA_AGENT={value}\n"
    f = one(lint_env(".env.example", text), "ENV001")
    assert (f.line, f.severity) == (3, "error")
    assert "TAOTOKEN_API_KEY_FLASHMLA_AGENT" in f.message
    assert value not in f.message and mask(value) in f.message


def test_env_key_in_a_variable_with_an_innocent_name_is_an_error() -> None:
    f = one(lint_env(".env", f"OPGATE_BUILD_DIR=/tmp/x\nNOTES={CANARY}\n"), "ENV001")
    assert f.line == 2 and "NOTES" in f.message


@pytest.mark.parametrize(
    "value",
    ["", "YOUR_TAOTOKEN_API_KEY", "<your key>", "changeme", "xxxxxxxxxxxxxxxxxxxxxxxx", "sk-xxxxxxxx", "${KEY}"],
)
def test_env_placeholders_pass(value: str) -> None:
    assert lint_env(".env.example", f"TAOTOKEN_API_KEY_DEEPGEMM_AGENT={value}\n") == []


def test_env_short_non_placeholder_secret_is_a_warning() -> None:
    f = one(lint_env(".env.example", "OPGATE_AGENT_TIMEOUT_S=120\nANTHROPIC_AUTH_TOKEN=abc\n"), "ENV002")
    assert (f.line, f.severity) == (2, "warning") and "ANTHROPIC_AUTH_TOKEN" in f.message


def test_env_duplicate_assignment() -> None:
    text = "TAOTOKEN_API_KEY_CI_SUMMARY=\nOPGATE_BUILD_DIR=/x\nTAOTOKEN_API_KEY_CI_SUMMARY=YOUR_KEY\n"
    f = one(lint_env(".env.example", text), "ENV003")
    assert f.line == 3 and "TAOTOKEN_API_KEY_CI_SUMMARY" in f.message and "line 1" in f.message


def test_env_bare_key_line_and_malformed_line() -> None:
    findings = lint_env(".env", f"A=1\n{CANARY}\nthis is not an assignment\n")
    assert one(findings, "ENV001").line == 2
    assert one(findings, "ENV004").line == 3
    assert CANARY[3:] not in format_text(findings)


def test_env_base_url_with_tracking_parameters() -> None:
    text = "# gateway\nTAOTOKEN_BASE_URL=https://taotoken.net/api?utm_source=chat\n"
    f = one(lint_env(".env.example", text), "URL001")
    assert (f.line, f.severity) == (2, "error") and "TAOTOKEN_BASE_URL" in f.message and "utm_source" in f.message


def test_env_anthropic_base_url_with_v1_suffix() -> None:
    f = one(lint_env(".env.example", "ANTHROPIC_BASE_URL=https://taotoken.net/api/v1\n"), "URL005")
    assert f.line == 1 and "ANTHROPIC_BASE_URL" in f.message


def test_env_placeholder_base_url_is_not_judged() -> None:
    assert lint_env(".env.example", "ANTHROPIC_BASE_URL=YOUR_BASE_URL\nTAOTOKEN_BASE_URL=\n") == []


# --- agent_task.json ----------------------------------------------------------------------------


def test_task_not_json() -> None:
    f = one(lint_task("agent_task.json", '{\n  "task_id": "x",\n  "provider": \n}\n'), "TASK001")
    assert f.line == 4


def test_task_schema_extra_field() -> None:
    text = task_text(extra='  "api_key": "YOUR_KEY",\n')
    f = one(lint_task("agent_task.json", text), "TASK001")
    assert f.line == 11 and "api_key" in f.message


def test_task_schema_missing_field_points_at_its_parent() -> None:
    text = task_text().replace('    "base_url": "https://taotoken.net/api",\n', "")
    f = one(lint_task("agent_task.json", text), "TASK001")
    assert f.line == 3 and "provider.base_url" in f.message


def test_task_base_url_with_query_string() -> None:
    f = one(lint_task("t.json", task_text(base_url="https://taotoken.net/api?region=cn")), "URL001")
    assert f.line == 4 and "provider.base_url" in f.message


def test_task_base_url_with_utm_parameters() -> None:
    f = one(lint_task("t.json", task_text(base_url="https://taotoken.net/api?utm_campaign=x")), "URL001")
    assert f.line == 4 and "provider.base_url" in f.message and "utm_campaign" in f.message


def test_task_base_url_is_the_chat_endpoint() -> None:
    url = "https://taotoken.net/api/v1/chat/completions"
    f = one(lint_task("t.json", task_text(base_url=url)), "URL004")
    assert f.line == 4 and "provider.base_url" in f.message and "/chat/completions" in f.message


def test_task_base_url_with_credentials_is_masked() -> None:
    findings = lint_task("t.json", task_text(base_url=f"https://user:{CANARY}@taotoken.net/api"))
    f = one(findings, "URL003")
    assert f.line == 4 and "provider.base_url" in f.message
    assert CANARY[3:] not in format_text(findings) + format_json(findings)


@pytest.mark.parametrize("url", ["taotoken.net/api", "ftp://taotoken.net/api", "https://taotoken.net:99999/api", ""])
def test_task_base_url_not_an_http_url(url: str) -> None:
    f = one(lint_task("t.json", task_text(base_url=url)), "URL002")
    assert f.line == 4 and "provider.base_url" in f.message


def test_task_base_url_plain_http() -> None:
    f = one(lint_task("t.json", task_text(base_url="http://taotoken.net/api")), "URL007")
    assert (f.line, f.severity) == (4, "warning") and "provider.base_url" in f.message
    assert lint_task("t.json", task_text(base_url="http://localhost:8080/api")) == []


def test_task_api_key_env_holds_a_key() -> None:
    findings = lint_task("t.json", task_text(api_key_env=CANARY))
    f = one(findings, "TASK002")
    assert (f.line, f.severity) == (5, "error") and "provider.api_key_env" in f.message
    assert "sk-…" in f.message and CANARY[3:] not in format_text(findings)


def test_task_api_key_env_not_a_variable_name() -> None:
    f = one(lint_task("t.json", task_text(api_key_env="taotoken key")), "TASK002")
    assert f.line == 5 and "provider.api_key_env" in f.message


def test_task_api_key_env_unknown_variable() -> None:
    f = one(lint_task("t.json", task_text(api_key_env="MY_GATEWAY_KEY"), book=BOOK), "TASK003")
    assert (f.line, f.severity) == (5, "warning") and "MY_GATEWAY_KEY" in f.message


def test_task_api_key_env_of_another_domain() -> None:
    f = one(lint_task("t.json", task_text(api_key_env="TAOTOKEN_API_KEY_FLASHMLA_AGENT"), book=BOOK), "TASK004")
    assert f.line == 5 and "TAOTOKEN_API_KEY_FLASHMLA_AGENT" in f.message
    assert "TAOTOKEN_API_KEY_DEEPGEMM_AGENT" in f.message
    ci = one(lint_task("t.json", task_text(api_key_env="TAOTOKEN_API_KEY_CI_SUMMARY"), book=BOOK), "TASK004")
    assert ci.line == 5 and "TAOTOKEN_API_KEY_CI_SUMMARY" in ci.message and "ci_summary domain" in ci.message


def test_task_domain_from_the_kernel_manifest_wins() -> None:
    findings = lint_task(
        "t.json", task_text(api_key_env="TAOTOKEN_API_KEY_FLASHMLA_AGENT"), domain="flashmla", book=BOOK
    )
    assert findings == []


def test_task_deny_missing_a_denial() -> None:
    text = task_text(deny='["direct_production_db_access", "remote_shell_execution"]')
    f = one(lint_task("t.json", text), "TASK005")
    assert f.line == 11 and "deny" in f.message and "secret_exfiltration" in f.message


def test_task_literal_key_elsewhere() -> None:
    text = task_text(extra=f'  "notes": "Bearer {CANARY}",\n')
    findings = lint_task("t.json", text)
    f = one(findings, "TASK006")
    assert f.line == 11 and "notes" in f.message
    assert CANARY[3:] not in format_text(findings)


def test_task_model_placeholder_is_info_only() -> None:
    findings = lint_task("t.json", task_text(model="YOUR_MODEL_ID"))
    f = one(findings, "TASK007")
    assert (f.line, f.severity) == (7, "info") and "model" in f.message
    assert exit_code(findings) == 0


# --- Claude Code settings.json ------------------------------------------------------------------


def test_claude_provider_setting_outside_env() -> None:
    text = '{\n  "env": {"ANTHROPIC_AUTH_TOKEN": ""},\n  "ANTHROPIC_BASE_URL": "https://taotoken.net/api"\n}\n'
    f = one(lint_claude(".claude/settings.json", text), "CLAUDE002")
    assert f.line == 3 and "ANTHROPIC_BASE_URL" in f.message


def test_claude_both_token_variables() -> None:
    text = CLAUDE_OK.replace('"ANTHROPIC_MODEL"', '"ANTHROPIC_API_KEY": "",\n    "ANTHROPIC_MODEL"')
    f = one(lint_claude(".claude/settings.json", text), "CLAUDE003")
    assert f.line == 5 and "ANTHROPIC_API_KEY" in f.message and "ANTHROPIC_AUTH_TOKEN" in f.message


def test_claude_literal_key_in_project_settings_is_an_error() -> None:
    findings = lint_claude(".claude/settings.json", CLAUDE_OK.replace("YOUR_TAOTOKEN_API_KEY", CANARY))
    f = one(findings, "CLAUDE004")
    assert (f.line, f.severity) == (4, "error") and "ANTHROPIC_AUTH_TOKEN" in f.message
    assert CANARY[3:] not in format_text(findings)


def test_claude_literal_key_in_personal_settings_is_a_warning() -> None:
    text = CLAUDE_OK.replace("YOUR_TAOTOKEN_API_KEY", CANARY_TT)
    f = one(lint_claude(".claude/settings.local.json", text), "CLAUDE004")
    assert (f.line, f.severity) == (4, "warning") and "ANTHROPIC_AUTH_TOKEN" in f.message


def test_claude_key_inside_a_hook_command() -> None:
    text = CLAUDE_OK.rstrip()[:-1] + f',\n  "apiKeyHelper": "echo {CANARY}"\n}}\n'
    findings = lint_claude(".claude/settings.json", text)
    f = one(findings, "CLAUDE004")
    assert f.line == 8 and "apiKeyHelper" in f.message and CANARY[3:] not in f.message


def test_claude_codex_variable() -> None:
    text = CLAUDE_OK.replace('"ANTHROPIC_MODEL"', '"TAOTOKEN_CODEX_API_KEY": "",\n    "ANTHROPIC_MODEL"')
    f = one(lint_claude(".claude/settings.json", text), "CLAUDE005")
    assert f.line == 5 and "TAOTOKEN_CODEX_API_KEY" in f.message


def test_claude_token_without_base_url() -> None:
    text = CLAUDE_OK.replace('    "ANTHROPIC_BASE_URL": "https://taotoken.net/api",\n', "")
    f = one(lint_claude(".claude/settings.json", text), "CLAUDE006")
    assert (f.line, f.severity) == (3, "warning") and "ANTHROPIC_AUTH_TOKEN" in f.message


def test_claude_base_url_with_query_string() -> None:
    text = CLAUDE_OK.replace("https://taotoken.net/api", "https://taotoken.net/api?utm_medium=docs")
    f = one(lint_claude(".claude/settings.json", text), "URL001")
    assert f.line == 3 and "ANTHROPIC_BASE_URL" in f.message


def test_claude_env_not_an_object() -> None:
    f = one(lint_claude("settings.json", '{\n  "env": ["ANTHROPIC_BASE_URL"]\n}\n'), "CLAUDE001")
    assert f.line == 2 and "env" in f.message


# --- Codex config.toml --------------------------------------------------------------------------


def test_codex_not_toml() -> None:
    f = one(lint_codex("config.toml", 'model = "x"\nmodel_provider = \n'), "CODEX001")
    assert f.line == 2


def test_codex_model_provider_names_no_table() -> None:
    f = one(lint_codex("config.toml", codex(**{'"taotoken"\n\n': '"tao"\n\n'})), "CODEX002")
    assert f.line == 2 and "model_provider" in f.message and "'taotoken'" in f.message


def test_codex_model_provider_and_env_key_swapped() -> None:
    text = codex(**{'model_provider = "taotoken"': 'model_provider = "TAOTOKEN_CODEX_API_KEY"'})
    text = text.replace('env_key = "TAOTOKEN_CODEX_API_KEY"', 'env_key = "taotoken"')
    findings = lint_codex("config.toml", text)
    provider, env_key = one(findings, "CODEX002"), one(findings, "CODEX003")
    assert provider.line == 2 and "model_provider" in provider.message and "swapped" in provider.message
    assert env_key.line == 7 and "model_providers.taotoken.env_key" in env_key.message and "swapped" in env_key.message


def test_codex_model_provider_unset() -> None:
    f = one(lint_codex("config.toml", codex(**{'model_provider = "taotoken"\n': ""})), "CODEX002")
    assert f.line == 1 and "model_provider" in f.message


def test_codex_env_key_unset() -> None:
    f = one(lint_codex("config.toml", codex(**{'env_key = "TAOTOKEN_CODEX_API_KEY"\n': ""})), "CODEX003")
    assert f.line == 4 and "model_providers.taotoken.env_key" in f.message


def test_codex_env_key_holds_a_key() -> None:
    findings = lint_codex("config.toml", codex(TAOTOKEN_CODEX_API_KEY=CANARY))
    f = one(findings, "CODEX003")
    assert (f.line, f.severity) == (7, "error") and "env_key" in f.message
    assert CANARY[3:] not in format_text(findings)


def test_codex_env_key_is_an_anthropic_variable() -> None:
    findings = lint_codex("config.toml", codex(TAOTOKEN_CODEX_API_KEY="ANTHROPIC_AUTH_TOKEN"))
    f = one(findings, "CODEX004")
    assert f.line == 7 and "env_key" in f.message and "ANTHROPIC_AUTH_TOKEN" in f.message
    assert "CODEX005" not in rules(findings)  # the same line is not reported twice


def test_codex_anthropic_anywhere() -> None:
    text = CODEX_OK + '\n[shell_environment_policy]\ninclude_only = ["PATH", "ANTHROPIC_BASE_URL"]\n# ANTHROPIC_X ok\n'
    f = one(lint_codex("config.toml", text), "CODEX005")
    assert f.line == 11 and "ANTHROPIC_BASE_URL" in f.message


def test_codex_wire_api_chat() -> None:
    f = one(lint_codex("config.toml", codex(**{'"responses"': '"chat"'})), "CODEX006")
    assert (f.line, f.severity) == (8, "error") and "wire_api" in f.message


def test_codex_wire_api_unset_is_a_warning() -> None:
    f = one(lint_codex("config.toml", codex(**{'wire_api = "responses"\n': ""})), "CODEX006")
    assert (f.line, f.severity) == (4, "warning") and "wire_api" in f.message


def test_codex_experimental_bearer_token() -> None:
    findings = lint_codex("config.toml", CODEX_OK + f'experimental_bearer_token = "{CANARY}"\n')
    f = one(findings, "CODEX007")
    assert f.line == 9 and "experimental_bearer_token" in f.message
    assert CANARY[3:] not in format_text(findings)


def test_codex_authorization_header() -> None:
    findings = lint_codex("config.toml", CODEX_OK + f'http_headers = {{ "Authorization" = "Bearer {CANARY_TT}" }}\n')
    f = one(findings, "CODEX007")
    assert f.line == 9 and "Authorization" in f.message
    assert CANARY_TT[3:] not in format_text(findings)


def test_codex_key_looking_value_elsewhere() -> None:
    findings = lint_codex("config.toml", CODEX_OK + f'\n[mcp_servers.x.env]\nGITHUB_TOKEN = "{CANARY_HEX}"\n')
    f = one(findings, "CODEX007")
    assert f.line == 11 and "GITHUB_TOKEN" in f.message


def test_codex_legacy_profiles() -> None:
    text = CODEX_OK + '\n[profiles.fast]\nmodel = "YOUR_MODEL_ID"\n'
    f = one(lint_codex("config.toml", text), "CODEX008")
    assert (f.line, f.severity) == (10, "warning") and "profiles" in f.message


def test_codex_provider_without_base_url() -> None:
    f = one(lint_codex("config.toml", codex(**{'base_url = "https://taotoken.net/api/v1"\n': ""})), "CODEX009")
    assert f.line == 4 and "model_providers.taotoken.base_url" in f.message


def test_codex_base_url_without_v1() -> None:
    f = one(lint_codex("config.toml", codex(**{"/api/v1": "/api"})), "URL006")
    assert (f.line, f.severity) == (6, "warning") and "model_providers.taotoken.base_url" in f.message


def test_codex_base_url_with_query_params() -> None:
    findings = lint_codex("config.toml", CODEX_OK + 'query_params = { api-version = "1" }\n')
    f = one(findings, "URL001")
    assert f.line == 9 and "query_params" in f.message


def test_codex_env_key_is_a_task_domain_variable() -> None:
    f = one(lint_codex("config.toml", codex(TAOTOKEN_CODEX_API_KEY="TAOTOKEN_API_KEY_DEEPGEMM_AGENT")), "CODEX010")
    assert f.line == 7 and "TAOTOKEN_API_KEY_DEEPGEMM_AGENT" in f.message


def test_codex_project_level_provider_is_ignored_by_codex() -> None:
    f = one(lint_codex("repo/.codex/config.toml", CODEX_OK, project_level=True), "CODEX011")
    assert f.line == 2 and "model_provider" in f.message


# --- across files -------------------------------------------------------------------------------


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


# --- paths, kinds, output -----------------------------------------------------------------------


def test_lint_paths_dispatches_by_name_and_reads_the_kernel_domain(tmp_path: Path) -> None:
    kernel = tmp_path / "kernels" / "fm"
    kernel.mkdir(parents=True)
    (kernel / "kernel.toml").write_text('name = "fm"\ndomain = "flashmla"\n')
    (kernel / "agent_task.json").write_text(task_text())  # a DEEPGEMM variable in a flashmla kernel
    (tmp_path / ".env.example").write_text(f"TAOTOKEN_API_KEY_DEEPGEMM_AGENT={CANARY}\n")
    (tmp_path / "notes.txt").write_text("hello\n")
    (tmp_path / "config.toml").write_text('model = "x"\n')  # named on the command line: linted as Codex
    findings = lint_paths(
        book=BOOK,
        paths=[
            kernel / "agent_task.json",
            tmp_path / ".env.example",
            tmp_path / "notes.txt",
            tmp_path / "missing.toml",
            tmp_path / "config.toml",
            tmp_path,  # the files again, through the folder: each is linted once
        ],
    )
    assert one(findings, "TASK004").path.endswith("agent_task.json")
    assert one(findings, "ENV001").path.endswith(".env.example")
    assert one(findings, "LINT002").path.endswith("notes.txt")
    assert one(findings, "LINT001").path.endswith("missing.toml")
    assert one(findings, "CODEX002").path.endswith("config.toml")


def test_folder_walk_picks_only_known_kinds(tmp_path: Path) -> None:
    (tmp_path / ".vscode").mkdir()
    (tmp_path / ".vscode" / "settings.json").write_text('{"editor.tabSize": 4}\n')
    (tmp_path / "cargo").mkdir()
    (tmp_path / "cargo" / "config.toml").write_text("[build]\njobs = 4\n")
    (tmp_path / "README.md").write_text("# hi\n")
    (tmp_path / "claude").mkdir()
    (tmp_path / "claude" / "settings.json").write_text(CLAUDE_OK.replace("YOUR_TAOTOKEN_API_KEY", CANARY))
    findings = lint_paths([tmp_path])
    assert rules(findings) == {"CLAUDE004"}


def test_detect_kind() -> None:
    assert detect_kind(".env") == detect_kind(".env.example") == "env"
    assert detect_kind("kernels/x/agent_task.json") == "task"
    assert detect_kind("flashmla_task.json", '{"task_id": "x"}') == "task"
    assert detect_kind("flashmla_task.json", '{"tasks": []}') is None
    assert detect_kind(".claude/settings.local.json") == "claude"
    assert detect_kind(".codex/config.toml") == "codex"
    assert detect_kind("pyproject.toml") is None


def test_json_output_parses_and_text_format() -> None:
    findings = lint_task("kernels/a/agent_task.json", task_text(base_url="https://taotoken.net/api?utm_x=1"))
    body = json.loads(format_json(findings))
    assert body["counts"] == {"error": 1, "warning": 0, "info": 0}
    assert body["findings"][0] == {
        "path": "kernels/a/agent_task.json",
        "line": 4,
        "rule": "URL001",
        "message": findings[0].message,
        "severity": "error",
        "entry": None,
    }
    assert format_text(findings).startswith("kernels/a/agent_task.json:4: URL001 provider.base_url")
    assert json.loads(format_json([])) == {"findings": [], "counts": {"error": 0, "warning": 0, "info": 0}}
    assert format_text([]) == ""
    assert "1 error(s)" in format_summary(findings)
    assert exit_code(findings) == 1


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


# --- heuristics and the rule table --------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [
        "deepgemm_tile_acceptance_001",
        "TAOTOKEN_API_KEY_V41_ATTENTION_AGENT",
        "Qwen/Qwen3-Coder-480B-A35B-Instruct",
        "claude-sonnet-4-5-20250929",
        "https://taotoken.net/api/v1",
        "~/.cache/opgate/build",
        "reports/opgate.sqlite",
        "latency_p50_regression <= 3%",
    ],
)
def test_names_urls_and_model_ids_are_not_keys(value: str) -> None:
    assert not looks_like_key(value) and find_keys(value) == []


def test_placeholders() -> None:
    assert all(map(is_placeholder, ["", "YOUR_KEY", "<key>", "changeme", "xxxx", "sk-xxxxxxxx", "${X}"]))
    assert not is_placeholder(CANARY)
    assert mask(CANARY) == "sk-…"


def test_every_rule_is_described() -> None:
    table = rules_markdown()
    for rule_id, rule in RULES.items():
        assert f"`{rule_id}`" in table
        assert rule.summary and "\n" not in rule.summary
        assert rule.severity in ("error", "warning", "info")


def test_readme_rule_table_is_the_rule_table() -> None:
    """Every rule, with its severity and summary, is in docs/lint.md's "Lint rules" table as it stands."""
    assert rules_markdown() in (ROOT / "docs" / "lint.md").read_text()
