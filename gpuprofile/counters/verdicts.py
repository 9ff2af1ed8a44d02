"""Verdicts from measured counters: pure functions, tested on fixed numbers.

Bound from speed of light (SOL): with sm = sm__throughput and mem =
gpu__compute_memory_throughput, both in % of peak:

* one side >= HIGH (60 %): bound by the higher side ("compute-bound" or "memory-bound");
* both < LOW (40 %): "latency-bound" - neither the SM nor the memory system is kept busy, so
  the kernel waits on latency (dependent loads, too little parallelism, launch gaps);
* otherwise "mixed": neither side is clearly saturated or idle.

These are the thresholds Nsight Compute's guidance uses in spirit (>= 60 % of SOL is "high
utilisation"; below 40 % on both is latency-limited); they are conventions, not laws.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from .metric_sets import split

HIGH = 60.0
LOW = 40.0
# A compute-bound kernel whose tensor pipe is at least this busy is reported as tensor-bound.
TENSOR_HIGH = 60.0


@dataclass(frozen=True)
class Verdict:
    """bound: compute-bound, memory-bound, latency-bound, mixed or unknown; reason: why."""

    bound: str
    reason: str
    sm_pct: float
    memory_pct: float
    tensor_pct: float | None = None

    def to_dict(self) -> dict:
        return asdict(self)

    def __str__(self) -> str:
        return f"{self.bound} ({self.reason})"


def _finite(x) -> bool:
    return x is not None and not (isinstance(x, float) and math.isnan(x))


def bound_from_sol(sm_pct, memory_pct, tensor_pct=None) -> Verdict:
    """Classify from SOL percentages (see the module docstring for the thresholds)."""
    if not (_finite(sm_pct) and _finite(memory_pct)):
        return Verdict("unknown", "SOL metrics missing", float("nan"), float("nan"), tensor_pct)
    sm, mem = float(sm_pct), float(memory_pct)
    if sm >= HIGH or mem >= HIGH:
        if sm >= mem:
            tensor = _finite(tensor_pct) and tensor_pct >= TENSOR_HIGH
            kind = "compute-bound (tensor)" if tensor else "compute-bound"
            why = f"SM {sm:.1f} % of peak >= {HIGH:.0f} %"
            if tensor:
                why += f", tensor pipe {tensor_pct:.1f} %"
            return Verdict(kind, why, sm, mem, tensor_pct)
        return Verdict("memory-bound", f"memory {mem:.1f} % of peak >= {HIGH:.0f} %", sm, mem, tensor_pct)
    if sm < LOW and mem < LOW:
        return Verdict("latency-bound", f"SM {sm:.1f} % and memory {mem:.1f} % both < {LOW:.0f} %",
                       sm, mem, tensor_pct)
    return Verdict("mixed", f"SM {sm:.1f} %, memory {mem:.1f} %: neither >= {HIGH:.0f} % nor "
                   f"both < {LOW:.0f} %", sm, mem, tensor_pct)


@dataclass(frozen=True)
class RooflinePoint:
    """A kernel on the roofline: measured work and time against measured ceilings."""

    flops: float
    bytes: float
    seconds: float
    intensity: float  # FLOP per DRAM byte
    flops_per_s: float
    bytes_per_s: float
    peak_flops_per_s: float
    peak_bytes_per_s: float
    ridge: float  # intensity where the memory roof meets the compute roof
    attainable_flops_per_s: float
    efficiency: float  # achieved / attainable
    region: str  # "memory" (left of the ridge) or "compute"

    def to_dict(self) -> dict:
        return asdict(self)


def roofline_point(flops, bytes_, seconds, peak_flops_per_s, peak_bytes_per_s) -> RooflinePoint:
    """Place measured (flops, bytes, seconds) under the roofs min(peak, intensity * bandwidth)."""
    for what, v in (("seconds", seconds), ("peak_flops_per_s", peak_flops_per_s),
                    ("peak_bytes_per_s", peak_bytes_per_s)):
        if not _finite(v) or v <= 0:
            raise ValueError(f"roofline: {what} must be positive, got {v}")
    if flops < 0 or bytes_ < 0:
        raise ValueError("roofline: flops and bytes must be >= 0")
    intensity = flops / bytes_ if bytes_ > 0 else math.inf
    ridge = peak_flops_per_s / peak_bytes_per_s
    attainable = min(peak_flops_per_s, intensity * peak_bytes_per_s)
    achieved = flops / seconds
    return RooflinePoint(
        flops=float(flops), bytes=float(bytes_), seconds=float(seconds), intensity=intensity,
        flops_per_s=achieved, bytes_per_s=bytes_ / seconds, peak_flops_per_s=peak_flops_per_s,
        peak_bytes_per_s=peak_bytes_per_s, ridge=ridge, attainable_flops_per_s=attainable,
        efficiency=achieved / attainable if attainable > 0 else float("nan"),
        region="memory" if intensity < ridge else "compute",
    )


def aggregation(name: str) -> str:
    """How values of metric `name` from several kernels combine into one total:

    * "sum"  - counts (name ends in .sum or .avg with nothing after): linear in the work;
    * "max" / "min" - .max / .min rollups of counts (the extreme kernel);
    * "weighted" - rates, ratios and percentages (.pct, .ratio, .per_second, pct_of_peak...):
      a mean weighted by each kernel's gpu__time_duration (exact when every kernel runs at the
      same clocks, since elapsed cycles are then proportional to duration).
    """
    _, suffix = split(name)
    if suffix in (".sum", ".avg"):
        return "sum"
    if suffix in (".max", ".min"):
        return suffix[1:]
    return "weighted"


def combine(values, durations, how: str) -> float:
    """Combine per-kernel `values` by `how` (see aggregation); NaN for no kernels."""
    vals = [float(v) for v in values]
    if not vals:
        return float("nan")
    if how == "sum":
        return math.fsum(vals)
    if how == "max":
        return max(vals)
    if how == "min":
        return min(vals)
    weights = [float(d) for d in durations]
    total = math.fsum(weights)
    if total <= 0:
        return math.fsum(vals) / len(vals)
    return math.fsum(v * w for v, w in zip(vals, weights, strict=True)) / total
