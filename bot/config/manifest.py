"""Kernel manifests (`<root>/<name>/kernel.toml`), tunable configs and agent task files."""

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
    StrictInt,
    StrictStr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from bot.config import expr, keys
from bot.config.key_lines import key_lines
from bot.errors import InputError
from bot.models.finding import Phrase

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


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


_REPO_PATH = re.compile(r"[A-Za-z0-9_.+@-]+(/[A-Za-z0-9_.+@-]+)*")


def repo_path(where: str, value: str) -> str:
    """A path inside the repository as a manifest writes it: relative, `/`-separated, no `.`/`..` part."""
    value = value.rstrip("/")
    if not _REPO_PATH.fullmatch(value) or any(part in (".", "..") for part in value.split("/")):
        raise ValueError(f"{where}: {value!r} is not a relative path inside the repository (no /, .. or spaces)")
    return value


class BuildSpec(_Strict):
    """How to build the kernel for one device with torch.utils.cpp_extension."""

    sources: list[str] = Field(min_length=1)
    cflags: list[str] = Field(default_factory=list)
    cuda_cflags: list[str] = Field(default_factory=list)
    ships: Literal["object", "cubin"] = Field(
        "object",
        description="how the CUDA build ships each .cu: an object with its fatbin (`nvcc -c`, the default), or a "
        "cubin a JIT loads (`nvcc -cubin -arch=sm_90a`: one architecture's machine code, no PTX beside it); the "
        "resource check compiles it that way",
    )
    include_dirs: list[str] = Field(
        default_factory=list, description="include directories, relative to the repository root (-I for every unit)"
    )
    entry: str = Field(
        "",
        description="what each case calls: a function of the built pybind module, or torch.ops.NAMESPACE.OP "
        "(a TORCH_LIBRARY op; the library is loaded with torch.ops.load_library); needed when a case runs",
    )
    args: list[str] = Field(
        default_factory=list, description="case params passed after the input tensors, by position, in this order"
    )
    kwargs: list[str] = Field(default_factory=list, description="case params passed by name")
    arguments: list[str] = Field(
        default_factory=list,
        description="the entry's positional arguments in order (make_inputs' tensors, outputs, scratch, args), "
        "needed with outputs or scratch",
    )
    outputs: list[str] = Field(
        default_factory=list,
        description="arguments the entry writes in place (the judge allocates them poisoned, then compares them)",
    )
    scratch: list[str] = Field(
        default_factory=list, description="arguments the entry may use as work space (allocated zeroed, never compared)"
    )

    @field_validator("include_dirs")
    @classmethod
    def _inside(cls, dirs: list[str]) -> list[str]:
        return [repo_path("include_dirs", d) for d in dirs]

    @model_validator(mode="after")
    def _scalars_named_once(self) -> BuildSpec:
        names = [*self.args, *self.kwargs]
        if duplicates := sorted({n for n in names if names.count(n) > 1}):
            raise ValueError(f"args/kwargs name {', '.join(duplicates)} twice")
        return self

    @model_validator(mode="after")
    def _written_arguments(self) -> BuildSpec:
        """Outputs and scratch are named arguments of the entry; with them, `arguments` lists every positional one."""
        named = [*self.outputs, *self.scratch]
        if not named and not self.arguments:
            return self
        if not self.arguments:
            raise ValueError(
                "outputs/scratch need `arguments`, the entry's positional arguments in order "
                '(e.g. arguments = ["A", "B", "C", "workspace"])'
            )
        if duplicates := sorted({n for n in self.arguments if self.arguments.count(n) > 1}):
            raise ValueError(f"arguments name {', '.join(duplicates)} twice")
        if not self.outputs:
            raise ValueError(
                "arguments/scratch need `outputs`: the arguments the entry writes, compared with the reference"
            )
        if both := sorted(set(self.outputs) & set(self.scratch)):
            raise ValueError(f"{', '.join(both)} is both an output and scratch")
        for key, names in (("outputs", self.outputs), ("scratch", self.scratch), ("args", self.args)):
            for name in names:
                if name not in self.arguments:
                    raise ValueError(f"{key}: {name!r} is not an argument of the entry (arguments = {self.arguments})")
        if clash := sorted(set(self.kwargs) & set(self.arguments)):
            raise ValueError(f"kwargs: {', '.join(clash)} is passed by name, not among the positional arguments")
        return self

    def inputs(self) -> list[str]:
        """The names `arguments` gives make_inputs' tensors, in order (empty without `arguments`)."""
        taken = {*self.outputs, *self.scratch, *self.args}
        return [n for n in self.arguments if n not in taken]


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


DEFAULT_ARCH = "sm_90a"  # what a kernel ships for when neither [thresholds] nor its manifest names any
ARCH = re.compile(r"sm_[1-9][0-9]{1,2}[af]?")


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
    architectures: list[str] = Field(
        default_factory=lambda: [DEFAULT_ARCH],
        min_length=1,
        description="GPU targets the kernel ships for (sm_90a, sm_100a …): the resource gate runs for each",
    )

    @field_validator("architectures")
    @classmethod
    def _architectures(cls, value: list[str]) -> list[str]:
        for arch in value:
            if not ARCH.fullmatch(arch):
                raise ValueError(f"{arch!r} is not a GPU target such as sm_90a or sm_100a")
        if len(set(value)) != len(value):
            raise ValueError(f"an architecture is named twice: {', '.join(value)}")
        return value


_IDENTIFIER = r"[A-Za-z_][A-Za-z0-9_]*"
Expression = StrictInt | StrictStr


class LaunchFunction(_Strict):
    """How the launcher starts one kernel function: numbers or expressions over the tunables and values."""

    threads: Expression | None = Field(
        None, description="threads per block; None: the function's __launch_bounds__ (.maxntid/.reqntid)"
    )
    dynamic_smem: Expression | None = Field(
        None,
        description="dynamic shared memory per block in bytes; None: 0, unless the kernel has extern smem. "
        "A C++ expression with sizeof(…) is evaluated by compiling a probe with the kernel's flags",
    )


class Launch(_Strict):
    """`[launch]`: derived values (in order, each may use the tunables and the values above it) and functions.

    A function key is a kernel's name (`gemm_bf16_kernel`) or a qualified one (`"deepgemm_tile::gemm_bf16_kernel"`),
    which describes every compiled instantiation of that name, or one instantiation as ptxas' demangled name gives
    it (`"gemm<128, 3>"`), which describes that one and wins over the name.
    """

    values: dict[str, Expression] = Field(default_factory=dict)
    functions: dict[str, LaunchFunction] = Field(default_factory=dict)
    headers: list[str] = Field(
        default_factory=list, description="headers a sizeof(…) expression needs, from the kernel folder or include_dirs"
    )

    @field_validator("headers")
    @classmethod
    def _header_paths(cls, headers: list[str]) -> list[str]:
        return [repo_path("launch.headers", h) for h in headers]

    def cxx_expressions(self) -> list[str]:
        """Every dynamic_smem that is a C++ expression (holds sizeof), in order, once each."""
        found = [f.dynamic_smem for f in self.functions.values() if isinstance(f.dynamic_smem, str)]
        return list(dict.fromkeys(e for e in found if is_cxx(e)))

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
            if not re.fullmatch(rf"{_IDENTIFIER}(::{_IDENTIFIER})*(<[\w:, ]+>)?", name):
                raise ValueError(
                    f"launch.functions: {name!r} is not a function name (name, ns::name or one instantiation, "
                    "ns::name<128, 3>)"
                )
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
                if (text := getattr(spec, field)) is None:
                    continue
                where = f"launch.functions.{function}.{field}"
                if field == "dynamic_smem" and isinstance(text, str) and is_cxx(text):
                    _check_cxx(where, text)
                else:
                    _check_expression(where, text, known)


_SIZEOF = re.compile(r"\b(sizeof|alignof)\s*\(")
_CXX = re.compile(r"[A-Za-z0-9_:<>,()*+/ -]{1,400}")


def is_cxx(text: str) -> bool:
    """A dynamic_smem written in C++ (it asks sizeof/alignof of a type), not in opgate's expression language."""
    return bool(_SIZEOF.search(text))


def _check_cxx(where: str, text: str) -> None:
    """One C++ constant expression (types, ::, <…>, sizeof, arithmetic): nothing that can end or add a statement."""
    depth = 0
    for ch in text:
        depth += {"(": 1, ")": -1}.get(ch, 0)
        if depth < 0:
            break
    if not _CXX.fullmatch(text) or depth != 0 or "//" in text or "/*" in text:
        raise ValueError(
            f"{where} = {text!r}: a C++ expression may hold names, numbers, ::, <>, commas, balanced parentheses "
            "and + - * / (at most 400 characters)"
        )


def _check_expression(where: str, text: Expression, known: set[str]) -> None:
    if isinstance(text, int):
        if text < 0:
            raise ValueError(f"{where} = {text}: must not be negative")
        return
    try:
        expr.check(text, known)
    except expr.ExprError as exc:
        raise ValueError(f"{where} = {text!r}: {exc}") from None


class Work(_Strict):
    """`[work]`: the work of one call of every case that declares none itself, as expressions over its shape."""

    flops: Expression | None = Field(None, description='floating-point operations, e.g. "2*m*n*k"')
    bytes: Expression | None = Field(None, description='bytes moved to and from memory, e.g. "2*(m*k + k*n) + 4*m*n"')


def _amount(key: str, text: Expression, shape: dict[str, int]) -> int:
    """The value of a case's `flops`/`bytes` over its shape (ValueError naming the expression otherwise)."""
    try:
        if isinstance(text, str):
            expr.check(text, set(shape))
        amount = expr.value(text, shape)
    except expr.ExprError as exc:
        raise ValueError(f"{key} = {text!r}: {exc}") from None
    if amount <= 0:
        raise ValueError(f"{key} = {text!r} is {amount}: the work of one call must be positive")
    return amount


BufferDtype = Literal[
    "float64", "float32", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8", "bool"
]  # fmt: skip


class Buffer(_Strict):
    """`[buffers.NAME]`: an output or scratch argument the judge allocates for every call, from the case's shape."""

    shape: list[Expression] = Field(description='its dimensions as expressions over the case\'s shape: ["m", "n"]')
    dtype: BufferDtype | None = Field(None, description="its dtype (default: the case's dtype)")

    def resolve(self, shape: dict[str, int], case_dtype: str) -> tuple[list[int], str]:
        """(dimensions, dtype) for one case; ValueError naming the expression when a dimension does not evaluate."""
        dims = []
        for text in self.shape:
            try:
                if isinstance(text, str):
                    expr.check(text, set(shape))
                dim = expr.value(text, shape)
            except expr.ExprError as exc:
                raise ValueError(f"{text!r}: {exc}") from None
            if dim < 0:
                raise ValueError(f"{text!r} is {dim}: a dimension cannot be negative")
            dims.append(dim)
        return dims, self.dtype or case_dtype


class Case(_Strict):
    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    device: Literal["cpu", "cuda"] = "cpu"
    dtype: Literal["float32", "bfloat16", "float16"] = "bfloat16"
    shape: dict[str, int] = Field(default_factory=dict)
    params: dict[str, Any] = Field(default_factory=dict, description="extra inputs for make_inputs")
    tolerance: float | None = Field(None, gt=0)
    seed: int = 0
    holdout: bool = Field(False, description="left out of `opgate tune`'s search; its re-verification runs it")
    arch: str | None = Field(
        None, description="the GPU architecture this cuda case runs on (sm_100a: only on a B200 runner)"
    )
    flops: Expression | None = Field(None, description="floating-point operations of one call, over the shape")
    bytes: Expression | None = Field(None, description="bytes one call must move to and from memory, over the shape")

    @field_validator("arch")
    @classmethod
    def _arch(cls, value: str | None) -> str | None:
        if value is not None and not ARCH.fullmatch(value):
            raise ValueError(f"{value!r} is not a GPU target such as sm_90a or sm_100a")
        return value

    @field_validator("flops", "bytes")
    @classmethod
    def _work(cls, text: Expression | None, info: ValidationInfo) -> Expression | None:
        if text is not None:  # every expression of the work evaluates over the shape (a bad one is bad input)
            _amount(str(info.field_name), text, info.data.get("shape", {}))
        return text

    def work(self) -> tuple[int | None, int | None]:
        """(flops, bytes) of one call, from `flops`/`bytes` over the shape; None where not declared."""
        return (
            None if self.flops is None else _amount("flops", self.flops, self.shape),
            None if self.bytes is None else _amount("bytes", self.bytes, self.shape),
        )

    def limits(self, constraints: Constraints) -> Limits:
        """The limits this case's outputs are judged by (random inputs and boundary probes alike)."""
        return Limits(
            max_abs_err=self.tolerance or constraints.tolerance,
            max_rel_err=constraints.max_rel_err,
            max_cos_diff=constraints.max_cos_diff,
            outputs=constraints.outputs,
        )


class AgentBound(_Strict):
    """`[agent_cases.shape]` / `[agent_cases.params]` entry: the integers an agent case may give one key."""

    range: tuple[int, int] = Field(description="[lo, hi], both included")
    multiple_of: int | None = Field(None, gt=0, description="the value must be a multiple of this")

    @model_validator(mode="before")
    @classmethod
    def _short_form(cls, value: Any) -> Any:
        return {"range": value} if isinstance(value, list) else value  # m = [1, 256]: the range alone

    @model_validator(mode="after")
    def _not_empty(self) -> AgentBound:
        lo, hi = self.range
        if lo > hi:
            raise ValueError(f"range [{lo}, {hi}]: lo is above hi")
        if self.multiple_of is not None and hi // self.multiple_of * self.multiple_of < lo:
            raise ValueError(f"range [{lo}, {hi}] holds no multiple of {self.multiple_of}")
        return self

    def problem(self, value: Any) -> Phrase | None:
        """Why `value` is outside this bound (or not an integer), else None: a phrase of the findings' catalog
        (bot/wording/messages.py `bound.*`)."""
        if isinstance(value, bool) or not isinstance(value, int):
            return Phrase(key="bound.not_integer", params={"value": repr(value)[:40]})
        lo, hi = self.range
        if not lo <= value <= hi:
            return Phrase(key="bound.outside", params={"value": value, "lo": lo, "hi": hi})
        if self.multiple_of is not None and value % self.multiple_of:
            return Phrase(key="bound.not_multiple", params={"value": value, "multiple": self.multiple_of})
        return None


class AgentCases(_Strict):
    """`[agent_cases]`: the cases the agent's test matrix may add (base's table bounds them; no table: none)."""

    max_cases: int = Field(4, ge=0, le=32, description="at most this many agent cases per review")
    device: Literal["cpu", "cuda"] = Field("cpu", description="where agent cases run")
    dtype: Literal["float32", "bfloat16", "float16"] | None = Field(
        None, description="their dtype (default: the first manifest case's on that device)"
    )
    shape: dict[str, AgentBound] = Field(default_factory=dict, description="every shape key an agent case gives")
    params: dict[str, AgentBound] = Field(default_factory=dict, description="the params an agent case may give")


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


def _first_error(exc: ValidationError, model: type[BaseModel] | None = None) -> str:
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err["loc"]) or "(top level)"
    hint = keys.did_you_mean(model, err["loc"]) if model is not None and err["type"] == "extra_forbidden" else ""
    return f"{where}: {err['msg'].removeprefix('Value error, ')}{hint}"


def load_task(path: Path) -> AgentTask:
    try:
        return AgentTask.model_validate(json.loads(path.read_text()))
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: not valid JSON: {exc}") from exc
    except ValidationError as exc:
        raise InputError(f"{path}: {_first_error(exc)}") from exc


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
