"""Settings: read once from the environment in `main`, frozen afterwards."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

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
    "TAOTOKEN_BASE_URL": "override every task file's provider.base_url (a bare URL, no query string)",
    "TAOTOKEN_API_KEY_DEEPGEMM_AGENT": "gateway key for the deepgemm domain",
    "TAOTOKEN_API_KEY_FLASHMLA_AGENT": "gateway key for the flashmla domain",
    "TAOTOKEN_API_KEY_V41_ATTENTION_AGENT": "gateway key for the v41_attention domain",
    "TAOTOKEN_API_KEY_CI_SUMMARY": "gateway key for CI summaries",
}

KEY_VARIABLES = tuple(name for name in VARIABLES if name.startswith("TAOTOKEN_API_KEY_"))


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
    base_url_override: str | None = None
    measure: MeasureSettings = MeasureSettings()
    # Key values by variable name; never printed (see bot.redact).
    keys: dict[str, str] = Field(default_factory=dict, repr=False)

    def key_for(self, variable: str) -> str | None:
        return self.keys.get(variable) or None


def load_settings(env: Mapping[str, str] | None = None) -> Settings:
    """Build Settings from the environment (or a given mapping, for tests)."""
    env = os.environ if env is None else env

    def get(name: str) -> str | None:
        value = env.get(name, "").strip()
        return value or None

    measure: dict[str, str] = {}
    for field, var in (
        ("max_seconds", "OPGATE_MEASURE_MAX_SECONDS"),
        ("min_blocks", "OPGATE_MEASURE_MIN_BLOCKS"),
        ("max_samples", "OPGATE_MEASURE_MAX_SAMPLES"),
        ("target_pct", "OPGATE_MEASURE_TARGET_PCT"),
    ):
        if (value := get(var)) is not None:
            measure[field] = value
    raw: dict[str, object] = {"measure": measure}
    if (value := get("OPGATE_DATABASE_URL")) is not None:
        raw["database_url"] = value
    if (value := get("OPGATE_BUILD_DIR")) is not None:
        raw["build_dir"] = Path(value).expanduser()
    if (value := get("OPGATE_CASE_TIMEOUT_S")) is not None:
        raw["case_timeout_s"] = value
    if (value := get("OPGATE_AGENT_TIMEOUT_S")) is not None:
        raw["agent_timeout_s"] = value
    if (value := get("TAOTOKEN_BASE_URL")) is not None:
        raw["base_url_override"] = value
    raw["keys"] = {name: env[name] for name in KEY_VARIABLES if env.get(name, "").strip()}
    try:
        return Settings.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise InputError(f"bad setting {where}: {first['msg']}") from exc
