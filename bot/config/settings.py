"""Settings: read once in `main` from the repository's configuration and the environment, frozen afterwards."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, RootModel, ValidationError, field_validator

from bot.config.repo import RepoConfig
from bot.config.secrets import AGENT_KEY, credential_values
from bot.errors import InputError
from bot.models.judging import MeasureSettings
from bot.text.i18n import LOCALES
from bot.text.redact import url_password

# Every variable opgate reads, with its default and meaning. The table in docs/configuration.md and
# .env.example are kept in step with this list (a test checks it).
VARIABLES: dict[str, str] = {
    "OPGATE_DATABASE_URL": "ledger: a SQLite path, sqlite:///path or postgresql://… (default reports/opgate.sqlite)",
    "OPGATE_BUILD_DIR": "build cache, one folder per content hash (default ~/.cache/opgate/build)",
    "OPGATE_PCH": "when a build compiles the precompiled torch header: second (default), first, stored, off",
    "OPGATE_CASE_TIMEOUT_S": "override every kernel's per-case timeout, seconds",
    "OPGATE_MEASURE_MAX_SECONDS": "timing cap per case, seconds (default 6)",
    "OPGATE_MEASURE_MIN_BLOCKS": "interleaved timing blocks per worker process (default 5)",
    "OPGATE_MEASURE_MIN_PROCESSES": "fresh worker processes per side, at least (default 3)",
    "OPGATE_MEASURE_MAX_PROCESSES": "fresh worker processes per side, at most (default 30)",
    "OPGATE_NOISE_LIMIT_CORES": "other processes busier than this many cores double the timing caps (default 0.5)",
    "OPGATE_MEASURE_TARGET_PCT": "stop sampling when the 95% CI half-width of the ratio is below this (default 0.5)",
    "OPGATE_MEASURE_MAX_SAMPLES": "timing cap per case and build, samples (default 200)",
    "OPGATE_AGENT_TIMEOUT_S": "gateway request timeout, seconds (default 120)",
    "OPGATE_REQUIRE_ISOLATION": "1: never build or run repository code without the sandbox (exit 2 instead)",
    "OPGATE_SANDBOX": "none turns the sandbox off (isolation: none in every report); else bwrap where it starts",
    "OPGATE_INCONCLUSIVE_POLICY": "a latency CI straddling the limit at the last look: neutral (default) or fail",
    "OPGATE_SIMULATE": "CPU cases counted under callgrind, reported, never deciding: off (default), undecided, always",
    "OPGATE_LOCALE": "the language of comments, replies and issues: en or zh-CN (default: [tool.opgate] locale, en)",
    "TAOTOKEN_BASE_URL": "override every task file's provider.base_url (a bare URL, no query string)",
    # Per domain (the repository's [tool.opgate.domains]): its key variable, named there, and two overrides.
    "<DOMAIN KEY>": "a domain's gateway key, in the variable its [tool.opgate.domains.<domain>] key names",
    "OPGATE_AGENT_KEY": "the key of the one domain `opgate review --kernel K` asks (CI: environment opgate-<domain>)",
    # Agent requests and token budgets (bot/agent, bot/budget.py).
    "OPGATE_AGENT_WIRE": "gateway wire: openai (/v1/chat/completions, default) or anthropic (/v1/messages)",
    "OPGATE_AGENT_MAX_TOKENS": "completion cap per agent request, tokens (default 2048)",
    "OPGATE_AGENT_RETRIES": "retries after a 429 rate limit, 5xx/529 or a timeout (default 4)",
    "OPGATE_AGENT_BACKOFF_S": "first retry pause, seconds; doubles per retry up to 30 s, with jitter (default 1)",
    "OPGATE_BUDGET_WEEKLY_<DOMAIN>": "override a configured domain's weekly token budget (weekly_budget)",
    "OPGATE_BUDGET_REQUEST_<DOMAIN>": "override a configured domain's prompt token budget per request (request_budget)",
    # GitHub (opgate summary --post).
    "GITHUB_API_URL": "GitHub REST API root (default https://api.github.com; set by Actions)",
    "GITHUB_TOKEN": "token for posting issues and comments (Actions' GITHUB_TOKEN)",
    "GITHUB_REPOSITORY": "owner/name of the repository to post to (set by Actions)",
    "GITHUB_SERVER_URL": "the GitHub web root commit links point at (default https://github.com; set by Actions)",
    # GitHub (opgate review --post, opgate accept).
    "GITHUB_STEP_SUMMARY": "a file the review comment is appended to (set by Actions)",
    "OPGATE_GITHUB_BACKOFF_S": "first retry pause after a GitHub 5xx or dropped connection; doubles (default 1)",
    "OPGATE_GITHUB_WRITE_INTERVAL_S": "seconds between GitHub writes, against secondary rate limits (default 1)",
    "OPGATE_GITHUB_MAX_WAIT_S": "most seconds one command waits for GitHub (rate limits, retries) in all (default 300)",
    "OPGATE_GITHUB_LOGIN": "the login opgate's own comments and issues carry (default: github-actions[bot] in Actions)",
    "GITHUB_ACTIONS": "set by Actions (true): opgate then posts as github-actions[bot] unless OPGATE_GITHUB_LOGIN says",
    # Main's history and cumulative drift (opgate history, opgate dashboard).
    "OPGATE_DRIFT_LIMIT_PCT": "cumulative slowdown of a case since the reference that opens a drift issue (default 5)",
    "OPGATE_DRIFT_REFERENCE": "what main is compared with: release (newest v* tag), Nd (main N days ago) or a revision",
    "OPGATE_BISECT_BUDGET_MIN": "minutes one bisection may take (opgate history bisect, drift --post; default 20)",
    # Tuning (opgate tune).
    "OPGATE_TUNE_PLATEAU_ROUNDS": "stop tuning when the best speedup has not improved by 1% over this many rounds (3)",
    "OPGATE_TUNE_MAX_SPACE": "largest space --strategy exhaustive|both sweeps, configs (default 64)",
}

BUDGET_PREFIXES = {"OPGATE_BUDGET_WEEKLY_": "weekly_budget", "OPGATE_BUDGET_REQUEST_": "request_budget"}

DEFAULT_LEDGER = "reports/opgate.sqlite"
ACTIONS_LOGIN = "github-actions[bot]"  # the author of what Actions' GITHUB_TOKEN writes


class DomainTokens(RootModel[dict[str, int]]):
    """A token count per configured agent domain (weekly or per-request budgets)."""

    model_config = ConfigDict(frozen=True)

    def get(self, domain: str) -> int:
        if domain not in self.root:
            raise InputError(f"domain {domain!r} has no token budget: configure it in [tool.opgate.domains]")
        return self.root[domain]


class DomainSettings(BaseModel):
    """One configured domain after the environment's overrides."""

    model_config = ConfigDict(frozen=True)

    key: str
    weekly_budget: int = Field(gt=0)
    request_budget: int = Field(gt=0)
    label: str
    max_tokens_field: Literal["max_tokens", "max_completion_tokens"] = "max_tokens"
    send_temperature: bool = True


class Settings(BaseModel):
    """Everything configurable, resolved once."""

    model_config = ConfigDict(frozen=True)

    database_url: str = DEFAULT_LEDGER
    create_ledger: bool = Field(True, description="create a SQLite ledger's folder (only the built-in default)")
    build_dir: Path = Path("~/.cache/opgate/build").expanduser()
    case_timeout_s: float | None = None
    agent_timeout_s: float = 120.0
    inconclusive_policy: Literal["neutral", "fail"] = "neutral"
    locale: str = Field("en", description="what comments, replies and issues are written in (bot.config.repo.LOCALES)")
    noise_limit_cores: float = Field(0.5, ge=0)
    simulate: Literal["undecided", "always", "off"] = "off"
    require_isolation: bool = False
    base_url_override: str | None = None
    measure: MeasureSettings = MeasureSettings()
    agent_wire: Literal["openai", "anthropic"] = "openai"
    agent_max_tokens: int = Field(2048, ge=16)
    agent_retries: int = Field(4, ge=0, le=10)
    agent_backoff_s: float = Field(1.0, ge=0)
    domains: dict[str, DomainSettings] = Field(default_factory=dict)
    repo_config: RepoConfig = Field(default_factory=RepoConfig, description="the repository's opgate configuration")
    github_api_url: str = "https://api.github.com"
    github_repository: str | None = None
    github_server_url: str = "https://github.com"
    github_token: str | None = Field(None, repr=False)
    step_summary: Path | None = None
    github_backoff_s: float = Field(1.0, ge=0)
    github_write_interval_s: float = Field(1.0, ge=0)
    github_max_wait_s: float = Field(300.0, ge=0)
    github_login: str | None = Field(None, description="who opgate posts as; None: the token's user (GET /user)")
    drift_limit_pct: float = Field(5.0, gt=0)
    drift_reference: str = Field("release", min_length=1)
    bisect_budget_min: float = Field(20.0, gt=0)
    tune_plateau_rounds: int = Field(3, ge=1)
    tune_max_space: int = Field(64, ge=1)
    # Key values by variable name; never printed (see bot.redact).
    keys: dict[str, str] = Field(default_factory=dict, repr=False)
    agent_key: str | None = Field(None, repr=False, description="OPGATE_AGENT_KEY: one domain's key, one kernel")
    # Other secret values to scrub (GITHUB_TOKEN, generic gateway keys); never used for requests here.
    extra_secrets: tuple[str, ...] = Field((), repr=False)

    @field_validator("locale")
    @classmethod
    def _a_locale(cls, locale: str) -> str:
        if locale not in LOCALES:
            raise ValueError(f"not a locale opgate speaks: choose one of {', '.join(LOCALES)}")
        return locale

    def agent_key_for(self, variable: str) -> str | None:
        """The key for a task's key variable: the variable itself, else OPGATE_AGENT_KEY (CI: one domain's key)."""
        return self.key_for(variable) or self.agent_key

    def key_for(self, variable: str) -> str | None:
        return self.keys.get(variable) or None

    def secrets(self) -> list[str]:
        """Every secret value known to this process, for the log and output scrubbers."""
        password = url_password(self.database_url)
        return [*self.keys.values(), *([self.agent_key] if self.agent_key else []), *self.extra_secrets,
                *([password] if password else [])]  # fmt: skip

    @property
    def budget_weekly(self) -> DomainTokens:
        return DomainTokens({name: d.weekly_budget for name, d in self.domains.items()})

    @property
    def budget_request(self) -> DomainTokens:
        return DomainTokens({name: d.request_budget for name, d in self.domains.items()})

    def labels(self) -> dict[str, str]:
        """Domain -> how summaries and the dashboard name it."""
        return {name: d.label for name, d in self.domains.items()}

    def key_variable(self, domain: str) -> str | None:
        d = self.domains.get(domain)
        return d.key if d is not None else None


# Variable -> where its value goes in Settings (a dotted path).
_FIELDS: dict[str, str] = {
    "OPGATE_DATABASE_URL": "database_url",
    "OPGATE_BUILD_DIR": "build_dir",
    "OPGATE_CASE_TIMEOUT_S": "case_timeout_s",
    "OPGATE_AGENT_TIMEOUT_S": "agent_timeout_s",
    "TAOTOKEN_BASE_URL": "base_url_override",
    "OPGATE_INCONCLUSIVE_POLICY": "inconclusive_policy",
    "OPGATE_LOCALE": "locale",
    "OPGATE_MEASURE_MAX_SECONDS": "measure.max_seconds",
    "OPGATE_MEASURE_MIN_BLOCKS": "measure.min_blocks",
    "OPGATE_MEASURE_MIN_PROCESSES": "measure.min_processes",
    "OPGATE_MEASURE_MAX_PROCESSES": "measure.max_processes",
    "OPGATE_NOISE_LIMIT_CORES": "noise_limit_cores",
    "OPGATE_SIMULATE": "simulate",
    "OPGATE_REQUIRE_ISOLATION": "require_isolation",
    "OPGATE_MEASURE_MAX_SAMPLES": "measure.max_samples",
    "OPGATE_MEASURE_TARGET_PCT": "measure.target_pct",
    "OPGATE_AGENT_WIRE": "agent_wire",
    "OPGATE_AGENT_MAX_TOKENS": "agent_max_tokens",
    "OPGATE_AGENT_RETRIES": "agent_retries",
    "OPGATE_AGENT_BACKOFF_S": "agent_backoff_s",
    "GITHUB_API_URL": "github_api_url",
    "GITHUB_REPOSITORY": "github_repository",
    "GITHUB_SERVER_URL": "github_server_url",
    "GITHUB_TOKEN": "github_token",
    "GITHUB_STEP_SUMMARY": "step_summary",
    "OPGATE_GITHUB_BACKOFF_S": "github_backoff_s",
    "OPGATE_GITHUB_WRITE_INTERVAL_S": "github_write_interval_s",
    "OPGATE_GITHUB_MAX_WAIT_S": "github_max_wait_s",
    "OPGATE_GITHUB_LOGIN": "github_login",
    "OPGATE_DRIFT_LIMIT_PCT": "drift_limit_pct",
    "OPGATE_DRIFT_REFERENCE": "drift_reference",
    "OPGATE_BISECT_BUDGET_MIN": "bisect_budget_min",
    "OPGATE_TUNE_PLATEAU_ROUNDS": "tune_plateau_rounds",
    "OPGATE_TUNE_MAX_SPACE": "tune_max_space",
}


def load_settings(env: Mapping[str, str] | None = None, config: RepoConfig | None = None) -> Settings:
    """Build Settings from the repository's configuration and the environment (or given ones, for tests).

    Without `config`, no domain is configured: the agent is never asked and no budget applies."""
    env = os.environ if env is None else env
    config = config if config is not None else RepoConfig()
    raw: dict[str, Any] = {"measure": {}, "repo_config": config}
    if (ledger := config.ledger_url()) is not None:
        raw["database_url"], raw["create_ledger"] = ledger, False
    if config.inconclusive is not None:
        raw["inconclusive_policy"] = config.inconclusive
    raw["locale"] = config.locale
    for variable, path in _FIELDS.items():
        value = env.get(variable, "").strip()
        if not value:
            continue
        if variable == "OPGATE_BUILD_DIR":
            value = str(Path(value).expanduser())
        if variable == "OPGATE_DATABASE_URL":
            raw["create_ledger"] = False
        section, _, field = path.rpartition(".")
        (raw[section] if section else raw)[field] = value
    if "github_login" not in raw and env.get("GITHUB_ACTIONS", "").strip().lower() == "true":
        raw["github_login"] = ACTIONS_LOGIN  # Actions' GITHUB_TOKEN posts as this bot
    raw["domains"] = _domains(env, config)
    raw["keys"] = {d["key"]: env[d["key"]] for d in raw["domains"].values() if env.get(d["key"], "").strip()}
    raw["agent_key"] = env.get(AGENT_KEY, "").strip() or None
    raw["extra_secrets"] = credential_values(env, skip=frozenset({*raw["keys"], AGENT_KEY}))
    try:
        return Settings.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        path = ".".join(str(part) for part in first["loc"])
        variable = next((v for v, p in _FIELDS.items() if p == path), path)
        raise InputError(f"bad setting {variable}={env.get(variable, '')!r}: {first['msg']}") from exc


def _domains(env: Mapping[str, str], config: RepoConfig) -> dict[str, dict[str, Any]]:
    """The configured domains with OPGATE_BUDGET_WEEKLY_<DOMAIN> / OPGATE_BUDGET_REQUEST_<DOMAIN> applied."""
    domains = {
        name: {
            "key": config.key_variable(name),
            "weekly_budget": d.weekly_budget,
            "request_budget": d.request_budget,
            "label": config.label(name),
            "max_tokens_field": d.max_tokens_field,
            "send_temperature": d.send_temperature,
        }
        for name, d in config.domains.items()
    }
    for variable, value in env.items():
        prefix = next((p for p in BUDGET_PREFIXES if variable.startswith(p)), None)
        if prefix is None or not value.strip():
            continue
        domain = variable.removeprefix(prefix).lower()
        if domain not in domains:
            raise InputError(
                f"bad setting {variable}: {config.check_domain(domain)}, or unset {variable}"
                if re.fullmatch(r"[a-z][a-z0-9_]*", domain)
                else f"bad setting {variable}: not a domain name after {prefix}"
            )
        try:
            tokens = int(value.strip().replace("_", ""))
        except ValueError:
            tokens = 0
        if tokens <= 0:
            raise InputError(f"bad setting {variable}={value.strip()!r}: a positive whole number of tokens")
        domains[domain][BUDGET_PREFIXES[prefix]] = tokens
    return domains
