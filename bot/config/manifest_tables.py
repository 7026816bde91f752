"""The tables of a kernel.toml, each its own model: build, reference, limits, constraints, launch, work, buffers,
cases and the agent's bounds; a path inside the repository; a validation error as one line."""

from __future__ import annotations

import re
from typing import Any, Literal

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
from bot.models.finding import Phrase


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
        default_factory=list,
        description="arguments the entry may use as work space (zeroed for each call, left zeroed; never compared)",
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


def _evaluated(text: Expression, shape: dict[str, int]) -> int:
    """An expression of the manifest over a case's shape (its names checked first); expr.ExprError otherwise."""
    if isinstance(text, str):
        expr.check(text, set(shape))
    return expr.value(text, shape)


def _amount(key: str, text: Expression, shape: dict[str, int]) -> int:
    """The value of a case's `flops`/`bytes` over its shape (ValueError naming the expression otherwise)."""
    try:
        amount = _evaluated(text, shape)
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
                dim = _evaluated(text, shape)
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


def _first_error(exc: ValidationError, model: type[BaseModel] | None = None) -> str:
    err = exc.errors()[0]
    where = ".".join(str(p) for p in err["loc"]) or "(top level)"
    hint = keys.did_you_mean(model, err["loc"]) if model is not None and err["type"] == "extra_forbidden" else ""
    return f"{where}: {err['msg'].removeprefix('Value error, ')}{hint}"
