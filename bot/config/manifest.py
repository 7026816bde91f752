"""Kernel manifests (`<root>/<name>/kernel.toml`) and tunable configs: where a repository keeps them, the whole
manifest with its checks across tables (the tables are manifest_tables.py's), and one kernel loaded from its folder."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path
from typing import Any, Literal, Protocol

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from bot.config.key_lines import key_lines
from bot.config.manifest_tables import (
    AgentCases,
    Buffer,
    BuildSpec,
    Case,
    Constraints,
    Launch,
    ReferenceSpec,
    Work,
    _amount,
    _first_error,
    _Strict,
)
from bot.config.task import AgentTask, load_task
from bot.errors import InputError

KERNELS_DIR = "kernels"  # the default root (RepoConfig.manifests: kernels/*/kernel.toml)
MANIFEST_NAME = "kernel.toml"
ROOT = "."  # the folder of a kernel whose kernel.toml sits at the repository root (`Kernel.path`)


def repo_file(folder: str, rel: str) -> str:
    """A file of the kernel folder `folder` (from the repository root) as a path from the repository root."""
    return rel if folder == ROOT else f"{folder}/{rel}"


def in_folder(folder: str, path: str) -> str | None:
    """A repository path relative to the kernel folder `folder`; None when it lies outside it."""
    if folder == ROOT:
        return path
    return path.removeprefix(f"{folder}/") if path.startswith(f"{folder}/") else None


def folder_glob(folder: str) -> str:
    """What touches a kernel whose manifest does not load: its folder, or at the root its kernel.toml."""
    return MANIFEST_NAME if folder == ROOT else f"{folder}/**"


def root_glob_problem(globs: list[str]) -> str | None:
    """Why a root kernel's globs would make the whole repository its sources (`**`, `*`, `**/…`), or None: at the
    root only the files the globs name are the kernel's (docs/, tests/, .github/ are not)."""
    wide = [g for g in globs if g.split("/")[0] in ("**", "*") or g.startswith("**")]
    if not wide:
        return None
    return (
        f"globs {', '.join(repr(g) for g in wide)}: a kernel at the repository root names its own files "
        '("*.cu", "main.cpp", "csrc/**"), never the whole repository (docs/, tests/, .github/ are not its sources)'
    )


class RepoDefaults(Protocol):
    """What `load_kernel` reads of the repository's config (a `bot.config.repo.RepoConfig`; repo.py imports this
    module, so this module names only the two things it reads, and the import goes one way)."""

    @property
    def constraints(self) -> dict[str, Any]: ...

    def check_domain(self, domain: str) -> str | None: ...


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
    work: Work = Work()
    buffers: dict[str, Buffer] = Field(
        default_factory=dict, description="the shape and dtype of each output and scratch argument the builds name"
    )
    cases: list[Case] = Field(
        default_factory=list, description="none: a resource-only kernel (compile-only checks, no reference needed)"
    )
    agent_cases: AgentCases | None = Field(
        None, description="bounds of the cases the agent may add (none: the agent's test matrix is not run)"
    )

    @model_validator(mode="after")
    def _agent_bounds(self) -> KernelManifest:
        """[agent_cases] bounds every shape key the cases of its device have, and every scalar the entry takes."""
        bounds = self.agent_cases
        if bounds is None:
            return self
        on = [c for c in self.cases if c.device == bounds.device]
        if not on or (spec := self.build.get(bounds.device)) is None:
            raise ValueError(f"agent_cases: no {bounds.device} case with a build to model agent cases on")
        keys = sorted({k for c in on for k in c.shape})
        if missing := [k for k in keys if k not in bounds.shape]:
            raise ValueError(
                f"agent_cases.shape: no bound for {', '.join(missing)} (the {bounds.device} cases' shape keys; "
                f"a fixed value is a range of one, {missing[0]} = [128, 128])"
            )
        if extra := [k for k in bounds.shape if k not in keys]:
            raise ValueError(f"agent_cases.shape: {', '.join(extra)} is no shape key of a {bounds.device} case")
        if missing := [n for n in [*spec.args, *spec.kwargs] if n not in bounds.params]:
            raise ValueError(f"agent_cases.params: no bound for {', '.join(missing)} (the entry takes it)")
        return self

    @model_validator(mode="after")
    def _unique_case_names(self) -> KernelManifest:
        names = [case.name for case in self.cases]
        if duplicates := sorted({n for n in names if names.count(n) > 1}):
            raise ValueError(f"duplicate case names: {', '.join(duplicates)}")
        for device, spec in self.build.items():
            if not spec.entry and any(case.device == device for case in self.cases):
                raise ValueError(f"build.{device}.entry: required when a case runs on {device}")
        return self

    @model_validator(mode="after")
    def _case_work(self) -> KernelManifest:
        """Every case without its own `flops`/`bytes` takes [work]'s, which must evaluate over its shape."""
        defaults = {k: v for k, v in self.work.model_dump().items() if v is not None}
        if not defaults:
            return self
        cases = []
        for case in self.cases:
            update = {k: v for k, v in defaults.items() if getattr(case, k) is None}
            for key, text in update.items():
                try:
                    _amount(key, text, case.shape)
                except ValueError as exc:
                    raise ValueError(f"work.{key} over case {case.name}'s shape: {exc}") from None
            cases.append(case.model_copy(update=update) if update else case)
        self.__dict__["cases"] = cases  # frozen: the validated cases, each with its work
        return self

    @model_validator(mode="after")
    def _cubin_is_cuda(self) -> KernelManifest:
        cpu = self.build.get("cpu")
        if cpu is not None and cpu.ships != "object":
            raise ValueError(f'build.cpu.ships = "{cpu.ships}": only [build.cuda] ships a cubin')
        return self

    @model_validator(mode="after")
    def _case_architectures(self) -> KernelManifest:
        shipped = self.constraints.architectures
        for case in self.cases:
            if case.arch is not None and case.device != "cuda":
                raise ValueError(f"case {case.name}: arch = {case.arch!r} names a GPU, but it runs on {case.device}")
            if case.arch is not None and case.arch not in shipped:
                raise ValueError(
                    f"case {case.name}: arch = {case.arch!r} is not one the kernel ships for "
                    f"(constraints.architectures: {', '.join(shipped)})"
                )
        return self

    @model_validator(mode="after")
    def _cases_give_the_scalars(self) -> KernelManifest:
        """Every case gives each scalar its device's build passes to the entry (args, kwargs): an int, float or bool."""
        for i, case in enumerate(self.cases):
            spec = self.build.get(case.device)
            for name in [*spec.args, *spec.kwargs] if spec is not None else []:
                where = f"cases[{i}] ({case.name}): params.{name}"
                if name not in case.params:
                    raise ValueError(f"{where} is missing: [build.{case.device}] passes it to the entry")
                if not isinstance(case.params[name], (int, float, bool)):
                    raise ValueError(f"{where} = {case.params[name]!r}: the entry takes an int, float or bool")
        return self

    @model_validator(mode="after")
    def _buffers_have_shapes(self) -> KernelManifest:
        """Every output and scratch argument has `[buffers.NAME]`, whose shape evaluates over every case's shape."""
        named = {
            n: f"build.{device}.{key}"
            for device, spec in self.build.items()
            for key, names in (("outputs", spec.outputs), ("scratch", spec.scratch))
            for n in names
        }
        for name, where in named.items():
            if name not in self.buffers:
                raise ValueError(
                    f'{where} names {name!r}, but no [buffers.{name}] gives its shape (e.g. shape = ["m", "n"], '
                    "over the case's shape)"
                )
        for name in self.buffers:
            if name not in named:
                raise ValueError(f"buffers.{name}: no build names {name!r} among its outputs or scratch")
        for case in self.cases:
            spec = self.build.get(case.device)
            for name in [*spec.outputs, *spec.scratch] if spec is not None else []:
                try:
                    self.buffers[name].resolve(case.shape, case.dtype)
                except ValueError as exc:
                    raise ValueError(f"buffers.{name}.shape over case {case.name}'s shape: {exc}") from None
        return self

    def written(self, case: Case) -> list[dict[str, Any]]:
        """The arguments the judge allocates for `case`: name, role (output | scratch), shape, dtype; outputs first."""
        spec = self.build.get(case.device)
        if spec is None:
            return []
        roles = [(n, "output") for n in spec.outputs] + [(n, "scratch") for n in spec.scratch]
        out = []
        for name, role in roles:
            dims, dtype = self.buffers[name].resolve(case.shape, case.dtype)
            out.append({"name": name, "role": role, "shape": dims, "dtype": dtype})
        return out

    @field_validator("launch")
    @classmethod
    def _launch_expressions(cls, launch: Launch, info: ValidationInfo) -> Launch:
        launch.check(set(info.data.get("tunables", {})))
        return launch


class Kernel(BaseModel):
    """A manifest loaded from one tree, with its folder, tunable config and task."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    manifest: KernelManifest
    folder: Path
    config: dict[str, Any]
    task: AgentTask | None
    config_lines: dict[str, int] = Field(
        default_factory=dict, description="each tunable's line in the config file (a finding's annotation lands there)"
    )
    path: str = Field("", description="the kernel's folder relative to the repository root, e.g. kernels/gemm")

    @property
    def name(self) -> str:
        return self.manifest.name

    @property
    def globs(self) -> list[str]:
        return list(self.manifest.globs)


def load_kernel(folder: Path, *, config: RepoDefaults | None = None, path: str | None = None) -> Kernel:
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
        raise InputError(f"{where}: {_first_error(exc, KernelManifest)}") from exc
    if config is not None and (why := config.check_domain(manifest.domain)) is not None:
        raise InputError(f"{where}: {why}")
    config_path = folder / manifest.config
    config_text = "{}"
    try:
        config_text = config_path.read_text()
        tunables = json.loads(config_text)
    except FileNotFoundError as exc:
        if manifest.tunables:
            raise InputError(f"{config_path}: cannot read: {exc.strerror}") from exc
        tunables = {}  # no tunables declared: no config file needed
    except OSError as exc:
        raise InputError(f"{config_path}: cannot read: {exc.strerror}") from exc
    except json.JSONDecodeError as exc:
        raise InputError(f"{config_path}: not valid JSON: {exc}") from exc
    if not isinstance(tunables, dict):
        raise InputError(f"{config_path}: must be a JSON object of tunables")
    if path == ROOT and (why := root_glob_problem(manifest.globs)) is not None:
        raise InputError(f"{where}: {why}")
    task_path = folder / manifest.task
    task = load_task(task_path) if task_path.exists() else None
    return Kernel(
        manifest=manifest,
        folder=folder,
        config=tunables,
        config_lines=key_lines(config_text),
        task=task,
        path=path or f"{KERNELS_DIR}/{folder.name}",
    )


def manifest_name(path: Path, *, fallback: str | None = None) -> str:
    """The kernel's name as its manifest says (`name`), else `fallback` or its folder's (a manifest that does not
    parse is reported when it is loaded)."""
    try:
        name = tomllib.loads(path.read_text()).get("name")
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        name = None
    return name if isinstance(name, str) and re.fullmatch(r"[a-z0-9_]+", name) else fallback or path.parent.name


def find_manifests(tree: Path, globs: list[str]) -> dict[str, str]:
    """Kernel name -> its folder relative to `tree`, for every kernel.toml the globs match (`ROOT` for one at the
    repository root: its globs, not its folder, say which files are its own).

    A kernel is known by its manifest's `name` (which may differ from its folder's); two kernels with one name
    are bad input."""
    found: dict[str, str] = {}
    manifests = {m for g in globs for m in tree.glob(g) if m.name == MANIFEST_NAME and m.is_file()}
    for manifest in sorted(manifests):
        rel = manifest.relative_to(tree).as_posix()
        if rel.startswith(".git/"):
            continue
        folder = rel.rpartition("/")[0] or ROOT
        # a root kernel.toml that does not parse: "root", not the checkout's folder name (each worktree's differs)
        name = manifest_name(manifest, fallback="root" if folder == ROOT else None)
        if name in found:
            raise InputError(
                f"two kernels named {name}: {found[name]}/ and {folder}/; rename one (its kernel.toml's name)"
            )
        found[name] = folder
    return found
