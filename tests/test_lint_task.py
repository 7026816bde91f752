"""`opgate lint` on agent task files (bot/lint/task.py): the schema, the provider's base URL and key variable, the
denials, each at its line."""

from __future__ import annotations

import pytest

from bot.lint import (
    exit_code,
    format_json,
    format_text,
    lint_task,
)
from tests.lint_texts import BOOK, CANARY, one, task_text


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
