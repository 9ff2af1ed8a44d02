"""Pure statistics on samples: no device, no globals; tested with exact values."""

from __future__ import annotations

import functools
import math
import statistics

import numpy as np


def percentile(samples, q: float) -> float:
    """The q-th percentile (0..100) with linear interpolation (NumPy's default); NaN when empty."""
    a = np.asarray(samples, dtype=np.float64)
    return float(np.percentile(a, q)) if a.size else math.nan


def summary(samples) -> dict:
    """count, total, mean, median, min, max, p10, p90, stdev (sample, ddof=1) and IQR of samples."""
    a = np.asarray(samples, dtype=np.float64)
    n = int(a.size)
    if n == 0:
        nan = math.nan
        return dict(count=0, total=0.0, mean=nan, median=nan, min=nan, max=nan, p10=nan, p90=nan,
                    stdev=nan, iqr=nan)
    p10, p25, p50, p75, p90 = np.percentile(a, [10, 25, 50, 75, 90])
    return dict(
        count=n,
        total=float(a.sum()),
        mean=float(a.mean()),
        median=float(p50),
        min=float(a.min()),
        max=float(a.max()),
        p10=float(p10),
        p90=float(p90),
        stdev=float(a.std(ddof=1)) if n > 1 else 0.0,
        iqr=float(p75 - p25),
    )


# Above this many samples the binomial ranks come from the normal approximation (with continuity
# correction): the exact sum costs O(n) and the two agree to within one rank there.
_EXACT_RANKS_LIMIT = 5000


@functools.lru_cache(maxsize=4096)
def median_ci_ranks(n: int, confidence: float = 0.95) -> tuple[int, int] | None:
    """1-based ranks (l, u) of the order statistics X(l) <= X(u) that bound a distribution-free
    confidence interval of the median of n samples, or None when n is too small for any.

    P(X(l) <= median <= X(u)) = 1 - 2 P(B <= l - 1) with B ~ Binomial(n, 1/2) and u = n + 1 - l,
    for any continuous distribution; l is the largest rank with that coverage >= `confidence`.
    Example: n = 10 gives (2, 9), coverage 1 - 2 * 11/1024 = 97.9 %.
    """
    if n < 1 or not 0 < confidence < 1:
        raise ValueError(f"need n >= 1 and 0 < confidence < 1, got n={n}, confidence={confidence}")
    tail = (1 - confidence) / 2
    if n <= _EXACT_RANKS_LIMIT:
        log_pmf = -n * math.log(2)  # P(B = 0)
        cdf, rank = 0.0, 0
        for k in range(n // 2 + 1):
            cdf += math.exp(log_pmf)
            if cdf > tail:
                break
            rank = k + 1
            log_pmf += math.log(n - k) - math.log(k + 1)
    else:
        z = statistics.NormalDist().inv_cdf(1 - tail)
        rank = math.floor(n / 2 + 0.5 - z * math.sqrt(n) / 2)
    return (rank, n + 1 - rank) if rank >= 1 else None


def median_ci(samples, confidence: float = 0.95) -> tuple[float, float]:
    """Distribution-free confidence interval (low, high) of the median: the order statistics at
    median_ci_ranks(n). (nan, nan) when there are too few samples (n < 6 at 95 %)."""
    a = np.asarray(samples, dtype=np.float64)
    ranks = median_ci_ranks(int(a.size), confidence) if a.size else None
    if ranks is None:
        return math.nan, math.nan
    lo, hi = ranks[0] - 1, ranks[1] - 1
    part = np.partition(a, [lo, hi])
    return float(part[lo]), float(part[hi])


def resolve(samples, low: float, high: float, resolution: float = 0.0) -> tuple[float, float, float]:
    """(low, high, step): [low, high] widened on each side to the nearest distinct sample value
    beyond it, and by at least `resolution` (the clock's stated resolution); `step` is the larger
    widening. Samples read through a coarse clock take few distinct values: between two of them
    the samples cannot tell where the median lies, so an interval of the median never ends
    inside such a gap, and ties never give a zero-width interval. On fine-grained samples the
    neighbours are one order statistic away and the widening is negligible. A side without a
    neighbour (all samples beyond it are tied) takes the other side's gap. NaN bounds stay NaN."""
    if math.isnan(low) or math.isnan(high):
        return low, high, math.nan
    values = np.unique(np.asarray(samples, dtype=np.float64))
    i = int(np.searchsorted(values, low, side="left"))
    j = int(np.searchsorted(values, high, side="right"))
    below = low - values[i - 1] if i > 0 else math.nan
    above = values[j] - high if j < values.size else math.nan
    below = above if math.isnan(below) else below
    above = below if math.isnan(above) else above
    step_low = max(resolution, 0.0 if math.isnan(below) else float(below))
    step_high = max(resolution, 0.0 if math.isnan(above) else float(above))
    return max(0.0, low - step_low), high + step_high, max(step_low, step_high)


def resolved_median_ci(samples, resolution: float = 0.0, confidence: float = 0.95) -> tuple[float, float, float]:
    """(low, high, step): median_ci(samples) widened by resolve() for the clock's resolution."""
    return resolve(samples, *median_ci(samples, confidence), resolution)


def rel_half_width(low: float, high: float, center: float) -> float:
    """(high - low) / 2 / center: the relative half-width of an interval; inf when undefined."""
    if math.isnan(low) or math.isnan(high) or math.isnan(center):
        return math.inf
    if center <= 0:
        return 0.0 if high == low else math.inf
    return (high - low) / 2 / center


def rel_noise(samples, confidence: float = 0.95) -> float:
    """Relative half-width of the confidence interval of the median of samples (inf if too few)."""
    a = np.asarray(samples, dtype=np.float64)
    low, high = median_ci(a, confidence)
    return rel_half_width(low, high, float(np.median(a)) if a.size else math.nan)


def ratio_interval(low_a: float, high_a: float, low_b: float, high_b: float) -> tuple[float, float]:
    """Bounds of a/b when a lies in [low_a, high_a] and b in [low_b, high_b]: a conservative
    interval for the ratio of two medians from their confidence intervals. The highs must be
    positive and the lows >= 0 (a low of 0, from an interval widened by a clock's resolution,
    makes that side of the ratio 0 or inf); NaN bounds otherwise."""
    values = (low_a, high_a, low_b, high_b)
    if any(map(math.isnan, values)) or min(values) < 0 or min(high_a, high_b) <= 0:
        return math.nan, math.nan
    return low_a / high_b, (high_a / low_b if low_b > 0 else math.inf)
