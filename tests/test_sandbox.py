"""The sandbox's environment (bot/untrusted/sandbox.py): pull-request code gets no secret and no ledger address."""

from __future__ import annotations


def test_pr_code_gets_an_environment_without_secrets_or_the_ledger(monkeypatch):
    from bot.untrusted.sandbox import base_env

    secrets = ("TAOTOKEN_API_KEY_DEEPGEMM_AGENT", "GITHUB_TOKEN", "OPGATE_DATABASE_URL", "ANTHROPIC_AUTH_TOKEN")
    for name in secrets:
        monkeypatch.setenv(name, "secret-value-123456")
    env = base_env({"OPGATE_BUILD_DIR": "/tmp/builds", **dict.fromkeys(secrets, "secret-value-123456")})
    assert "secret-value-123456" not in env.values()
    assert env["OPGATE_BUILD_DIR"] == "/tmp/builds" and "PATH" in env
