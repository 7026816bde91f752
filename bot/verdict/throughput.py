"""How close a case runs to the hardware: achieved TFLOP/s and GB/s from its declared work, the share of the
device's peak, and "implausible" above it (pure; the peaks of known GPUs are NVIDIA's data-sheet figures)."""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

from bot.models.report import CaseReport, Throughput

IMPLAUSIBLE = "implausible"  # the gate a case above the hardware limit fails (bot/verdict/gate.py CASE_GATES)

# NVIDIA's data sheets give tensor-core figures "with sparsity"; the dense rate is half of it. Bandwidth is HBM's.
H100_SHEET = "NVIDIA H100 Tensor Core GPU data sheet (nvidia.com/en-us/data-center/h100): BF16 Tensor Core, sparse"
H200_SHEET = "NVIDIA H200 Tensor Core GPU data sheet (nvidia.com/en-us/data-center/h200): BF16 Tensor Core, sparse"
B200_SHEET = "NVIDIA HGX B200 / DGX B200 data sheets (nvidia.com/en-us/data-center/hgx, /dgx-b200): per-GPU FP16/BF16"


@dataclass(frozen=True)
class Device:
    """One GPU model's peaks: dense bf16 tensor-core TFLOP/s (the ceiling of every dtype a case may use:
    float32, float16 and bfloat16 all run at or below it) and memory bandwidth."""

    match: str  # a lower-case part of the name nvidia-smi reports ("NVIDIA H100 80GB HBM3" -> "h100")
    label: str
    tflops: float
    gbps: float
    source: str


# The most specific name first: "NVIDIA H100 NVL" is not an SXM H100.
DEVICES: tuple[Device, ...] = (
    Device("h100 nvl", "NVIDIA H100 NVL", 1_671 / 2, 3_900, f"{H100_SHEET} 1,671 TFLOPS; 3.9 TB/s"),
    Device("h100 pcie", "NVIDIA H100 PCIe", 1_513 / 2, 2_000, f"{H100_SHEET} 1,513 TFLOPS; 2 TB/s"),
    Device("h100", "NVIDIA H100 SXM", 1_979 / 2, 3_350, f"{H100_SHEET} 1,979 TFLOPS; 3.35 TB/s"),
    Device("h200 nvl", "NVIDIA H200 NVL", 1_671 / 2, 4_800, f"{H200_SHEET} 1,671 TFLOPS; 4.8 TB/s"),
    Device("h200", "NVIDIA H200 SXM", 1_979 / 2, 4_800, f"{H200_SHEET} 1,979 TFLOPS; 4.8 TB/s"),
    Device("b200", "NVIDIA B200", 4_500 / 2, 8_000, f"{B200_SHEET} 4.5 PFLOPS with sparsity; 8 TB/s HBM3e"),
)


class Peak(BaseModel):
    """What one device can do at most: compute in TFLOP/s and memory traffic in GB/s, and whose figures."""

    model_config = ConfigDict(frozen=True)

    tflops: float = Field(gt=0)
    gbps: float = Field(gt=0)
    of: str = Field(description="a data-sheet row (a GPU), or how this CPU runner measured itself")


def device_peak(gpu: str | None) -> Peak | None:
    """The data-sheet peak of the GPU nvidia-smi names; None for a GPU the table does not know."""
    name = (gpu or "").lower()
    for d in DEVICES:
        if d.match in name:
            return Peak(tflops=d.tflops, gbps=d.gbps, of=f"{d.label} ({d.source})")
    return None


def _rate(amount: int | None, ms: float | None, scale: float) -> float | None:
    return None if amount is None or not ms or ms <= 0 else amount / (ms * 1e-3) / scale


def _pct(rate: float | None, peak: float | None) -> float | None:
    return None if rate is None or not peak else round(100.0 * rate / peak, 2)


def throughput(flops: int | None, nbytes: int | None, report: CaseReport, peak: Peak | None) -> Throughput | None:
    """Achieved TFLOP/s and GB/s of head and base at their p50, and their share of `peak`; None without work."""
    if flops is None and nbytes is None:
        return None
    t = Throughput(
        flops=flops,
        bytes=nbytes,
        head_tflops=_rate(flops, report.p50_ms, 1e12),
        base_tflops=_rate(flops, report.base_p50_ms, 1e12),
        head_gbps=_rate(nbytes, report.p50_ms, 1e9),
        base_gbps=_rate(nbytes, report.base_p50_ms, 1e9),
        peak_tflops=peak.tflops if peak else None,
        peak_gbps=peak.gbps if peak else None,
        peak_of=peak.of if peak else "",
    )
    return t.model_copy(
        update={
            "head_flops_pct": _pct(t.head_tflops, t.peak_tflops),
            "head_bytes_pct": _pct(t.head_gbps, t.peak_gbps),
            "base_flops_pct": _pct(t.base_tflops, t.peak_tflops),
            "base_bytes_pct": _pct(t.base_gbps, t.peak_gbps),
        }
    )


def peak_pct(t: Throughput, side: str = "head") -> float | None:
    """The larger of the compute and memory shares of the peak (what bounds the case), in %."""
    values = [v for v in (getattr(t, f"{side}_flops_pct"), getattr(t, f"{side}_bytes_pct")) if v is not None]
    return max(values) if values else None


def over_peak(t: Throughput, side: str = "head") -> list[str]:
    """What `side` claims beyond the hardware: each rate above 100 % of its peak, in the reader's numbers."""
    out = []
    for pct, rate, peak, unit in (
        (getattr(t, f"{side}_flops_pct"), getattr(t, f"{side}_tflops"), t.peak_tflops, "TFLOP/s"),
        (getattr(t, f"{side}_bytes_pct"), getattr(t, f"{side}_gbps"), t.peak_gbps, "GB/s"),
    ):
        if pct is not None and pct > 100.0 and rate is not None and peak is not None:
            out.append(f"{rate:,.4g} {unit} is {pct:,.0f}% of the peak {peak:,.4g} {unit}")
    return out


def judge_throughput(report: CaseReport, flops: int | None, nbytes: int | None, peak: Peak | None) -> None:
    """Fill in the case's throughput; a head above 100 % of the peak cannot be real and fails the case.

    A declared work that is too large, a timer that lies or a result computed once and replayed all look the
    same from here: the reason says "verify" and names the rate, the peak and whose peak it is.
    """
    t = throughput(flops, nbytes, report, peak)
    report.throughput = t
    if t is None:
        return
    if over := over_peak(t, "head"):  # first; an undecided latency of an impossible rate decides nothing
        report.verdict = "fail"
        report.reasons = [
            f"{IMPLAUSIBLE}: above the hardware limit — verify: head {'; '.join(over)} ({t.peak_of}); "
            "check the case's declared flops/bytes and the timing",
            *(r for r in report.reasons if not r.startswith("performance inconclusive")),
        ]
    if over := over_peak(t, "base"):
        report.reasons.append(f"base measured above the hardware limit: {'; '.join(over)}; verify the declared work")
