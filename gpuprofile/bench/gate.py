"""What a regression gate may trust in a benchmark result, and the interval it compares.

A gate (`gpuprofile compare --fail-slower`, the pytest plugin's --gpu-benchmark-fail-slower)
fails closed: a result whose median or interval is not a finite positive number, whose samples
are not finite non-negative numbers, or whose median is not the median of its own samples (a
damaged or hand-edited file) is an error naming the field, never a pass. Works on dicts (the
plugin's saved entries) and BenchmarkResults alike; NumPy is imported only to check samples.
"""

from __future__ import annotations

import math

# The median saved with a result must equal its samples' median to this relative tolerance
# (both come from the same float64 samples; the slack only covers summation order).
_MEDIAN_RTOL = 1e-9

WITHIN_ONE_RUN = (
    "intervals are 95 % intervals of each median within one run: they do not cover what "
    "changes between runs (clocks, other load, the machine); for a CI gate measure each side with "
    "rounds (gpuprofile bench --rounds 5, pytest --gpu-benchmark-rounds 5), whose intervals "
    "cover the spread between rounds")


def _get(result, key):
    return result.get(key) if isinstance(result, dict) else getattr(result, key, None)


def _number_problem(key: str, value) -> str | None:
    if value is None:
        return f"{key!r} is null (a number that was not finite when saved)"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return f"{key!r} must be a number, got {type(value).__name__}"
    try:
        value = float(value)
    except OverflowError:
        return f"{key!r} is too large"
    if not math.isfinite(value):
        return f"{key!r} is {value} (not finite)"
    if value <= 0:
        return f"{key!r} is {value:g} (must be > 0)"
    return None


def problem(result) -> str | None:
    """Why `result` (a BenchmarkResult or its dict) cannot be gated on, or None when it can."""
    for key in ("median_ms", "ci_low_ms", "ci_high_ms"):
        if isinstance(result, dict) and key not in result:
            return f"{key!r} is missing"
        value = _get(result, key)
        why = _number_problem(key, value)
        if why is not None:
            if key != "median_ms" and (value is None or _is_nan(value)):
                why += "; a result needs 6 samples or more for a 95 % interval"
            return why
    median, low, high = (float(_get(result, k)) for k in ("median_ms", "ci_low_ms", "ci_high_ms"))
    if not low <= median <= high:
        return (f"'median_ms' {median:.6g} lies outside its interval 'ci_low_ms' .. 'ci_high_ms' "
                f"{low:.6g} .. {high:.6g}")
    samples = _get(result, "samples")
    if samples is not None and not hasattr(samples, "__len__"):
        return f"'samples' must be a list of numbers, got {type(samples).__name__}"
    if samples is None or len(samples) == 0:
        return None
    return _samples_problem(samples, median)


def _is_nan(value) -> bool:
    return isinstance(value, float) and math.isnan(value)


def _samples_problem(samples, median: float) -> str | None:
    import numpy as np

    try:
        a = np.asarray(samples, dtype=np.float64)
    except (TypeError, ValueError, OverflowError):
        return "'samples' must be a list of numbers"
    if a.ndim != 1:
        return "'samples' must be a flat list of numbers"
    bad = np.flatnonzero(~np.isfinite(a) | (a < 0))
    if bad.size:
        return f"'samples'[{int(bad[0])}] is {float(a[bad[0]])!r} (samples must be finite and >= 0)"
    own = float(np.median(a))
    if not math.isclose(own, median, rel_tol=_MEDIAN_RTOL, abs_tol=0.0):
        return (f"'median_ms' {median:.9g} is not the median of its own {a.size} samples "
                f"({own:.9g})")
    return None


def check(result, where: str) -> None:
    """ValueError '<where>: <problem>' unless `result` can be gated on."""
    why = problem(result)
    if why is not None:
        raise ValueError(f"{where}: {why}")


def interval(result) -> tuple[float, float]:
    """The interval of the median to compare: the saved one, which since `resolution_ms` exists
    already holds the clock's resolution; for results saved before, widened here from their
    samples as _stats.resolve() does, so that quantised samples never claim a zero-width
    interval."""
    from .. import _stats

    low, high = _get(result, "ci_low_ms"), _get(result, "ci_high_ms")
    samples = _get(result, "samples")
    if _get(result, "resolution_ms") is not None or samples is None or not len(samples):
        return low, high
    return _stats.resolve(samples, low, high)[:2]
