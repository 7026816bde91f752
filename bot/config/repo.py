"""The reviewed repository's own configuration: `[tool.opgate]` in its pyproject.toml, or `opgate.toml`."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, ValidationError, field_validator, model_validator

from bot.config.manifest_tables import Constraints
from bot.config.secrets import RESERVED_KEYS
from bot.errors import InputError
from bot.text.i18n import LOCALES

CONFIG_FILE = "opgate.toml"
PYPROJECT = "pyproject.toml"
DEFAULT_MANIFESTS = ("kernels/*/kernel.toml",)
DOMAIN_NAME = re.compile(r"[a-z][a-z0-9_]*")
VARIABLE_NAME = re.compile(r"[A-Z][A-Z0-9_]*")
KERNEL_SOURCES = ("*.cu", "*.cuh")  # a changed file like these that no manifest claims is reported
CI_SUMMARY_DOMAIN = (
    "ci_summary"  # the domain asked once per review, after the gates, for a summary of what was measured
)
# What a review prompt may carry besides the task and the diff (docs/review.md, "What the agent sees"), and the
# order a domain keeps them in when the per-request budget is short: the users' token table names what each of
# their domains reads first; the rest follow, first to be trimmed.
Material = Literal["constraints", "baseline", "cases", "tunables", "functions"]
MATERIALS: tuple[Material, ...] = ("constraints", "baseline", "cases", "tunables", "functions")
DEFAULT_MATERIALS: dict[str, tuple[Material, ...]] = {
    "deepgemm": ("constraints", "baseline", "cases", "tunables", "functions"),  # constraints, baseline, shape list
    "flashmla": ("functions", "cases", "baseline", "constraints", "tunables"),  # kernel excerpt, case list
    "v41_attention": ("baseline", "constraints", "tunables", "cases", "functions"),  # trace, constraints, configs
}


def default_key(domain: str) -> str:
    """The users' naming for a domain's gateway key: TAOTOKEN_API_KEY_<DOMAIN>_AGENT."""
    return f"TAOTOKEN_API_KEY_{domain.upper()}_AGENT"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class DomainConfig(_Strict):
    """One agent domain: the variable holding its gateway key and its token budgets."""

    key: str | None = Field(None, description="environment variable of the domain's key (default: the users' name)")
    weekly_budget: int = Field(gt=0, description="tokens per ISO week")
    request_budget: int = Field(
        gt=0, description="prompt tokens per request (the diff and the materials are trimmed to it)"
    )
    label: str = Field("", description="how summaries and the dashboard name the domain (default: its name)")
    max_tokens_field: Literal["max_tokens", "max_completion_tokens"] = Field(
        "max_tokens",
        description="the completion cap's name on the OpenAI wire: max_completion_tokens for models that refuse the "
        "deprecated max_tokens (OpenAI's o-series and later)",
    )
    send_temperature: bool = Field(
        True, description="false: send no temperature (reasoning models accept only their default)"
    )
    task: str | None = Field(
        None, description="a task file from the repository root, for a domain no kernel's task names (ci_summary)"
    )
    materials: list[Material] | None = Field(
        None,
        description="what the review prompt carries besides the task and the diff, kept in this order when the "
        "request budget is short (default: the users' token table's order for their domains, else every material)",
    )

    @field_validator("materials")
    @classmethod
    def _each_once(cls, value: list[Material] | None) -> list[Material] | None:
        if value is not None and len(set(value)) != len(value):
            raise ValueError("name each material once")
        return value

    @field_validator("key")
    @classmethod
    def _a_variable_name(cls, value: str | None) -> str | None:
        if value is None:
            return value
        if not VARIABLE_NAME.fullmatch(value):
            raise ValueError(f"{value[:3]!r}…: must be the name of an environment variable (A-Z, 0-9, _), never a key")
        if value in RESERVED_KEYS:
            raise ValueError(f"{value} is opgate's own variable; name the domain's key variable")
        return value


class RepoConfig(_Strict):
    """Where the kernels are, which agent domains exist, the default ledger and repository-wide thresholds."""

    manifests: list[str] = Field(
        default_factory=lambda: list(DEFAULT_MANIFESTS), min_length=1, description="globs of kernel.toml files"
    )
    ledger: str | None = Field(None, description="default ledger: a SQLite path (from the repository root) or URL")
    domains: dict[str, DomainConfig] = Field(default_factory=dict)
    thresholds: dict[str, Any] = Field(
        default_factory=dict, description="defaults for every kernel.toml's [constraints]; inconclusive policy"
    )
    ignore: list[str] = Field(
        default_factory=list, description="globs of kernel-like sources (*.cu, *.cuh) no kernel needs to claim"
    )
    allow_self_accept: StrictBool = Field(
        False,
        description="a weakening: the pull request's author and whoever pushed commits to it may /accept it (and "
        "--override its gates) themselves; every review comment says so while it is on",
    )
    locale: str = Field(
        "en",
        description="the language of comments, replies and issues: en or zh-CN (OPGATE_LOCALE overrides it)",
    )
    source: str = Field("built-in defaults", exclude=True)
    root: Path = Field(Path("."), exclude=True)

    @field_validator("manifests")
    @classmethod
    def _manifest_globs(cls, globs: list[str]) -> list[str]:
        for glob in globs:
            if glob.startswith("/") or ".." in Path(glob).parts or not glob.endswith("kernel.toml"):
                raise ValueError(f"{glob!r}: a glob of kernel.toml files inside the repository, e.g. ops/*/kernel.toml")
        return globs

    @field_validator("locale")
    @classmethod
    def _a_locale(cls, locale: str) -> str:
        if locale not in LOCALES:
            raise ValueError(f"{locale!r} is not a locale opgate speaks: choose one of {', '.join(LOCALES)}")
        return locale

    @field_validator("domains")
    @classmethod
    def _domain_names(cls, domains: dict[str, DomainConfig]) -> dict[str, DomainConfig]:
        for name in domains:
            if not DOMAIN_NAME.fullmatch(name):
                raise ValueError(f"{name!r} is not a domain name (a-z, 0-9, _; starting with a letter)")
        return domains

    @field_validator("thresholds")
    @classmethod
    def _thresholds(cls, thresholds: dict[str, Any]) -> dict[str, Any]:
        rest = {k: v for k, v in thresholds.items() if k != "inconclusive"}
        if thresholds.get("inconclusive", "neutral") not in ("neutral", "fail"):
            raise ValueError("inconclusive must be neutral or fail")
        try:
            Constraints.model_validate(rest)
        except ValidationError as exc:
            err = exc.errors()[0]
            raise ValueError(f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}") from None
        return thresholds

    @model_validator(mode="after")
    def _one_key_per_domain(self) -> RepoConfig:
        seen: dict[str, str] = {}
        for name in self.domains:
            key = self.key_variable(name)
            if key in seen:
                raise ValueError(f"domains {seen[key]} and {name} share the key {key}: give each domain its own key")
            seen[key] = name
        return self

    # -- what the rest of opgate asks ----------------------------------------------------------

    def key_variable(self, domain: str) -> str:
        d = self.domains[domain]
        return d.key or default_key(domain)

    def task_path(self, domain: str) -> Path | None:
        """The domain's own task file (`task`, from the repository root), or None when it names none."""
        d = self.domains.get(domain)
        if d is None or d.task is None:
            return None
        path = Path(d.task).expanduser()
        return path if path.is_absolute() else self.root / path

    def materials(self, domain: str) -> tuple[Material, ...]:
        """What the domain's review prompt carries, most important first."""
        d = self.domains.get(domain)
        if d is not None and d.materials is not None:
            return tuple(d.materials)
        return DEFAULT_MATERIALS.get(domain, MATERIALS)

    def label(self, domain: str) -> str:
        d = self.domains.get(domain)
        return (d.label if d is not None else "") or domain

    @property
    def inconclusive(self) -> Literal["neutral", "fail"] | None:
        return self.thresholds.get("inconclusive")

    @property
    def constraints(self) -> dict[str, Any]:
        """Repository-wide defaults a kernel.toml's own [constraints] override."""
        return {k: v for k, v in self.thresholds.items() if k != "inconclusive"}

    def check_domain(self, domain: str) -> str | None:
        """Why `domain` cannot be used (None when it is configured)."""
        if domain in self.domains:
            return None
        have = ", ".join(sorted(self.domains)) or "none"
        return (
            f"domain {domain!r} is not configured (configured: {have}); add [tool.opgate.domains.{domain}] with "
            f"weekly_budget and request_budget to {self.where()}"
        )

    def where(self) -> str:
        """The file to edit, as a person reads it."""
        return self.source if self.source != "built-in defaults" else f"{PYPROJECT} ([tool.opgate]) or {CONFIG_FILE}"

    def ledger_url(self) -> str | None:
        """The configured ledger, a relative SQLite path taken from the repository root."""
        if self.ledger is None or "://" in self.ledger or self.ledger.startswith("sqlite:"):
            return self.ledger
        path = Path(self.ledger).expanduser()
        return str(path if path.is_absolute() else self.root / path)


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err["loc"]) or "(top level)"
    return f"{where}: {err['msg'].removeprefix('Value error, ')}"


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise InputError(f"{path}: cannot read it ({exc.strerror})") from exc
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: not valid TOML ({exc}); fix the file") from exc


def find_root(start: Path) -> Path:
    """The folder whose configuration applies: the nearest one up from `start` holding opgate.toml or a
    pyproject.toml with [tool.opgate]; without one, the repository root (a folder with .git) or `start`."""
    start = start.resolve()
    for folder in (start, *start.parents):
        if (folder / CONFIG_FILE).is_file():
            return folder
        pyproject = folder / PYPROJECT
        if pyproject.is_file() and "opgate" in _read_toml(pyproject).get("tool", {}):
            return folder
        if (folder / ".git").exists():
            return folder
    return start


def load_config(start: Path | str = ".") -> RepoConfig:
    """The configuration for the repository at (or above) `start`; built-in defaults without one."""
    root = find_root(Path(start))
    own, pyproject = root / CONFIG_FILE, root / PYPROJECT
    sections: list[tuple[str, dict[str, Any]]] = []
    if own.is_file():
        sections.append((str(own), _read_toml(own)))
    if pyproject.is_file() and "opgate" in (tool := _read_toml(pyproject).get("tool", {})):
        if not isinstance(tool["opgate"], dict):
            raise InputError(f"{pyproject}: [tool.opgate] must be a table")
        sections.append((f"{pyproject} [tool.opgate]", tool["opgate"]))
    if len(sections) > 1:
        raise InputError(f"two opgate configurations: {own} and {pyproject} [tool.opgate]; keep one of them")
    if not sections:
        return RepoConfig(root=root)
    source, data = sections[0]
    if "source" in data or "root" in data:
        raise InputError(f"{source}: unknown key {'source' if 'source' in data else 'root'}; remove it")
    try:
        return RepoConfig.model_validate({**data, "source": source, "root": root})
    except ValidationError as exc:
        raise InputError(f"{source}: {_first_error(exc)}") from exc
