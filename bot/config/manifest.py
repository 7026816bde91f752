"""Kernel manifests (`<root>/<name>/kernel.toml`), tunable configs and agent task files."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictInt,
    StrictStr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from bot.config import expr
from bot.errors import InputError

if TYPE_CHECKING:
    from bot.config.repo import RepoConfig

KERNELS_DIR = "kernels"  # the default root (RepoConfig.manifests: kernels/*/kernel.toml)
MANIFEST_NAME = "kernel.toml"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class BuildSpec(_Strict):
    """How to build the kernel for one device with torch.utils.cpp_extension."""

    sources: list[str] = Field(min_length=1)
    cflags: list[str] = Field(default_factory=list)
    cuda_cflags: list[str] = Field(default_factory=list)
    entry: str = Field(description="function of the built extension that each case calls")


class ReferenceSpec(_Strict):
    module: str = "reference.py"
    inputs: str = "make_inputs"
    function: str = "reference"
    probes: str = Field("make_probes", description="optional boundary-probe builder; a module without it has none")


class OutputLimits(_Strict):
    """Limits on one output tensor; None leaves a metric ungated (max_abs_err: the case's tolerance)."""

    max_abs_err: float | None = Field(None, gt=0)
    max_rel_err: float | None = Field(None, gt=0)
    max_cos_diff: float | None = Field(None, gt=0)


class Limits(_Strict):
    """What one case's outputs must stay within, as the judge applies it (resolved from [constraints])."""

    max_abs_err: float = Field(gt=0, description="the case's tolerance")
    max_rel_err: float | None = Field(None, gt=0)
    max_cos_diff: float | None = Field(None, gt=0)
    outputs: dict[str, OutputLimits] = Field(default_factory=dict)

    def of(self, output: str) -> OutputLimits:
        """The limits of one output: its own where [constraints.outputs.NAME] sets them, else the case's."""
        own = self.outputs.get(output, OutputLimits())
        return OutputLimits(
            max_abs_err=own.max_abs_err or self.max_abs_err,
            max_rel_err=own.max_rel_err or self.max_rel_err,
            max_cos_diff=own.max_cos_diff or self.max_cos_diff,
        )


class Constraints(_Strict):
    """Default gate thresholds of a kernel; a case may override the tolerance."""

    tolerance: float = Field(1e-2, gt=0, description="max_abs_err of every output (the users' gate)")
    max_rel_err: float | None = Field(None, gt=0, description="optional gate on every output's max relative error")
    max_cos_diff: float | None = Field(None, gt=0, description="optional gate on every output's 1 - cos-sim")
    outputs: dict[str, OutputLimits] = Field(
        default_factory=dict, description="[constraints.outputs.NAME]: limits of one named output (lse …)"
    )
    max_regression_pct: float = Field(3.0, ge=0)
    max_spill_bytes: int = Field(0, ge=0)
    max_registers: int | None = Field(None, gt=0, description="per thread, any CUDA function (optional)")
    max_smem_bytes: int | None = Field(None, gt=0, description="static + dynamic shared memory per block (optional)")
    max_occupancy_drop_pct: float = Field(
        0.0, ge=0, le=100, description="how far a function's warps per SM may fall below base's, in % of base"
    )
    min_warps_per_sm: int | None = Field(
        None, gt=0, le=64, description="resident warps per SM every function must keep (optional)"
    )
    max_speedup: float = Field(
        3.0, gt=1, description="head more than this many times faster than base on a case needs /accept (verify)"
    )


_IDENTIFIER = r"[A-Za-z_][A-Za-z0-9_]*"
Expression = StrictInt | StrictStr


class LaunchFunction(_Strict):
    """How the launcher starts one kernel function: numbers or expressions over the tunables and values."""

    threads: Expression | None = Field(
        None, description="threads per block; None: the function's __launch_bounds__ (.maxntid/.reqntid)"
    )
    dynamic_smem: Expression | None = Field(
        None, description="dynamic shared memory per block in bytes; None: 0, unless the kernel has extern smem"
    )


class Launch(_Strict):
    """`[launch]`: derived values (in order, each may use the tunables and the values above it) and functions.

    A function key is a kernel's name (`gemm_bf16_kernel`) or a qualified one (`"deepgemm_tile::gemm_bf16_kernel"`);
    it describes every compiled instantiation of that name.
    """

    values: dict[str, Expression] = Field(default_factory=dict)
    functions: dict[str, LaunchFunction] = Field(default_factory=dict)

    @field_validator("values")
    @classmethod
    def _value_names(cls, values: dict[str, Expression]) -> dict[str, Expression]:
        for name in values:
            if not re.fullmatch(_IDENTIFIER, name) or name in expr.FUNCTIONS:
                raise ValueError(f"launch.values: {name!r} is not a usable name (letters, digits, _; not min/max)")
        return values

    @field_validator("functions")
    @classmethod
    def _function_names(cls, functions: dict[str, LaunchFunction]) -> dict[str, LaunchFunction]:
        for name in functions:
            if not re.fullmatch(rf"{_IDENTIFIER}(::{_IDENTIFIER})*", name):
                raise ValueError(f"launch.functions: {name!r} is not a function name (name or ns::name)")
        return functions

    def check(self, tunables: set[str]) -> None:
        """Every expression in the allowed language, reading only tunables and values defined above it."""
        known = set(tunables)
        for name, text in self.values.items():
            if name in tunables:
                raise ValueError(f"launch.values.{name}: shadows the tunable of the same name")
            _check_expression(f"launch.values.{name}", text, known)
            known.add(name)
        for function, spec in self.functions.items():
            for field in ("threads", "dynamic_smem"):
                if (text := getattr(spec, field)) is not None:
                    _check_expression(f"launch.functions.{function}.{field}", text, known)


def _check_expression(where: str, text: Expression, known: set[str]) -> None:
    if isinstance(text, int):
        if text < 0:
            raise ValueError(f"{where} = {text}: must not be negative")
        return
    try:
        expr.check(text, known)
    except expr.ExprError as exc:
        raise ValueError(f"{where} = {text!r}: {exc}") from None


class Case(_Strict):
    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    device: Literal["cpu", "cuda"] = "cpu"
    dtype: Literal["float32", "bfloat16", "float16"] = "bfloat16"
    shape: dict[str, int] = Field(default_factory=dict)
    params: dict[str, Any] = Field(default_factory=dict, description="extra inputs for make_inputs")
    tolerance: float | None = Field(None, gt=0)
    seed: int = 0
    holdout: bool = Field(False, description="left out of `opgate tune`'s search; its re-verification runs it")

    def limits(self, constraints: Constraints) -> Limits:
        """The limits this case's outputs are judged by (random inputs and boundary probes alike)."""
        return Limits(
            max_abs_err=self.tolerance or constraints.tolerance,
            max_rel_err=constraints.max_rel_err,
            max_cos_diff=constraints.max_cos_diff,
            outputs=constraints.outputs,
        )


class KernelManifest(_Strict):
    """The contract of one kernel folder; see docs/manifest.md."""

    name: str = Field(pattern=r"^[a-z0-9_]+$")
    domain: str = Field(pattern=r"^[a-z][a-z0-9_]*$", description="one of the repository's configured domains")
    description: str = ""
    globs: list[str] = Field(min_length=1)
    config: str = "tile_config.json"
    task: str = "agent_task.json"
    timeout_s: float = Field(180.0, gt=0)
    tunables: dict[str, list[int | str]] = Field(default_factory=dict)
    build: dict[Literal["cpu", "cuda"], BuildSpec]
    reference: ReferenceSpec = ReferenceSpec()
    constraints: Constraints = Constraints()
    launch: Launch = Launch()
    cases: list[Case] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique_case_names(self) -> KernelManifest:
        names = [case.name for case in self.cases]
        if duplicates := sorted({n for n in names if names.count(n) > 1}):
            raise ValueError(f"duplicate case names: {', '.join(duplicates)}")
        return self

    @field_validator("launch")
    @classmethod
    def _launch_expressions(cls, launch: Launch, info: ValidationInfo) -> Launch:
        launch.check(set(info.data.get("tunables", {})))
        return launch


class Provider(_Strict):
    base_url: str
    api_key_env: str

    @field_validator("api_key_env")
    @classmethod
    def _is_a_variable_name(cls, value: str) -> str:
        if not re.fullmatch(r"[A-Z][A-Z0-9_]*", value):
            raise ValueError("must be the name of an environment variable (A-Z, 0-9, _), never a key")
        return value


REQUIRED_DENY = ("direct_production_db_access", "remote_shell_execution", "secret_exfiltration")


class AgentTask(BaseModel):
    """The users' structured task file (`agent_task.json`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    task_id: str = Field(min_length=1)
    provider: Provider
    model: str = Field(min_length=1)
    target: dict[str, Any]
    constraints: dict[str, str]
    acceptance_outputs: list[str]
    deny: list[str]

    @field_validator("deny")
    @classmethod
    def _denies_the_three(cls, value: list[str]) -> list[str]:
        if missing := [d for d in REQUIRED_DENY if d not in value]:
            raise ValueError(f"deny must list {', '.join(missing)}")
        return value


class Kernel(BaseModel):
    """A manifest loaded from one tree, with its folder, tunable config and task."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    manifest: KernelManifest
    folder: Path
    config: dict[str, Any]
    task: AgentTask | None
    path: str = Field("", description="the kernel's folder relative to the repository root, e.g. kernels/gemm")

    @property
    def name(self) -> str:
        return self.manifest.name

    @property
    def globs(self) -> list[str]:
        return list(self.manifest.globs)


def _first_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err["loc"]) or "(top level)"
    return f"{where}: {err['msg'].removeprefix('Value error, ')}"


def load_task(path: Path) -> AgentTask:
    try:
        return AgentTask.model_validate(json.loads(path.read_text()))
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: not valid JSON: {exc}") from exc
    except ValidationError as exc:
        raise InputError(f"{path}: {_first_error(exc)}") from exc


def load_kernel(folder: Path, *, config: RepoConfig | None = None, path: str | None = None) -> Kernel:
    """Load and validate `folder/kernel.toml` and the files it names.

    With the repository's `config`, its thresholds are the defaults of `[constraints]` and the domain must be
    one it configures. `path` is the folder relative to the repository root (default `kernels/<folder>`).
    """
    where = folder / MANIFEST_NAME
    try:
        raw = tomllib.loads(where.read_text())
    except OSError as exc:
        raise InputError(f"{where}: cannot read: {exc.strerror}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"{where}: not valid TOML: {exc}") from exc
    if config is not None and config.constraints and isinstance(raw.get("constraints", {}), dict):
        raw["constraints"] = {**config.constraints, **raw.get("constraints", {})}
    try:
        manifest = KernelManifest.model_validate(raw)
    except ValidationError as exc:
        raise InputError(f"{where}: {_first_error(exc)}") from exc
    if manifest.name != folder.name:
        raise InputError(f"{where}: name {manifest.name!r} differs from its folder {folder.name!r}")
    if config is not None and (why := config.check_domain(manifest.domain)) is not None:
        raise InputError(f"{where}: {why}")
    config_path = folder / manifest.config
    try:
        tunables = json.loads(config_path.read_text())
    except OSError as exc:
        raise InputError(f"{config_path}: cannot read: {exc.strerror}") from exc
    except json.JSONDecodeError as exc:
        raise InputError(f"{config_path}: not valid JSON: {exc}") from exc
    if not isinstance(tunables, dict):
        raise InputError(f"{config_path}: must be a JSON object of tunables")
    task_path = folder / manifest.task
    task = load_task(task_path) if task_path.exists() else None
    return Kernel(
        manifest=manifest, folder=folder, config=tunables, task=task, path=path or f"{KERNELS_DIR}/{folder.name}"
    )


def find_manifests(tree: Path, globs: list[str]) -> dict[str, str]:
    """Kernel name (its folder's name) -> its folder relative to `tree`, for every kernel.toml the globs match.

    Two kernels with one name in different folders are bad input (a kernel is known by its name)."""
    found: dict[str, str] = {}
    manifests = {m for g in globs for m in tree.glob(g) if m.name == MANIFEST_NAME and m.is_file()}
    for manifest in sorted(manifests):
        rel = manifest.relative_to(tree).as_posix()
        if rel.startswith(".git/"):
            continue
        folder = rel.rpartition("/")[0]
        name = folder.rpartition("/")[2]
        if not folder:
            raise InputError(f"{rel}: a kernel.toml must sit in its kernel's own folder, not the repository root")
        if name in found:
            raise InputError(f"two kernels named {name}: {found[name]}/ and {folder}/; rename one folder")
        found[name] = folder
    return found
