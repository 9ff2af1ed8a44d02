"""do_bench(): triton.testing.do_bench's signature and return values, measured by
gpuprofile.benchmark. A drop-in for code written against Triton's helper:

    ms = gp.do_bench(lambda: matmul(a, b))                          # mean, in ms
    p50, p20, p80 = gp.do_bench(fn, quantiles=[0.5, 0.2, 0.8])      # ms

Like Triton's, times are milliseconds, `warmup` and `rep` are budgets in ms (calls are repeated
for about that long), the L2 cache is flushed before every timed call, and `grad_to_none`'s
tensors have their .grad reset to None before each call, outside the timed interval. What times
a call is gpuprofile.benchmark's clock: CUPTI records or CUDA events with a device, the host
clock without one. The stopping rule is the budget, as in Triton; gpuprofile.benchmark itself
(times in seconds, a BenchmarkResult with its confidence interval) is the one to use when the
noise matters.
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from .benchmark import run
from .options import make_options

RETURN_MODES = ("min", "max", "mean", "median", "all")


def _budget_ms(value, what: str, allow_zero: bool) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"do_bench: {what} must be a number of milliseconds, got {type(value).__name__}")
    value = float(value)
    if not math.isfinite(value) or value < 0 or (value == 0 and not allow_zero):
        least = ">= 0" if allow_zero else "> 0"
        raise ValueError(f"do_bench: {what} must be a finite number of milliseconds {least}, got {value}")
    return value


def _quantiles(quantiles) -> list | None:
    if quantiles is None:
        return None
    try:
        qs = [float(q) for q in quantiles]
    except (TypeError, ValueError):
        raise TypeError(f"do_bench: quantiles must be a list of numbers in [0, 1], got {quantiles!r}") from None
    if not qs or not all(0.0 <= q <= 1.0 for q in qs):
        raise ValueError(f"do_bench: quantiles must be a non-empty list of numbers in [0, 1], got {quantiles!r}")
    return qs


def _grad_reset(grad_to_none):
    """The untimed setup that resets each tensor's .grad, or None."""
    if grad_to_none is None:
        return None
    tensors = list(grad_to_none)

    def reset():
        for t in tensors:
            t.grad = None

    return reset


def do_bench(fn, warmup=25, rep=100, grad_to_none=None, quantiles=None,
             return_mode="mean") -> float | list:
    """Time fn() as triton.testing.do_bench does, in milliseconds.

    warmup, rep: budgets in ms for the warm-up calls and the timed calls. grad_to_none: tensors
    whose .grad is set to None before every call (untimed). quantiles: a list of fractions in
    [0, 1]; when given, the times at those quantiles are returned (linear interpolation, as
    torch.quantile), a single float for a list of one. Otherwise return_mode picks what is
    returned: 'mean' (default), 'median', 'min', 'max', or 'all' (every timed call's ms, a list).
    """
    if not callable(fn):
        raise TypeError(f"do_bench: fn must be callable, got {type(fn).__name__}")
    if return_mode not in RETURN_MODES:
        raise ValueError(f"do_bench: return_mode must be one of {RETURN_MODES}, got {return_mode!r}")
    warmup_s = _budget_ms(warmup, "warmup", allow_zero=True) / 1e3
    rep_s = _budget_ms(rep, "rep", allow_zero=False) / 1e3
    qs = _quantiles(quantiles)
    opts = make_options(warmup=warmup_s, min_time=rep_s, max_time=rep_s, min_iters=1)
    with warnings.catch_warnings():
        # the budget is the stopping rule, as in Triton: stopping at it is no warning here
        warnings.filterwarnings("ignore", message=r"gpuprofile\.benchmark\(", category=RuntimeWarning)
        result = run(fn, (), {}, opts, setup=_grad_reset(grad_to_none))
    times = np.asarray(result.samples, dtype=np.float64)
    if qs is not None:
        got = [float(x) for x in np.quantile(times, qs)]
        return got[0] if len(got) == 1 else got
    if return_mode == "all":
        return times.tolist()
    return float(getattr(np, return_mode)(times))
