"""Pure statistics on samples: no device, no globals; tested with exact values."""

from __future__ import annotations

import math

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
