"""`opgate lint` on Codex config.toml (bot/lint/codex.py): the provider table, env_key, wire_api, literal keys, the
base URL."""

from __future__ import annotations

from bot.lint import (
    format_text,
    lint_codex,
)
from tests.lint_texts import CANARY, CANARY_HEX, CANARY_TT, CODEX_OK, codex, one, rules


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
