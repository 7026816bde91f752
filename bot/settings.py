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
    "OPGATE_DATABASE_URL": "ledger location: a SQLite path or sqlite:///path (default reports/opgate.sqlite)",
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
}


def load_settings(env: Mapping[str, str] | None = None) -> Settings:
    """Build Settings from the environment (or a given mapping, for tests)."""
    env = os.environ if env is None else env
    raw: dict[str, Any] = {"measure": {}}
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
