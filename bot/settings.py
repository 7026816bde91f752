"""Settings: read once from the environment in `main`, frozen afterwards."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from bot.errors import InputError

# Every variable opgate reads, with its default and meaning. The README table and
# .env.example are kept in step with this list (a test checks it).
VARIABLES: dict[str, str] = {
    "OPGATE_DATABASE_URL": "ledger: a SQLite path, sqlite:///path or postgresql://… (default reports/opgate.sqlite)",
    "OPGATE_BUILD_DIR": "build cache, one folder per content hash (default ~/.cache/opgate/build)",
    "OPGATE_CASE_TIMEOUT_S": "override every kernel's per-case timeout, seconds",
    "OPGATE_MEASURE_MAX_SECONDS": "timing cap per case and build, seconds (default 3)",
    "OPGATE_MEASURE_MIN_BLOCKS": "interleaved timing blocks per build, at least (default 3)",
    "OPGATE_MEASURE_TARGET_PCT": "stop sampling when the 95% CI half-width of the ratio is below this (default 0.5)",
    "OPGATE_MEASURE_MAX_SAMPLES": "timing cap per case and build, samples (default 200)",
    "OPGATE_AGENT_TIMEOUT_S": "gateway request timeout, seconds (default 120)",
    "OPGATE_INCONCLUSIVE_POLICY": "a latency CI straddling the limit after a re-measure: neutral (default) or fail",
    "TAOTOKEN_BASE_URL": "override every task file's provider.base_url (a bare URL, no query string)",
    "TAOTOKEN_API_KEY_DEEPGEMM_AGENT": "gateway key for the deepgemm domain",
    "TAOTOKEN_API_KEY_FLASHMLA_AGENT": "gateway key for the flashmla domain",
    "TAOTOKEN_API_KEY_V41_ATTENTION_AGENT": "gateway key for the v41_attention domain",
    "TAOTOKEN_API_KEY_CI_SUMMARY": "gateway key for CI summaries",
    # Agent requests and token budgets (bot/agent, bot/budget.py).
    "OPGATE_AGENT_WIRE": "gateway wire: openai (/v1/chat/completions, default) or anthropic (/v1/messages)",
    "OPGATE_AGENT_MAX_TOKENS": "completion cap per agent request, tokens (default 2048)",
    "OPGATE_AGENT_RETRIES": "retries after a 429 rate limit, 5xx/529 or a timeout (default 4)",
    "OPGATE_AGENT_BACKOFF_S": "first retry pause, seconds; doubles per retry up to 30 s, with jitter (default 1)",
    "OPGATE_BUDGET_WEEKLY_DEEPGEMM": "weekly token budget, deepgemm domain (default 500000)",
    "OPGATE_BUDGET_WEEKLY_FLASHMLA": "weekly token budget, flashmla domain (default 800000)",
    "OPGATE_BUDGET_WEEKLY_V41_ATTENTION": "weekly token budget, v41_attention domain (default 520000)",
    "OPGATE_BUDGET_WEEKLY_CI_SUMMARY": "weekly token budget, CI summaries (default 200000)",
    "OPGATE_BUDGET_REQUEST_DEEPGEMM": "prompt token budget per request, deepgemm domain (default 5000)",
    "OPGATE_BUDGET_REQUEST_FLASHMLA": "prompt token budget per request, flashmla domain (default 6000)",
    "OPGATE_BUDGET_REQUEST_V41_ATTENTION": "prompt token budget per request, v41_attention domain (default 8000)",
    "OPGATE_BUDGET_REQUEST_CI_SUMMARY": "prompt token budget per request, CI summaries (default 12000)",
    # GitHub (opgate summary --post).
    "GITHUB_API_URL": "GitHub REST API root (default https://api.github.com; set by Actions)",
    "GITHUB_TOKEN": "token for posting issues and comments (Actions' GITHUB_TOKEN)",
    "GITHUB_REPOSITORY": "owner/name of the repository to post to (set by Actions)",
    # GitHub (opgate review --post, opgate accept).
    "GITHUB_STEP_SUMMARY": "a file the review comment is appended to (set by Actions)",
    "OPGATE_GITHUB_BACKOFF_S": "first retry pause after a GitHub 5xx, 429 or dropped connection; doubles (default 1)",
    "OPGATE_GITHUB_WRITE_INTERVAL_S": "seconds between GitHub writes, against secondary rate limits (default 1)",
    # Main's history and cumulative drift (opgate history, opgate dashboard).
    "OPGATE_DRIFT_LIMIT_PCT": "cumulative slowdown of a case since the reference that opens a drift issue (default 5)",
    "OPGATE_DRIFT_REFERENCE": "what main is compared with: release (newest v* tag), Nd (main N days ago) or a revision",
    # Tuning (opgate tune).
    "OPGATE_TUNE_PLATEAU_ROUNDS": "stop tuning when the best speedup has not improved by 1% over this many rounds (3)",
    "OPGATE_TUNE_MAX_SPACE": "largest space --strategy exhaustive|both sweeps, configs (default 64)",
}

KEY_VARIABLES = tuple(name for name in VARIABLES if name.startswith("TAOTOKEN_API_KEY_"))
# Secrets opgate does not use for the gateway but must never print.
SCRUBBED_VARIABLES = (
    "GITHUB_TOKEN",
    "GH_TOKEN",
    "TAOTOKEN_API_KEY",
    "TAOTOKEN_CODEX_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "ANTHROPIC_API_KEY",
)


class MeasureSettings(BaseModel):
    """How long and how hard the runner times each case."""

    model_config = ConfigDict(frozen=True)

    max_seconds: float = Field(3.0, gt=0)
    min_blocks: int = Field(3, ge=1)
    max_samples: int = Field(200, ge=3)
    target_pct: float = Field(0.5, gt=0)
    warmup_ms: float = 25.0
    warmup_calls: int = 10


class DomainTokens(BaseModel):
    """A token count per agent domain (the three kernel domains and CI summaries)."""

    model_config = ConfigDict(frozen=True)

    deepgemm: int = Field(gt=0)
    flashmla: int = Field(gt=0)
    v41_attention: int = Field(gt=0)
    ci_summary: int = Field(gt=0)

    def get(self, domain: str) -> int:
        return int(getattr(self, domain))


class WeeklyBudgets(DomainTokens):
    """Tokens per domain per ISO week: the users' per-task totals × 25 task runs a week, rounded."""

    deepgemm: int = Field(500_000, gt=0)  # 19,800 per DeepGEMM tile search
    flashmla: int = Field(800_000, gt=0)  # 32,000 per FlashMLA mask-branch task
    v41_attention: int = Field(520_000, gt=0)  # 20,800 per V4.1 split-K task
    ci_summary: int = Field(200_000, gt=0)  # 7,500 per CI summary


class RequestBudgets(DomainTokens):
    """Prompt tokens per request: twice the users' average input per request, rounded."""

    deepgemm: int = Field(5_000, gt=0)
    flashmla: int = Field(6_000, gt=0)
    v41_attention: int = Field(8_000, gt=0)
    ci_summary: int = Field(12_000, gt=0)


class Settings(BaseModel):
    """Everything configurable, resolved once."""

    model_config = ConfigDict(frozen=True)

    database_url: str = "reports/opgate.sqlite"
    build_dir: Path = Path("~/.cache/opgate/build").expanduser()
    case_timeout_s: float | None = None
    agent_timeout_s: float = 120.0
    inconclusive_policy: Literal["neutral", "fail"] = "neutral"
    base_url_override: str | None = None
    measure: MeasureSettings = MeasureSettings()
    agent_wire: Literal["openai", "anthropic"] = "openai"
    agent_max_tokens: int = Field(2048, ge=16)
    agent_retries: int = Field(4, ge=0, le=10)
    agent_backoff_s: float = Field(1.0, ge=0)
    budget_weekly: WeeklyBudgets = WeeklyBudgets()
    budget_request: RequestBudgets = RequestBudgets()
    github_api_url: str = "https://api.github.com"
    github_repository: str | None = None
    github_token: str | None = Field(None, repr=False)
    step_summary: Path | None = None
    github_backoff_s: float = Field(1.0, ge=0)
    github_write_interval_s: float = Field(1.0, ge=0)
    drift_limit_pct: float = Field(5.0, gt=0)
    drift_reference: str = Field("release", min_length=1)
    tune_plateau_rounds: int = Field(3, ge=1)
    tune_max_space: int = Field(64, ge=1)
    # Key values by variable name; never printed (see bot.redact).
    keys: dict[str, str] = Field(default_factory=dict, repr=False)
    # Other secret values to scrub (GITHUB_TOKEN, generic gateway keys); never used for requests here.
    extra_secrets: tuple[str, ...] = Field((), repr=False)

    def key_for(self, variable: str) -> str | None:
        return self.keys.get(variable) or None

    def secrets(self) -> list[str]:
        """Every secret value known to this process, for the log and output scrubbers."""
        return [*self.keys.values(), *self.extra_secrets]


# Variable -> where its value goes in Settings (a dotted path).
_FIELDS: dict[str, str] = {
    "OPGATE_DATABASE_URL": "database_url",
    "OPGATE_BUILD_DIR": "build_dir",
    "OPGATE_CASE_TIMEOUT_S": "case_timeout_s",
    "OPGATE_AGENT_TIMEOUT_S": "agent_timeout_s",
    "TAOTOKEN_BASE_URL": "base_url_override",
    "OPGATE_INCONCLUSIVE_POLICY": "inconclusive_policy",
    "OPGATE_MEASURE_MAX_SECONDS": "measure.max_seconds",
    "OPGATE_MEASURE_MIN_BLOCKS": "measure.min_blocks",
    "OPGATE_MEASURE_MAX_SAMPLES": "measure.max_samples",
    "OPGATE_MEASURE_TARGET_PCT": "measure.target_pct",
    "OPGATE_AGENT_WIRE": "agent_wire",
    "OPGATE_AGENT_MAX_TOKENS": "agent_max_tokens",
    "OPGATE_AGENT_RETRIES": "agent_retries",
    "OPGATE_AGENT_BACKOFF_S": "agent_backoff_s",
    **{f"OPGATE_BUDGET_WEEKLY_{d.upper()}": f"budget_weekly.{d}" for d in DomainTokens.model_fields},
    **{f"OPGATE_BUDGET_REQUEST_{d.upper()}": f"budget_request.{d}" for d in DomainTokens.model_fields},
    "GITHUB_API_URL": "github_api_url",
    "GITHUB_REPOSITORY": "github_repository",
    "GITHUB_TOKEN": "github_token",
    "GITHUB_STEP_SUMMARY": "step_summary",
    "OPGATE_GITHUB_BACKOFF_S": "github_backoff_s",
    "OPGATE_GITHUB_WRITE_INTERVAL_S": "github_write_interval_s",
    "OPGATE_DRIFT_LIMIT_PCT": "drift_limit_pct",
    "OPGATE_DRIFT_REFERENCE": "drift_reference",
    "OPGATE_TUNE_PLATEAU_ROUNDS": "tune_plateau_rounds",
    "OPGATE_TUNE_MAX_SPACE": "tune_max_space",
}


def load_settings(env: Mapping[str, str] | None = None) -> Settings:
    """Build Settings from the environment (or a given mapping, for tests)."""
    env = os.environ if env is None else env
    raw: dict[str, Any] = {"measure": {}, "budget_weekly": {}, "budget_request": {}}
    for variable, path in _FIELDS.items():
        value = env.get(variable, "").strip()
        if not value:
            continue
        if variable == "OPGATE_BUILD_DIR":
            value = str(Path(value).expanduser())
        section, _, field = path.rpartition(".")
        (raw[section] if section else raw)[field] = value
    raw["keys"] = {name: env[name] for name in KEY_VARIABLES if env.get(name, "").strip()}
    raw["extra_secrets"] = tuple(env[n] for n in SCRUBBED_VARIABLES if env.get(n, "").strip())
    try:
        return Settings.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        path = ".".join(str(part) for part in first["loc"])
        variable = next((v for v, p in _FIELDS.items() if p == path), path)
        raise InputError(f"bad setting {variable}={env.get(variable, '')!r}: {first['msg']}") from exc
