"""Error metrics of kernel outputs against the reference: max abs, max relative, 1 − cos-sim, the first bad index.

Pure tensor arithmetic (float64 on the CPU), called by the judge's `compare`. Every metric is taken over the
elements finite in both tensors; NaN/Inf positions that differ from the reference's are a metric of their own
(`nan_inf`). A limit broken is a `Violation` naming the metric, the output, the first bad element (row-major)
and the values there, so a reason line can point at the row a boundary error lives in.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from bot.config.manifest_tables import Limits, OutputLimits
from bot.models.report import OutputMetrics, Violation

REL_FLOOR = 1e-2  # relative errors are taken against max(|ref|, 1 % of the reference's RMS)


def output_names(count: int, declared: Sequence[str] | None = None) -> list[str]:
    """The reference's OUTPUTS when it names every output, else `out` (one output) or `out0`, `out1` …"""
    if declared is not None and len(declared) == count and len(set(declared)) == count:
        return [str(n) for n in declared]
    return ["out"] if count == 1 else [f"out{i}" for i in range(count)]


def unravel(flat: int, shape: Sequence[int]) -> list[int]:
    """Row-major index of element `flat` in a tensor of `shape`."""
    index = []
    for size in reversed(shape):
        flat, i = divmod(flat, size) if size else (flat, 0)
        index.append(i)
    return index[::-1]


class _Pair:
    """An output and its reference in float64 on the CPU, with the elements finite in both."""

    def __init__(self, out: torch.Tensor, ref: torch.Tensor) -> None:
        self.o = out.detach().to("cpu", torch.float64)
        self.r = ref.detach().to("cpu", torch.float64)
        self.fo, self.fr = torch.isfinite(self.o), torch.isfinite(self.r)
        self.both = self.fo & self.fr
        zero = torch.zeros((), dtype=torch.float64)
        self.diff = torch.where(self.both, (self.o - self.r).abs(), zero)

    def shape(self) -> list[int]:
        return list(self.o.shape)

    def rel(self) -> torch.Tensor:
        ref = torch.where(self.both, self.r, torch.zeros((), dtype=torch.float64))
        count = int(self.both.sum())
        rms = float((ref * ref).sum() / count) ** 0.5 if count else 0.0
        floor = max(REL_FLOOR * rms, 1e-30)
        return self.diff / ref.abs().clamp(min=floor)

    def row_cos_diff(self) -> torch.Tensor:
        """calc_diff of every row (the last dimension), 0 where both rows are zero."""
        last = self.o.shape[-1] if self.o.dim() else 1
        keep = self.both.reshape(-1, last)
        x = torch.where(keep, self.o.reshape(-1, last), 0.0)
        y = torch.where(keep, self.r.reshape(-1, last), 0.0)
        return _calc_diff(x, y, dim=-1)


def _calc_diff(x: torch.Tensor, y: torch.Tensor, dim: int | None = None) -> torch.Tensor:
    """DeepGEMM's calc_diff: 1 - 2 sum(x y) / sum(x^2 + y^2); 0 for two zero tensors, never below 0."""
    sxy = (x * y).sum() if dim is None else (x * y).sum(dim)
    sq = (x * x + y * y).sum() if dim is None else (x * x + y * y).sum(dim)
    sim = torch.where(sq > 0, 2.0 * sxy / torch.where(sq > 0, sq, 1.0), 1.0)
    return (1.0 - sim).clamp(min=0.0)


def _measure(name: str, pair: _Pair) -> OutputMetrics:
    """Every metric of one output, over the elements finite in both (0 when there are none): max |out - ref|,
    max |out - ref| / max(|ref|, REL_FLOOR x RMS(ref)), and 1 - cos-sim as DeepGEMM's calc_diff computes it."""
    if not pair.diff.numel():
        return OutputMetrics(name=name, max_abs_err=0.0, max_rel_err=0.0, cos_diff=0.0)
    worst = int(pair.diff.reshape(-1).argmax())
    return OutputMetrics(
        name=name,
        max_abs_err=float(pair.diff.reshape(-1)[worst]),
        max_rel_err=float(pair.rel().max()),
        cos_diff=float(_calc_diff(pair.o[pair.both], pair.r[pair.both])),
        nan_inf=not torch.equal(pair.fo, pair.fr),
        worst_index=unravel(worst, pair.shape()),
    )


def _first(mask: torch.Tensor) -> int:
    """Flat index of the first True element (row-major)."""
    return int(mask.reshape(-1).to(torch.uint8).argmax())


def _violation(name: str, pair: _Pair, limits: OutputLimits) -> Violation | None:
    """The first limit this output breaks (nan_inf, max_abs_err, max_rel_err, cos_diff, in this order), with its
    first bad element; None if within all."""
    if not pair.diff.numel():
        return None
    shape = pair.shape()

    def at(flat: int, metric: str, value: float, limit: float | None) -> Violation:
        return Violation(
            metric=metric,  # type: ignore[arg-type]
            output=name,
            index=unravel(flat, shape),
            value=value,
            limit=limit,
            got=float(pair.o.reshape(-1)[flat]),
            expected=float(pair.r.reshape(-1)[flat]),
        )

    if not torch.equal(pair.fo, pair.fr):
        return at(_first(pair.fo != pair.fr), "nan_inf", 1.0, None)
    if limits.max_abs_err is not None and (bad := pair.diff > limits.max_abs_err).any():
        return at(_first(bad), "max_abs_err", float(pair.diff.max()), limits.max_abs_err)
    if limits.max_rel_err is not None:
        rel = pair.rel()
        if (bad := rel > limits.max_rel_err).any():
            return at(_first(bad), "max_rel_err", float(rel.max()), limits.max_rel_err)
    if limits.max_cos_diff is not None:
        whole = float(_calc_diff(pair.o[pair.both], pair.r[pair.both]))
        if whole > limits.max_cos_diff:
            rows = pair.row_cos_diff()
            bad = rows > limits.max_cos_diff
            row = _first(bad) if bad.any() else int(rows.argmax())
            index = unravel(row, shape[:-1]) if len(shape) > 1 else []
            return Violation(metric="cos_diff", output=name, index=index, value=whole, limit=limits.max_cos_diff)
    return None


def evaluate(
    outs: Sequence[torch.Tensor], refs: Sequence[torch.Tensor], names: Sequence[str], limits: Limits | None
) -> tuple[list[OutputMetrics], Violation | None]:
    """Metrics of every output and, given limits, the first limit broken (outputs in order)."""
    metrics: list[OutputMetrics] = []
    first: Violation | None = None
    for n, o, r in zip(names, outs, refs, strict=True):
        pair = _Pair(o, r)
        metrics.append(_measure(n, pair))
        if limits is not None and first is None:
            first = _violation(n, pair, limits.of(n))
    return metrics, first
