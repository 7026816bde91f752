"""What a case costs beside its latency and its error: CPU time, the simulated cost, throughput against the peak."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from bot.models.before3 import phrase_of
from bot.models.finding import Phrase


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class CpuUse(_Model):
    """CPU seconds of a side's sandbox while it was timed, inside and outside its timed calls (CPU cases)."""

    timed_wall_s: float = 0.0
    timed_cpu_s: float = 0.0
    untimed_cpu_s: float = 0.0


class SideCost(_Model):
    """One side's simulated cost per call under callgrind (instructions and a cycle estimate; no clock involved)."""

    instructions: int = Field(description="instructions executed per call (callgrind Ir)")
    l1_misses: int = Field(0, description="first-level instruction and data cache misses per call (simulated)")
    ll_misses: int = Field(0, description="last-level cache misses per call (simulated)")
    cycles: int = Field(description="estimated cycles per call: instructions + 10 x L1 misses + 100 x LL misses")
    calls: int = Field(description="calls counted (after one uncounted call)")


class SimulatedCost(_Model):
    """A CPU case's noise-free second opinion: head and base counted under callgrind (untrusted/runner/cost.py)."""

    tool: str = "callgrind"
    head: SideCost | None = None
    base: SideCost | None = None
    ratio: float | None = Field(None, description="head / base estimated cycles")
    instructions_ratio: float | None = Field(None, description="head / base instructions")
    decided: bool = Field(
        False,
        description="false since issue 40: the simulated cost is reported and decides nothing (read in older reports)",
    )
    seconds: float | None = Field(None, description="wall time of the simulation, both sides")
    error: str | None = Field(None, description="why there is no simulated cost (valgrind missing, a side failed)")


class Throughput(_Model):
    """What a case's declared work (kernel.toml `flops`/`bytes`) means at its p50: achieved rates and their share
    of the device's peak (bot/verdict/throughput.py)."""

    flops: int | None = Field(None, description="floating-point operations of one call (the case's `flops`)")
    bytes: int | None = Field(None, description="bytes one call moves (the case's `bytes`)")
    head_tflops: float | None = None
    base_tflops: float | None = None
    head_gbps: float | None = None
    base_gbps: float | None = None
    peak_tflops: float | None = Field(None, description="the device's peak: dense bf16 TFLOP/s (a GPU's data sheet)")
    peak_gbps: float | None = Field(None, description="the device's peak memory bandwidth, GB/s")
    head_flops_pct: float | None = Field(None, description="head's TFLOP/s in % of peak_tflops")
    head_bytes_pct: float | None = Field(None, description="head's GB/s in % of peak_gbps")
    base_flops_pct: float | None = None
    base_bytes_pct: float | None = None
    peak_of: Phrase | None = Field(
        None, description="whose peak: a data-sheet row, or the measurement of this CPU runner"
    )

    @model_validator(mode="before")
    @classmethod
    def _before_3(cls, data: Any) -> Any:
        """report.json /1, /2: `peak_of` in English, its phrase beside it under `peak_why`."""
        return phrase_of(data, "peak_of", "peak_why")
