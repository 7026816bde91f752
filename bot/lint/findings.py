"""Lint findings and the rule table: stable rule ids, severities, and findings that never hold a secret."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from bot.lint.secrets import redact

Severity = Literal["error", "warning", "info"]
Kind = Literal["env", "task", "claude", "codex", "config", "manifest"]
SEVERITIES: tuple[Severity, ...] = ("error", "warning", "info")


class LintFinding(BaseModel):
    """One problem in one file, at the line of the offending key (or in one entry of a CC Switch store)."""

    model_config = ConfigDict(frozen=True)

    path: str
    line: int | None = Field(ge=1)  # None: a database row, which has no line
    rule: str
    message: str
    severity: Severity
    entry: str | None = None  # the store entry the finding is in: `provider <name> (codex) config.toml:5`


@dataclass(frozen=True)
class Rule:
    severity: Severity  # the usual severity; a few rules lower it in a personal file or an unset case
    summary: str


# The rule table (stable ids; docs/lint.md's table is `rules_markdown()`).
RULES: dict[str, Rule] = {
    "LINT001": Rule("error", "a path given to lint cannot be read (missing, unreadable, not UTF-8)"),
    "LINT002": Rule(
        "warning", "a file given by name is not a kind lint knows (.env, task JSON, Claude, Codex, opgate's own)"
    ),
    "CONF001": Rule("error", "opgate.toml or pyproject.toml's [tool.opgate] does not match the configuration schema"),
    "KERN001": Rule("error", "a kernel.toml is not valid TOML or does not match the manifest schema (did you mean …)"),
    "KERN002": Rule("error", "a kernel.toml names a domain the repository does not configure"),
    "KERN003": Rule("error", "a kernel.toml holds a literal value that looks like a key"),
    "KERN004": Rule("error", "a kernel.toml compiler flag is outside the allow-list the review applies"),
    "KERN005": Rule("error", "a kernel.toml include_dirs entry is not a folder of the repository (or is empty)"),
    "KERN006": Rule("error", "a kernel.toml names a file that does not exist, or an entry its sources do not offer"),
    "KERN007": Rule("warning", "a kernel.toml architecture has no occupancy table: its occupancy is not computed"),
    "URL001": Rule("error", "a base URL carries a query string, fragment or tracking (utm_) parameters"),
    "URL002": Rule("error", "a base URL is not an http(s) URL with a host"),
    "URL003": Rule("error", "a base URL carries credentials (user:password@)"),
    "URL004": Rule("error", "a base URL ends with an endpoint path (/chat/completions, /messages, /responses)"),
    "URL005": Rule("error", "a gateway or Anthropic base URL ends with /v1, which the client appends itself"),
    "URL006": Rule(
        "warning", "a Codex base URL lacks /v1: Codex requests base_url/responses, which the gateway must serve"
    ),
    "URL007": Rule("warning", "a base URL uses plain http to a host other than localhost"),
    "ENV001": Rule("error", "an .env value looks like a real key; .env files hold placeholders only"),
    "ENV002": Rule("warning", "a secret variable holds a value that is neither empty nor an obvious placeholder"),
    "ENV003": Rule("warning", "an .env variable is assigned more than once (the later value wins)"),
    "ENV004": Rule("warning", "an .env line is not a NAME=value assignment"),
    "TASK001": Rule("error", "a task file is not valid JSON or does not match the AgentTask schema"),
    "TASK002": Rule("error", "provider.api_key_env is not an environment variable name (or holds a key)"),
    "TASK003": Rule("warning", "provider.api_key_env is not one of the known per-domain key variables"),
    "TASK004": Rule("warning", "provider.api_key_env is the key variable of another domain"),
    "TASK005": Rule("error", "deny does not list all three required denials"),
    "TASK006": Rule("error", "a task file holds a literal value that looks like a key"),
    "TASK007": Rule("info", "model is still the placeholder YOUR_MODEL_ID"),
    "CLAUDE001": Rule("error", "Claude settings are not a JSON object, or env is not an object"),
    "CLAUDE002": Rule("error", "a provider setting sits outside env (use ANTHROPIC_* entries of env)"),
    "CLAUDE003": Rule("error", "env sets both ANTHROPIC_AUTH_TOKEN and ANTHROPIC_API_KEY"),
    "CLAUDE004": Rule("error", "a literal key in Claude settings (warning in the personal settings.local.json)"),
    "CLAUDE005": Rule("error", "Claude settings set a Codex/OpenAI/TaoToken variable (TAOTOKEN_*, OPENAI_*, CODEX_*)"),
    "CLAUDE006": Rule("warning", "env sets a token but no ANTHROPIC_BASE_URL (the token would go to the default API)"),
    "CODEX001": Rule("error", "config.toml is not valid TOML"),
    "CODEX002": Rule("error", "model_provider is unset or names no [model_providers.X] table"),
    "CODEX003": Rule("error", "a provider's env_key is unset, not a variable name, or holds a key"),
    "CODEX004": Rule("error", "a provider's env_key is an ANTHROPIC_* variable (that is Claude Code's)"),
    "CODEX005": Rule("error", "ANTHROPIC_* appears in the Codex config"),
    "CODEX006": Rule("error", 'wire_api is not "responses" (current Codex rejects "chat"; warning when unset)'),
    "CODEX007": Rule("error", "an inline token: experimental_bearer_token, an auth header, or a key-looking value"),
    "CODEX008": Rule("warning", "legacy profiles ([profiles.*] tables or a profile key)"),
    "CODEX009": Rule("error", "a provider has no base_url"),
    "CODEX010": Rule("warning", "a provider's env_key is a task-domain key variable (Codex has its own)"),
    "CODEX011": Rule("warning", "a project .codex/config.toml sets model_provider(s), which Codex ignores there"),
    "XFILE001": Rule("error", "a base URL differs from the one most linted files use"),
    "XFILE002": Rule("error", "one key variable is shared by two task domains or clients"),
    "CCS001": Rule("info", "CC Switch has providers for a client but no current one (its live files are not compared)"),
    "CCS002": Rule("error", "a CC Switch entry (settingsConfig) or the live auth.json is not what CC Switch writes"),
    "CCS003": Rule("error", "a TaoToken provider in CC Switch points elsewhere than the gateway (TAOTOKEN_BASE_URL)"),
    "CCS004": Rule("error", "ANTHROPIC_* in a CC Switch Codex entry or in Codex's live auth.json"),
    "CCS005": Rule(
        "error", "the live Claude settings.json differs from the current provider (warning: the model, a missing file)"
    ),
    "CCS006": Rule(
        "error", "the live Codex config.toml differs from the current provider (warning: the model, a missing file)"
    ),
    "CCS007": Rule(
        "error", "a live key is not the current provider's, or auth.json and config.toml hold different providers' keys"
    ),
    "CCS008": Rule("error", "one key serves both Claude Code and Codex (in the CC Switch store or the live files)"),
    "CCS009": Rule("error", "a key in the CC Switch store or the live files is a task-domain key of the environment"),
    "CCS010": Rule("error", "one key is stored for CC Switch providers on different hosts (a key leaked between them)"),
}


def rules_markdown() -> str:
    """The rule table for docs/lint.md."""
    rows = [f"| `{rid}` | {rule.severity} | {rule.summary} |" for rid, rule in RULES.items()]
    return "\n".join(["| Rule | Severity | What it flags |", "| --- | --- | --- |", *rows])


def make_finding(
    path: str,
    line: int | None,
    rule: str,
    message: str,
    severity: Severity | None = None,
    entry: str | None = None,
) -> LintFinding:
    """A finding at the real line of the offending key (1 when unknown, None in a database), its text redacted."""
    return LintFinding(
        path=path,
        line=None if line is None else max(1, line),
        rule=rule,
        message=redact(message),
        severity=severity or RULES[rule].severity,
        entry=None if entry is None else redact(entry),
    )


def scrub(findings: Iterable[LintFinding], secrets: Iterable[str]) -> list[LintFinding]:
    """The findings with the given secrets masked in their messages (and store entries)."""
    secrets = list(secrets)
    return [
        f.model_copy(update={"message": redact(f.message, secrets), "entry": f.entry and redact(f.entry, secrets)})
        for f in findings
    ]
