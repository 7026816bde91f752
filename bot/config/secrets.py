"""Which environment variables are secrets: one list for the scrubbers, the sandbox and the configuration checks."""

from __future__ import annotations

from collections.abc import Mapping

# The users' naming of task-domain keys (TAOTOKEN_API_KEY_<DOMAIN>_AGENT): any such variable is a credential,
# configured or not.
KEY_PREFIX = "TAOTOKEN_API_KEY_"
AGENT_KEY = "OPGATE_AGENT_KEY"  # one domain's key in CI (the secret of environment opgate-<domain>)
# Variables opgate itself reads whose value grants something: never a domain's key variable, never below a review.
OPGATE_SECRETS = (AGENT_KEY, "OPGATE_DATABASE_URL", "GITHUB_TOKEN", "GH_TOKEN")
# Credentials opgate does not use for the gateway but must never print (other clients' keys, PostgreSQL's).
OTHER_CREDENTIALS = (
    "TAOTOKEN_API_KEY",
    "TAOTOKEN_CODEX_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "ANTHROPIC_API_KEY",
    "PGPASSWORD",
)
# Every variable of a gateway client (keys, base URLs, models) starts with one of these.
CLIENT_PREFIXES = ("TAOTOKEN_", "ANTHROPIC_", "OPENAI_")
# A domain's key variable may not be one of opgate's own variables (nor PATH).
RESERVED_KEYS = frozenset({*OPGATE_SECRETS, "PATH"})


def is_credential(name: str) -> bool:
    """A variable whose value is a key or token: masked wherever opgate writes text (the ledger URL is not
    masked: it is configuration, shown in errors; it never reaches PR code either)."""
    return name.startswith(KEY_PREFIX) or name in OTHER_CREDENTIALS or name in (AGENT_KEY, "GITHUB_TOKEN", "GH_TOKEN")


def is_secret_variable(name: str) -> bool:
    """Gateway keys and settings, the GitHub token and the ledger URL: never in a process below the review."""
    return is_credential(name) or name.startswith(CLIENT_PREFIXES) or name in OPGATE_SECRETS


def credential_values(env: Mapping[str, str], skip: frozenset[str] = frozenset()) -> tuple[str, ...]:
    """The values of every credential set in `env` (except the variables in `skip`), for the scrubbers."""
    return tuple(value for name, value in env.items() if name not in skip and is_credential(name) and value.strip())
