"""How close a case runs to the hardware: achieved TFLOP/s and GB/s from its declared work, the share of the
device's peak, and "implausible" above it (pure; the peaks of known GPUs are NVIDIA's data-sheet figures)."""

from __future__ import annotations

from dataclasses import dataclass

from bot.models.cost import Throughput
from bot.models.evidence import Peak
from bot.models.finding import Finding, Gate, Outcome, Phrase
from bot.models.report import CaseReport
from bot.verdict.findings import add_case, replace_case_findings
from bot.wording.messages import LABELS, phrase

IMPLAUSIBLE = LABELS["implausible"]  # the label of a case above the hardware limit (Gate.plausibility)

# NVIDIA's data sheets give tensor-core figures "with sparsity"; the dense rate is half of it. Bandwidth is the
# memory's (HBM, GDDR or LPDDR). Where a sheet gives several FP16 rates (GeForce: FP32 accumulate at half the FP16
# accumulate rate), the peak is the highest: it is the ceiling above which a measured rate cannot be real.
H100_SHEET = "NVIDIA H100 Tensor Core GPU data sheet (nvidia.com/en-us/data-center/h100): BF16 Tensor Core, sparse"
H200_SHEET = "NVIDIA H200 Tensor Core GPU data sheet (nvidia.com/en-us/data-center/h200): BF16 Tensor Core, sparse"
GH200_SHEET = "NVIDIA GH200 Grace Hopper Superchip data sheet (nvidia.com/en-us/data-center/grace-hopper-superchip)"
B200_SHEET = "NVIDIA HGX B200 / DGX B200 data sheets (nvidia.com/en-us/data-center/hgx, /dgx-b200): per-GPU FP16/BF16"
B300_SHEET = "NVIDIA HGX B300 data sheet (nvidia.com/en-us/data-center/hgx): 8 GPUs' FP16/BF16 Tensor Core, sparse"
NVL72_SHEET = "NVIDIA GB200 NVL72 / GB300 NVL72 data sheets (nvidia.com/en-us/data-center/gb200-nvl72, /gb300-nvl72)"
A100_SHEET = "NVIDIA A100 Tensor Core GPU data sheet (nvidia.com/en-us/data-center/a100): BF16 Tensor Core 312 TFLOPS"
A10_SHEET = "NVIDIA A10 Tensor Core GPU data sheet (nvidia.com/en-us/data-center/products/a10-gpu)"
L40_SHEET = "NVIDIA L40 GPU data sheet (nvidia.com/en-us/data-center/l40)"
L4_SHEET = "NVIDIA L4 Tensor Core GPU data sheet (nvidia.com/en-us/data-center/l4)"
L40S_SHEET = "NVIDIA L40S GPU data sheet (nvidia.com/en-us/data-center/l40s)"
T4_SHEET = "NVIDIA T4 Tensor Core GPU data sheet (nvidia.com/en-us/data-center/tesla-t4): no BF16 on Turing"
GA102_PAPER = "NVIDIA Ampere GA102 GPU Architecture whitepaper, appendix A (RTX 3090): FP16 Tensor, FP16 accumulate"
ADA_PAPER = "NVIDIA Ada GPU Architecture whitepaper, appendix A (RTX 4090): FP16 Tensor, FP16 accumulate"
GB202_PAPER = "NVIDIA RTX Blackwell GPU Architecture whitepaper, appendix A (RTX 5090): FP16 Tensor, FP16 accumulate"
ORIN_BRIEF = "NVIDIA Jetson AGX Orin Series Technical Brief (AGX Orin 64GB): the GPU's INT8 Tensor, sparse"


@dataclass(frozen=True)
class Device:
    """One GPU model's peaks: dense bf16 tensor-core TFLOP/s (the ceiling of every dtype a case may use:
    float32, float16 and bfloat16 all run at or below it) and memory bandwidth."""

    match: str  # a lower-case part of the name nvidia-smi reports ("NVIDIA H100 80GB HBM3" -> "h100")
    label: str
    tflops: float
    gbps: float
    source: str


# The most specific name first: "NVIDIA H100 NVL" is not an SXM H100, and "NVIDIA GB200" holds "b200". A name
# that leaves the model open (an A100 without its memory) gets the highest figure of the models it may be.
DEVICES: tuple[Device, ...] = (
    Device("h100 nvl", "NVIDIA H100 NVL", 1_671 / 2, 3_900, f"{H100_SHEET} 1,671 TFLOPS; 3.9 TB/s"),
    Device("h100 pcie", "NVIDIA H100 PCIe", 1_513 / 2, 2_000, f"{H100_SHEET} 1,513 TFLOPS; 2 TB/s"),
    Device("h100", "NVIDIA H100 SXM", 1_979 / 2, 3_350, f"{H100_SHEET} 1,979 TFLOPS; 3.35 TB/s"),
    Device("gh200", "NVIDIA GH200", 1_979 / 2, 4_900, f"{GH200_SHEET}: BF16 1,979 TFLOPS sparse; up to 4.9 TB/s"),
    Device("h200 nvl", "NVIDIA H200 NVL", 1_671 / 2, 4_800, f"{H200_SHEET} 1,671 TFLOPS; 4.8 TB/s"),
    Device("h200", "NVIDIA H200 SXM", 1_979 / 2, 4_800, f"{H200_SHEET} 1,979 TFLOPS; 4.8 TB/s"),
    Device("gb200", "NVIDIA GB200", 360_000 / 72 / 2, 8_000, f"{NVL72_SHEET}: 360 PFLOPS sparse and 576 TB/s, of 72"),
    Device("b200", "NVIDIA B200", 4_500 / 2, 8_000, f"{B200_SHEET} 4.5 PFLOPS with sparsity; 8 TB/s HBM3e"),
    Device("gb300", "NVIDIA GB300", 360_000 / 72 / 2, 8_000, f"{NVL72_SHEET}: 360 PFLOPS sparse and 576 TB/s, of 72"),
    Device("b300", "NVIDIA B300", 36_000 / 8 / 2, 8_000, f"{B300_SHEET} 36 PFLOPS and 64 TB/s HBM3e, of 8"),
    Device("a100-sxm4-40gb", "NVIDIA A100 40GB SXM", 312, 1_555, f"{A100_SHEET}; 1,555 GB/s"),
    Device("a100-pcie-40gb", "NVIDIA A100 40GB PCIe", 312, 1_555, f"{A100_SHEET}; 1,555 GB/s"),
    Device("a100 80gb pcie", "NVIDIA A100 80GB PCIe", 312, 1_935, f"{A100_SHEET}; 1,935 GB/s"),
    Device("a100", "NVIDIA A100 80GB SXM", 312, 2_039, f"{A100_SHEET}; 2,039 GB/s"),
    Device("a10", "NVIDIA A10", 250 / 2, 600, f"{A10_SHEET}: BF16 Tensor Core 250 TFLOPS sparse; 600 GB/s"),
    Device("rtx 3090", "NVIDIA GeForce RTX 3090", 142, 936, f"{GA102_PAPER} 142 TFLOPS dense; 936 GB/s"),
    Device("orin", "NVIDIA Jetson AGX Orin", 170 / 2 / 2, 204.8, f"{ORIN_BRIEF} 170 TOPS, FP16 half; 204.8 GB/s"),
    Device("l40s", "NVIDIA L40S", 733 / 2, 864, f"{L40S_SHEET}: BF16 Tensor Core 733 TFLOPS sparse; 864 GB/s"),
    Device("l40", "NVIDIA L40", 362.1 / 2, 864, f"{L40_SHEET}: BF16 Tensor Core 362.1 TFLOPS sparse; 864 GB/s"),
    Device("l4", "NVIDIA L4", 242 / 2, 300, f"{L4_SHEET}: BF16 Tensor Core 242 TFLOPS sparse; 300 GB/s"),
    Device("rtx 4090", "NVIDIA GeForce RTX 4090", 330.3, 1_008, f"{ADA_PAPER} 330.3 TFLOPS dense; 1,008 GB/s"),
    Device("rtx 5090", "NVIDIA GeForce RTX 5090", 419, 1_792, f"{GB202_PAPER} 419 TFLOPS dense; 1,792 GB/s"),
    Device(" t4", "NVIDIA T4", 65, 320, f"{T4_SHEET}: mixed-precision FP16/FP32 65 TFLOPS; 320+ GB/s"),
)


def device_peak(gpu: str | None) -> Peak | None:
    """The data-sheet peak of the GPU nvidia-smi names; None for a GPU the table does not know."""
    name = (gpu or "").lower()
    for d in DEVICES:
        if d.match in name:
            sheet = Phrase(key="peak.sheet", params={"device": d.label, "source": d.source})
            return Peak(tflops=d.tflops, gbps=d.gbps, of=sheet)
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
        peak_of=peak.of if peak else None,
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
    return [phrase(p) for p in over_peak_phrases(t, side)]


def over_peak_phrases(t: Throughput, side: str = "head") -> list[Phrase]:
    """`over_peak` as phrases of the message catalog."""
    out = []
    for pct, rate, peak, unit in (
        (getattr(t, f"{side}_flops_pct"), getattr(t, f"{side}_tflops"), t.peak_tflops, "TFLOP/s"),
        (getattr(t, f"{side}_bytes_pct"), getattr(t, f"{side}_gbps"), t.peak_gbps, "GB/s"),
    ):
        if pct is not None and pct > 100.0 and rate is not None and peak is not None:
            params = {"rate": f"{rate:,.4g}", "unit": unit, "pct": f"{pct:,.0f}", "peak": f"{peak:,.4g}"}
            out.append(Phrase(key="plausibility.rate", params=params))
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
    if over := over_peak_phrases(t, "head"):  # first; an undecided latency of an impossible rate decides nothing
        report.verdict = "fail"
        pct = peak_pct(t, "head")
        found = Finding(
            gate=Gate.plausibility,
            outcome=Outcome.fail,
            key="plausibility.over_peak",
            case=report.name,
            params={} if t.peak_of else {"peak_of": ""},
            phrases={"over": over, "peak_of": [t.peak_of]} if t.peak_of else {"over": over},
            value=pct,
            limit=100.0,
            unit="%",
        )
        kept = [
            f for f in report.findings if f.key not in ("performance.inconclusive", "performance.inconclusive_noisy")
        ]
        replace_case_findings(report, [found, *kept])
    if over := over_peak_phrases(t, "base"):
        add_case(
            report,
            Finding(
                gate=Gate.plausibility, outcome=Outcome.note, key="plausibility.base_over_peak", phrases={"over": over}
            ),
        )
